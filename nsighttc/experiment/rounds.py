"""How many rounds ``nsighttc try`` runs, and when a variant's speed-up is clear: the stopping rule.

Why not one round: two plain runs of the same launch-bound program land far apart (an unchanged ``generate()`` loop
measured 1.60x against its baseline in one round on an H200, 1.76x on an H100), and a static KV cache measured
6.49x in one round where plain runs with and without it differ by 4.50x. Why not a fixed N: a 5x change is clear
after two rounds, a 3% one may never be within a budget.

The rule, per variant, from its rounds (each round: one plain run of the baseline, then one of the variant; the
round's speed-up is their ratio):
- the speed-up is the geometric mean of the rounds' ratios, its spread the 90% confidence interval of that mean
  (Student's t on the ratios' logarithms, two rounds at least);
- the ratios' spread is never taken as smaller than the baseline's own run-to-run noise (its step over the rounds):
  two rounds that agree by chance are not a verdict;
- **clear** when the interval excludes 1.00x (faster or slower), or lies within ``NO_CHANGE`` of it (no measurable
  change); otherwise another round runs, while ``MAX_ROUNDS`` and the time budget allow. What is still unclear then is
  reported as no measurable change, with its interval (the runs were too noisy to tell within the budget).
"""
from __future__ import annotations

import math

MIN_ROUNDS = 2        # a spread needs two runs of each at least
MAX_ROUNDS = 6        # (then the budget or this stops the rounds)
NO_CHANGE = 0.05      # an interval within 1/1.05 .. 1.05 is "no measurable change" (smaller changes are not claimed)
DEFAULT_BUDGET_S = 600.0
# Student's t for a two-sided 90% interval, by degrees of freedom (rounds - 1)
T90 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812}


def _t(df: int) -> float:
    return T90.get(df, 1.645 if df > 30 else 1.75)


def log_sd(values: list[float]) -> float:
    """Sample standard deviation of the values' logarithms (0 with fewer than two)."""
    logs = [math.log(v) for v in values if v and v > 0]
    if len(logs) < 2:
        return 0.0
    m = sum(logs) / len(logs)
    return math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))


def run_noise(baseline_steps: list[float]) -> float:
    """The least spread (log sd) the rounds' ratios are taken to have: the baseline's own step over its rounds (a
    variant's runs may be steadier than the baseline's: a graph-replayed loop against a launch-bound one)."""
    return log_sd(baseline_steps)


def interval(ratios: list[float], noise: float = 0.0) -> tuple[float, float, float]:
    """(speed-up, low, high): the geometric mean of the rounds' ratios and its 90% interval, the ratios' spread
    floored at ``noise``. With one ratio the interval is that ratio alone (the caller gives a one-round spread)."""
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    mid = sum(logs) / n
    if n < 2:
        return math.exp(mid), math.exp(mid), math.exp(mid)
    sd = max(log_sd(ratios), noise)
    half = _t(n - 1) * sd / math.sqrt(n)
    return math.exp(mid), math.exp(mid - half), math.exp(mid + half)


def state(low: float, high: float, rounds: int) -> str | None:
    """"faster", "slower", "no measurable change", or None (not clear yet: another round would tell more)."""
    if rounds < MIN_ROUNDS:
        return None
    if low > 1.0:
        return "faster"
    if high < 1.0:
        return "slower"
    if low >= 1 / (1 + NO_CHANGE) and high <= 1 + NO_CHANGE:
        return "no measurable change"
    return None


def another_round(spent_s: float, last_round_s: float, budget_s: float) -> bool:
    """Whether one more round (as long as the last one) still ends within the budget."""
    return spent_s + last_round_s <= budget_s

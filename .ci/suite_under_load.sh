#!/usr/bin/env bash
# The README's test suite, RUNS times in a row, with one CPU burner beside it (issue 53: tests must not break on a
# busy machine). Prints one line per run: exit code, seconds, pytest's last line. Usage:
#   bash .ci/suite_under_load.sh [RUNS]      (from the repository root, in the test environment)
set -u
RUNS=${1:-3}
cd "$(dirname "$0")/.."
python3 -c "while True: pass" & BURNER=$!
trap 'kill $BURNER 2>/dev/null' EXIT
for i in $(seq 1 "$RUNS"); do
  log=$(mktemp)
  s=$(date +%s)
  timeout 1500 python -m pytest -q -n auto -p no:cacheprovider > "$log" 2>&1
  rc=$?
  echo "run $i rc=$rc $(( $(date +%s) - s )) s $(tail -1 "$log")"
  rm -f "$log"
done

"""Number parsing: locale separators decided per file, units, instanced values."""
import pandas as pd

from nsighttc.parse.numbers import detect_separators, to_float, unit_factor
from tests.conftest import RAW, read_rows


def _hmma_column():
    rows = read_rows(RAW)
    i = rows[0].index("sm__inst_executed_pipe_tensor_op_hmma.sum")
    return pd.Series([r[i] for r in rows[2:]])


def test_english_thousands_separators_from_real_values():
    col = _hmma_column()
    assert "76,032" in set(col)
    assert detect_separators(col) == (",", ".")
    assert to_float(col).loc[col == "76,032"].iloc[0] == 76032.0


def test_dot_grouped_locale_gives_same_numbers():
    col = _hmma_column()
    other = col.str.replace(",", ".", regex=False)  # how a de_DE ncu writes the same counts
    grouped = other[other.str.count(r"\.") >= 2]
    assert not grouped.empty, "need multi-group values to tell the locale"
    assert detect_separators(other) == (".", ",")
    pd.testing.assert_series_equal(to_float(other, ".", ","), to_float(col), check_names=False)


def test_instanced_values_are_summed_for_sum_metrics():
    col = _hmma_column()
    v = to_float(col)
    big = col[v > 10].iloc[0]
    n = int(to_float(pd.Series([big])).iloc[0])
    inst = f"(0) {n // 2:,};(1) {n - n // 2:,}"
    assert to_float(pd.Series([inst])).iloc[0] == n
    assert to_float(pd.Series([inst]), sum_instances=False).iloc[0] == n / 2


def test_not_numbers_become_nan():
    assert to_float(pd.Series(["n/a", "", "abc"])).isna().all()


def test_units_scale_time_to_ns():
    assert unit_factor("ns") == 1 and unit_factor("us") == 1e3 and unit_factor("usecond") == 1e3
    assert unit_factor("ms") == 1e6 and unit_factor("Kinst") == 1e3 and unit_factor("%") == 1

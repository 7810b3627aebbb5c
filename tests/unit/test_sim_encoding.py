"""Event serialisation helpers: float literals by table lookup, rows copied as raw bytes."""

from __future__ import annotations

import numpy as np

from simulators.encoding import FixedDecimals
from simulators.records import concat, row_dtype, take


def test_fixed_decimals_write_the_rounded_value_with_fixed_decimals() -> None:
    values = np.random.default_rng(7).normal(20.0, 15.0, 5000)
    table = FixedDecimals(2)
    got = table.literals(values)
    assert got == [b"%.2f" % (np.rint(v * 100) / 100 + 0.0) for v in values]  # no -0.00
    assert sum(g != b"%.2f" % v for g, v in zip(got, values, strict=True)) <= 2  # only halves


def test_fixed_decimals_grow_to_new_values_and_fall_back_beyond_their_span() -> None:
    table = FixedDecimals(1, max_span=1000)
    assert table.literals(np.array([1.0, 2.5])) == [b"1.0", b"2.5"]
    assert table.literals(np.array([-3.04, 20.0])) == [b"-3.0", b"20.0"]  # grows both ways
    assert table.literals(np.array([0.0, 5000.0])) == [b"0.0", b"5000.0"]  # too wide: formats
    assert table.literals(np.array([np.nan, 1.0])) == [b"nan", b"1.0"]
    assert table.literals(np.zeros(0)) == []


def test_take_and_concat_copy_rows_like_numpy_does() -> None:
    dtype = row_dtype([("temperature_c", "f8"), ("status", "i4")])
    rows = np.zeros(50, dtype=dtype)
    for name in dtype.names or ():
        rows[name] = np.arange(50) * 3 % 7
    rows["temperature_c"] = np.linspace(-1, 1, 50)
    index = np.random.default_rng(1).permutation(50)[:20]
    mask = rows["ent"] % 2 == 0
    assert take(rows, index).tobytes() == rows[index].tobytes()
    assert take(rows, mask).tobytes() == rows[mask].tobytes()
    joined = concat([rows[:10], rows[:0], rows[30:]], dtype)
    assert joined.dtype == dtype
    assert joined.tobytes() == np.concatenate([rows[:10], rows[30:]]).tobytes()

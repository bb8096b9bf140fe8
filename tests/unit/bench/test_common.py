"""The benches' statistics and argument parsing."""

from __future__ import annotations

import math

import pytest

from bench.common import parse_counts, percentile, summary, table


def test_percentile_interpolates_between_the_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]  # order does not matter
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))


def test_summary_of_a_hundred_samples() -> None:
    s = summary([float(i) for i in range(1, 101)])
    assert s["n"] == 100
    assert s["p50"] == pytest.approx(50.5)
    assert s["p99"] == pytest.approx(99.01)
    assert s["max"] == 100.0 and s["mean"] == pytest.approx(50.5)


def test_summary_of_nothing_is_nan_not_an_error() -> None:
    s = summary([])
    assert s["n"] == 0 and math.isnan(s["p50"]) and math.isnan(s["max"])


def test_parse_counts() -> None:
    assert parse_counts("1,10,30,100") == [1, 10, 30, 100]
    assert parse_counts(" 0, 30 ") == [0, 30]


@pytest.mark.parametrize("bad", ["", "1,,2", "ten", "-1", "1.5", "1;2"])
def test_parse_counts_refuses_anything_but_non_negative_integers(bad: str) -> None:
    with pytest.raises(ValueError, match="comma-separated non-negative integers"):
        parse_counts(bad)


def test_table_aligns_columns_and_prints_floats_to_the_millisecond() -> None:
    out = table(["pods", "p50 s"], [[1, 0.38], [100, 16.2449]]).splitlines()
    assert out == ["pods   p50 s",
                   "----  ------",
                   "   1   0.380",
                   " 100  16.245"]

"""timegm: the epoch seconds of a UTC calendar time, as calendar.timegm counts them."""

from __future__ import annotations

import calendar

import pytest

from minikubelet.base.kubetime import timegm


def test_timegm_counts_as_calendar_does_including_carried_over_fields() -> None:
    for fields in [(1970, 1, 1, 0, 0, 0), (2026, 11, 29, 10, 12, 59), (2024, 2, 29, 23, 59, 60), (2023, 2, 31, 0, 0, 0),
                   (1969, 12, 31, 23, 59, 59), (1601, 1, 1, 0, 0, 0), (9999, 12, 31, 24, 60, 61)]:
        assert timegm(*fields) == calendar.timegm((*fields, 0, 0, 0)), fields


def test_a_month_out_of_range_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        timegm(2026, 13, 1, 0, 0, 0)

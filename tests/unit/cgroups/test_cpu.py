"""CPU conversions, pinned to upstream values (helpers_linux_test.go TestMilliCPUToQuota)."""

from __future__ import annotations

import pytest

from cgroups.cpu import milli_cpu_to_quota, milli_cpu_to_shares, shares_to_weight


# Upstream TestMilliCPUToQuota table (period 100000).
@pytest.mark.parametrize(
    ("milli", "quota"),
    [(0, 0), (5, 1000), (9, 1000), (10, 1000), (200, 20000), (500, 50000), (1000, 100000), (1500, 150000)],
)
def test_milli_cpu_to_quota_upstream_table(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize(("milli", "period", "quota"), [(250, 50000, 12500), (5, 50000, 1000), (1, 1000000, 1000)])
def test_milli_cpu_to_quota_other_periods(milli: int, period: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli, period) == quota


@pytest.mark.parametrize(
    ("milli", "shares"),
    [
        (0, 2),  # zero request: kernel minimum, not Docker's default 1024
        (1, 2),  # 1*1024/1000 = 1 -> raised to the minimum
        (2, 2),
        (3, 3),
        (100, 102),
        (250, 256),
        (1000, 1024),
        (2500, 2560),
        (256000, 262144),
        (300000, 262144),  # capped
    ],
)
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("shares", "weight"),
    [(2, 1), (102, 4), (1024, 39), (2048, 79), (262144, 10000), (0, 1), (10**7, 10000)],
)
def test_shares_to_weight(shares: int, weight: int) -> None:
    assert shares_to_weight(shares) == weight

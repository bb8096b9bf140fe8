"""CPU unit conversions, as upstream pkg/kubelet/cm/helpers_linux.go and cgroup_manager_linux.go."""

from __future__ import annotations

from typing import Final

MIN_SHARES: Final = 2
MAX_SHARES: Final = 262144
SHARES_PER_CPU: Final = 1024
MILLI_CPU_TO_CPU: Final = 1000
QUOTA_PERIOD_US: Final = 100_000
MIN_QUOTA_PERIOD_US: Final = 1000
MAX_WEIGHT: Final = 10000


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """cpu.shares for a request in millicores; 0 maps to the kernel minimum 2, not Docker's 1024."""
    if milli_cpu == 0:
        return MIN_SHARES
    shares = (milli_cpu * SHARES_PER_CPU) // MILLI_CPU_TO_CPU
    return max(MIN_SHARES, min(MAX_SHARES, shares))


def shares_to_weight(shares: int) -> int:
    """cgroup v2 cpu.weight for v1 shares: the kubelet's linear map of [2, 262144] onto [1, 10000]."""
    shares = max(MIN_SHARES, min(MAX_SHARES, shares))
    return 1 + ((shares - MIN_SHARES) * 9999) // (MAX_SHARES - MIN_SHARES)


def weight_to_shares(weight: int) -> int:
    """The inverse of shares_to_weight (upstream CpuWeightToCpuShares)."""
    return ((weight - 1) * (MAX_SHARES - MIN_SHARES)) // 9999 + MIN_SHARES


def milli_cpu_to_quota(milli_cpu: int, period_us: int = QUOTA_PERIOD_US) -> int:
    """CFS quota (µs per period) for a limit in millicores; 0 = no limit; never below 1 ms."""
    if milli_cpu == 0:
        return 0
    quota = (milli_cpu * period_us) // MILLI_CPU_TO_CPU
    return max(quota, MIN_QUOTA_PERIOD_US)

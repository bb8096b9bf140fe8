"""Termination grace periods as the kubelet computes them (pod_workers.go calculateEffectiveGracePeriod,
kuberuntime_container.go killContainer).

Manifests can carry any integer (or none); the kubelet only ever sees int64 values and always
gives a pod at least 1 s and each container kill at least 2 s.
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1
DEFAULT_GRACE = 30  # the API default of spec.terminationGracePeriodSeconds
MIN_POD_GRACE = 1  # "no matter what, we always supply a grace period of 1"
MIN_CONTAINER_GRACE = 2  # kuberuntime minimumGracePeriodInSeconds


def _seconds(value: object) -> int | None:
    """An int64 number of seconds, or None when unset/not an integer; negatives count as 1 (the API
    server's "tolerance of negative value" for deletions), values beyond int64 as the int64 maximum."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if value < 0:
        return 1
    return min(value, INT64_MAX)


def effective_grace_period(spec_grace: object, deletion_grace: object = None, override: object = None,
                           previous: int = 0) -> int:
    """The grace period for stopping a pod.

    previous: the grace already in force (0 = none yet); a later request can only shorten it.
    deletion_grace: metadata.deletionGracePeriodSeconds; override: the kubelet's own request
    (eviction, a static pod's removal with a shorter grace). The spec's value (default 30) applies
    only when nothing else set one, and the result is never below 1 s, so a deletion with grace 0
    (force) still gets SIGTERM and 1 s before SIGKILL.
    """
    grace = _seconds(previous) or None
    for requested in (_seconds(deletion_grace), _seconds(override)):
        if requested is not None and (grace is None or requested < grace):
            grace = requested
    if grace is None:
        grace = _seconds(spec_grace)
    return max(DEFAULT_GRACE if grace is None else grace, MIN_POD_GRACE)


def container_kill_grace(pod_grace: int) -> int:
    """The grace for one container's stop: the pod's, but never below 2 s (and never beyond int64)."""
    return min(max(pod_grace, MIN_CONTAINER_GRACE), INT64_MAX)

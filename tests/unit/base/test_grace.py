from __future__ import annotations

import pytest

from minikubelet.base.grace import INT64_MAX, container_kill_grace, effective_grace_period


@pytest.mark.parametrize(("spec", "deletion", "override", "previous", "want"), [
    (None, None, None, 0, 30),            # API default
    (10, None, None, 0, 10),
    (0, None, None, 0, 1),                # never below 1 s
    (10, 0, None, 0, 1),                  # deletion with 0 (force): 1 s, not the spec's 10
    (10, 5, None, 0, 5),
    (10, 20, None, 0, 20),                # the deletion's grace is the truth, even when longer
    (10, 20, 3, 0, 3),                    # an override can shorten it
    (10, None, 20, 7, 7),                 # a grace in force only ever decreases
    (10, None, None, 7, 7),
    (-5, None, None, 0, 1),               # negative: tolerated as 1
    (10, -1, None, 0, 1),
    (2**70, None, None, 0, INT64_MAX),    # beyond int64: bounded
    (10, 2**64, None, 0, INT64_MAX),
    ("10", None, None, 0, 30),            # not an integer: the default
    (True, None, None, 0, 30),
    (10, "0", None, 0, 10),
])
def test_effective_grace_period(spec: object, deletion: object, override: object, previous: int, want: int) -> None:
    assert effective_grace_period(spec, deletion, override, previous) == want


@pytest.mark.parametrize(("pod", "want"), [(1, 2), (2, 2), (30, 30), (2**64, INT64_MAX)])
def test_container_kill_grace(pod: int, want: int) -> None:
    assert container_kill_grace(pod) == want

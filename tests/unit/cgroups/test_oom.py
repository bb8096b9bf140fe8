"""OOM score policy (upstream pkg/kubelet/qos/policy.go) and the clamp for unprivileged runtimes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgroups.oom import clamp_oom_score_adj, container_oom_score_adj, detect_min_oom_score_adj
from minikubelet.base.podview import PodView
from tests.unit.cgroups.fixtures import ctr, pod, sidecar

CAPACITY = 8_000_000_000  # upstream policy_test.go standardMemoryAmount
G = {"cpu": "100m", "memory": "100Mi"}


def mem(value: str) -> dict[str, str]:
    return {"memory": value}


CASES: list[tuple[str, PodView, str, int]] = [
    ("guaranteed", pod([ctr("a", G, G)]), "a", -997),
    ("best-effort", pod([ctr("a")]), "a", 1000),
    # 1000 - 1000*4e9/8e9 = 500
    ("burstable half of memory", pod([ctr("a", mem("4G"))]), "a", 500),
    # 1000 - 1000*8e8/8e9 = 900
    ("burstable 10%", pod([ctr("a", mem("800M"))]), "a", 900),
    # 1000 - trunc(1000*(8e9-1)/8e9) = 1 -> raised to 1000 + (-997) = 3
    ("burstable nearly all memory", pod([ctr("a", mem("7999999999"))]), "a", 3),
    ("burstable over capacity", pod([ctr("a", mem("16G"))]), "a", 3),
    # tiny request: 1000 - 0 = 1000 -> 999, below best-effort
    ("burstable tiny request", pod([ctr("a", mem("1"))]), "a", 999),
    ("burstable cpu only", pod([ctr("a", {"cpu": "1"})]), "a", 999),
    # 1000 - trunc(1000*123456789/8e9) = 1000 - 15 = 985
    ("burstable truncates", pod([ctr("a", mem("123456789"))]), "a", 985),
    ("burstable second container has its own score", pod([ctr("a", mem("4G")), ctr("b", mem("800M"))]), "b", 900),
    (
        "non-sidecar init container uses its own request",
        pod([ctr("a", mem("4G"))], init=[ctr("i", mem("800M"))]),
        "i",
        900,
    ),
    # sidecar 800M would score 900; the smallest regular container (4G) scores 500 -> sidecar gets 500
    ("sidecar capped at lowest regular score", pod([ctr("a", mem("4G"))], init=[sidecar("s", mem("800M"))]), "s", 500),
    (
        "sidecar bigger than regulars keeps its score",
        pod([ctr("a", mem("800M"))], init=[sidecar("s", mem("4G"))]),
        "s",
        500,
    ),
    (
        "sidecar with regular container without request",
        pod([ctr("a", {"cpu": "1"})], init=[sidecar("s", mem("4G"))]),
        "s",
        500,
    ),
    (
        "node-critical static pod",
        pod([ctr("a")], annotations={"kubernetes.io/config.source": "file"}, priorityClassName="system-node-critical"),
        "a",
        -997,
    ),
    (
        "node-critical by priority",
        pod([ctr("a", mem("4G"))], priority=2000001000, priorityClassName="system-node-critical"),
        "a",
        -997,
    ),
    (
        "critical but not node-critical stays best-effort",
        pod(
            [ctr("a")], annotations={"kubernetes.io/config.source": "file"}, priorityClassName="system-cluster-critical"
        ),
        "a",
        1000,
    ),
    (
        "system-node-critical name alone is not enough",
        pod([ctr("a")], priorityClassName="system-node-critical"),
        "a",
        1000,
    ),
    # pod-level request 6G, containers claim 4G, 2G left over shared by 2 containers: a = 3G+1G -> 500
    (
        "pod-level requests share the remainder",
        pod([ctr("a", mem("3G")), ctr("b", mem("1G"))], pod_resources={"requests": mem("6G")}),
        "a",
        500,
    ),
]


@pytest.mark.parametrize(("case", "p", "name", "expected"), CASES, ids=[c[0] for c in CASES])
def test_container_oom_score_adj(case: str, p: PodView, name: str, expected: int) -> None:
    assert container_oom_score_adj(p, name, CAPACITY) == expected


def test_unknown_container_is_an_error() -> None:
    with pytest.raises(KeyError):
        container_oom_score_adj(pod([ctr("a")]), "nope", CAPACITY)


@pytest.mark.parametrize(
    ("value", "minimum", "expected"),
    [(-997, 0, 0), (500, 0, 500), (-997, -1000, -997), (1000, -999, 1000), (1200, 0, 1000), (-1200, -1000, -1000)],
)
def test_clamp(value: int, minimum: int, expected: int) -> None:
    assert clamp_oom_score_adj(value, minimum) == expected


def _proc(tmp_path: Path, cap_eff: str, own: int) -> Path:
    (tmp_path / "status").write_text(f"Name:\tpython\nCapInh:\t0000000000000000\nCapEff:\t{cap_eff}\n")
    (tmp_path / "oom_score_adj").write_text(f"{own}\n")
    return tmp_path


def test_min_oom_score_adj_without_cap_sys_resource(tmp_path: Path) -> None:
    # bit 24 (CAP_SYS_RESOURCE) cleared, as on the project's build host
    assert detect_min_oom_score_adj(_proc(tmp_path, "000001fffeffffff", -500)) == -500


def test_min_oom_score_adj_with_cap_sys_resource(tmp_path: Path) -> None:
    assert detect_min_oom_score_adj(_proc(tmp_path, "000001ffffffffff", 0)) == -1000


def test_min_oom_score_adj_of_this_process_is_consistent() -> None:
    status = Path("/proc/self/status").read_text()
    cap_eff = int(next(line for line in status.splitlines() if line.startswith("CapEff:")).split()[1], 16)
    own = int(Path("/proc/self/oom_score_adj").read_text())
    expected = -1000 if cap_eff & (1 << 24) else own
    assert detect_min_oom_score_adj() == expected

"""Pod cgroups on a hybrid host's cgroup2 `unified` mount (next to the v1 controllers), on the real kernel.

runc (cgroupfs driver) creates each container's full cgroup path in the unified hierarchy too and
removes only its own leaf, so pod cgroups there are the agent's to remove. Everything happens in
the test's own /mkltest-unified-<random> subtree and is checked gone at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cgroups.detect import detect_cgroup_version, hybrid_unified_mount
from cgroups.driver import CgroupBusyError, walk_leaf_first
from cgroups.manager import CgroupManager
from cgroups.v1 import CgroupV1Driver
from minikubelet.cm.pod_cgroups import PodCgroups
from tests.integration.agent_env import BUSYBOX, docker_host
from tests.unit.cgroups.fixtures import ctr, pod

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
    pytest.mark.skipif(detect_cgroup_version() != 1 or hybrid_unified_mount() is None,
                       reason="needs a cgroup v1 host with a cgroup2 unified mount"),
]


def _force_cleanup(driver: CgroupV1Driver, prefix: str) -> None:
    # Only our own subtree: move stray tasks to the hierarchy root, rmdir leaf first.
    for mount in driver.mount_points:
        top = mount / prefix.strip("/")
        if not top.exists():
            continue
        for path in walk_leaf_first(top):
            for pid in (path / "cgroup.procs").read_text().split():
                try:
                    (mount / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
            path.rmdir()


@pytest.fixture
def driver() -> Iterator[CgroupV1Driver]:
    d = CgroupV1Driver(prefix=f"/mkltest-unified-{uuid.uuid4().hex[:10]}")
    assert d.unified is not None and d.unified in d.mount_points
    try:
        yield d
    finally:
        _force_cleanup(d, d.prefix)
    assert not [m for m in d.mount_points if (m / d.prefix.strip("/")).exists()]


def pod_cgroups(driver: CgroupV1Driver) -> PodCgroups:
    manager = CgroupManager(driver, "cgroupfs", {"cpu": "2", "memory": "4Gi"}, {}, {}, [], cgroup_root=driver.prefix)
    manager.ensure_hierarchy()
    return PodCgroups(manager, 4 * 2**30, -1000, lambda: [])


def where(driver: CgroupV1Driver, rel: str) -> list[str]:
    return sorted(m.name for m in driver.mount_points if (m / driver.prefix.strip("/") / rel).is_dir())


def test_pod_cgroup_is_created_and_removed_on_every_hierarchy_including_unified(driver: CgroupV1Driver) -> None:
    pcg = pod_cgroups(driver)
    uid = str(uuid.uuid4())
    pcg.ensure_pod(pod([ctr()], uid=uid))
    rel = f"kubepods/besteffort/pod{uid}"
    assert where(driver, rel) == sorted(m.name for m in driver.mount_points) and "unified" in where(driver, rel)
    # what runc leaves in unified when a container is deleted: nothing but the parents it created
    (driver.unified / driver.prefix.strip("/") / rel / "leftover-container").mkdir()  # type: ignore[operator]
    assert pcg.try_remove_pod(uid) is True
    assert where(driver, rel) == []


def test_orphan_sweep_finds_pods_left_only_in_unified(driver: CgroupV1Driver) -> None:
    pcg = pod_cgroups(driver)
    assert driver.unified is not None
    leaked = [str(uuid.uuid4()) for _ in range(3)]
    for uid in leaked:  # as an earlier agent left them: removed from v1, left in unified
        (driver.unified / driver.prefix.strip("/") / "kubepods" / "besteffort" / f"pod{uid}").mkdir()
    kept = str(uuid.uuid4())
    pcg.ensure_pod(pod([ctr()], uid=kept))
    assert sorted(pcg.manager.orphans([kept])) == sorted(leaked)  # type: ignore[union-attr]
    assert pcg.cleanup_orphans([kept]) == []
    assert [where(driver, f"kubepods/besteffort/pod{u}") for u in leaked] == [[]] * 3
    assert "unified" in where(driver, f"kubepods/besteffort/pod{kept}")


def test_a_process_in_the_unified_pod_cgroup_keeps_it_until_it_exits(driver: CgroupV1Driver) -> None:
    pcg = pod_cgroups(driver)
    assert driver.unified is not None
    uid = str(uuid.uuid4())
    pcg.ensure_pod(pod([ctr()], uid=uid))
    rel = f"kubepods/besteffort/pod{uid}"
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (driver.unified / driver.prefix.strip("/") / rel / "cgroup.procs").write_text(str(proc.pid))
        assert pcg.try_remove_pod(uid) is False
        with pytest.raises(CgroupBusyError):
            driver.remove(f"{driver.prefix}/{rel}")
        assert where(driver, rel) == sorted(m.name for m in driver.mount_points)  # nothing half-removed
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 5
    while not pcg.try_remove_pod(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert where(driver, rel) == []


def test_nothing_outside_our_root_is_swept(driver: CgroupV1Driver) -> None:
    pcg = pod_cgroups(driver)
    assert driver.unified is not None
    sibling = driver.unified / (driver.prefix.strip("/") + "-sibling") / "kubepods" / "besteffort" / "podx"
    sibling.mkdir(parents=True)
    try:
        assert pcg.cleanup_orphans([]) == []
        assert sibling.is_dir()
    finally:
        for p in (sibling, sibling.parent, sibling.parent.parent, sibling.parent.parent.parent):
            p.rmdir()


def test_runc_creates_the_pod_path_in_unified_and_leaves_it_after_delete(driver: CgroupV1Driver) -> None:
    """Who creates the unified pod cgroup: runc, for the container's --cgroup-parent; it keeps the parents."""
    env = {**os.environ, "DOCKER_HOST": docker_host()}
    pcg = pod_cgroups(driver)
    uid = str(uuid.uuid4())
    parent = pcg.ensure_pod(pod([ctr()], uid=uid))
    assert driver.unified is not None
    unified_pod = driver.unified / parent.strip("/")
    unified_pod.rmdir()  # as the agent before this fix: v1 hierarchies only
    run = subprocess.run(["docker", "run", "-d", "--cgroup-parent", parent, BUSYBOX, "sleep", "60"],
                         env=env, check=True, capture_output=True, text=True)
    cid = run.stdout.strip()
    try:
        pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", cid], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        unified_line = next(x for x in lines if x.startswith("0::"))
        assert unified_line == f"0::{parent}/{cid}"  # the v1 paths, mirrored
        assert (unified_pod / cid).is_dir()
        assert pcg.try_remove_pod(uid) is False  # busy: the container runs
    finally:
        subprocess.run(["docker", "rm", "-f", cid], env=env, check=True, capture_output=True)
    assert unified_pod.is_dir() and not (unified_pod / cid).exists()  # runc removed its leaf only
    deadline = time.monotonic() + 5
    while not pcg.try_remove_pod(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert where(driver, parent.removeprefix(driver.prefix + "/")) == []

"""The provider over the in-memory runtime, a cgroup v1 file tree, a fake /proc and fake interface counters:
what a pass collects, the CPU rate from two passes on the injectable clock, the housekeeping loop."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from cgroups.manager import CgroupManager
from cgroups.systemd_driver import SystemdCgroupDriver
from cgroups.systemd_units import Property
from cgroups.v1 import CgroupV1Driver
from cgroups.v2 import CgroupV2Driver
from cri.errors import RuntimeError_
from cri.fake import FakeRuntime
from cri.types import ContainerConfig, ContainerMeta, ContainerStats, PodMeta, PodSandboxConfig
from minikubelet.base.clock import FakeClock
from minikubelet.stats import summary
from minikubelet.stats.fs import capacity
from minikubelet.stats.interfaces import InterfaceSample
from minikubelet.stats.provider import CgroupFiles, StatsProvider, device_of

IMAGE = "busybox:1.36"
UID = "u1"
POD_CG = f"/mkl/kubepods/besteffort/pod{UID}"


class Tree:
    """cgroup v1 hierarchies (cpu, cpuacct, memory, pids) as plain directories."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.mounts = {c: base / c for c in ("cpu", "cpuacct", "memory", "pids")}

    def put(self, literal: str, cpu_ns: int, usage: int, inactive: int = 0, pids: int = 1) -> None:
        parts = [p for p in literal.split("/") if p]
        for c, mount in self.mounts.items():
            d = mount.joinpath(*parts)
            d.mkdir(parents=True, exist_ok=True)
            if c == "cpuacct":
                (d / "cpuacct.usage").write_text(f"{cpu_ns}\n")
                (d / "cpuacct.stat").write_text("user 1\nsystem 1\n")
            elif c == "memory":
                (d / "memory.usage_in_bytes").write_text(f"{usage}\n")
                (d / "memory.stat").write_text(f"total_inactive_file {inactive}\ntotal_rss {usage // 2}\n")
            elif c == "pids":
                (d / "pids.current").write_text(f"{pids}\n")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    p = tmp_path / "proc"
    (p / "sys/kernel").mkdir(parents=True)
    (p / "self/ns").mkdir(parents=True)
    (p / "self/ns/net").write_text("")
    (p / "sys/kernel/pid_max").write_text("32768\n")
    (p / "loadavg").write_text("0.10 0.20 0.30 2/472 12345\n")
    (p / "meminfo").write_text("MemTotal: 4096 kB\nMemFree: 1024 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n")
    return p


class Interfaces:
    def __init__(self) -> None:
        self.rx = 100
        self.calls: list[str | None] = []

    def __call__(self, netns: str | None) -> list[InterfaceSample]:
        self.calls.append(netns)
        return [InterfaceSample("eth0", self.rx, 1, 0, 0, 50, 1, 0, 0)]


async def make(tmp_path: Path, proc: Path, clock: FakeClock) -> tuple[StatsProvider, FakeRuntime, Tree, str, str,
                                                                      Interfaces]:
    tree = Tree(tmp_path / "cgroup")
    tree.put("/", 9_000_000_000, 3 * 2**20)
    tree.put("/mkl/kubepods", 3_000_000_000, 2 * 2**20)
    tree.put("/mkl/kubepods/burstable", 0, 0)
    tree.put("/mkl/kubepods/besteffort", 3_000_000_000, 2 * 2**20)
    driver = CgroupV1Driver(tmp_path / "cgroup", "/mkl", hierarchies=tree.mounts, unified=None)
    manager = CgroupManager(driver, "cgroupfs", {"cpu": "2", "memory": "4Gi"}, {}, {}, ["pods"], "/mkl")
    rt = FakeRuntime(clock, images=[IMAGE])
    logs = tmp_path / "logs"
    (logs / "app").mkdir(parents=True)
    pod = PodSandboxConfig(PodMeta("web", "default", UID), log_directory=str(logs))
    sandbox = await rt.run_pod_sandbox(pod)
    cid = await rt.create_container(sandbox, ContainerConfig(ContainerMeta("app"), IMAGE, log_path="app/0.log"), pod)
    await rt.start_container(cid)
    (logs / "app/0.log").write_bytes(b"x" * 10000)
    tree.put(POD_CG, 2_000_000_000, 2 * 2**20, pids=2)
    tree.put(f"{POD_CG}/{sandbox}", 1_000, 4096)
    tree.put(f"{POD_CG}/{cid}", 1_000_000_000, 2**20 + 8192, inactive=8192)
    root = tmp_path / "root"
    (root / f"pods/{UID}/volumes/kubernetes.io~empty-dir/scratch").mkdir(parents=True)
    (root / f"pods/{UID}/volumes/kubernetes.io~empty-dir/scratch/data").write_bytes(b"y" * 20000)
    interfaces = Interfaces()
    provider = StatsProvider(rt, clock, "node-a", str(root), manager, sandbox_image="registry.k8s.io/pause:3.10",
                             interfaces=interfaces, proc=proc)
    return provider, rt, tree, sandbox, cid, interfaces


async def test_a_pass_collects_node_pods_and_containers(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, _, _, sandbox, cid, interfaces = await make(tmp_path, proc, clock)
    snap = await provider.update()
    assert provider.snapshot is snap and snap.time == clock.now()
    node = snap.node
    assert node.name == "node-a" and node.memory_capacity == 4096 * 1024
    assert node.root is not None and node.root.id == "/" and node.root.sample.cpu_usage_ns == 9_000_000_000
    assert node.pods_cgroup is not None and node.pods_cgroup.id == "/mkl/kubepods"
    assert [m.id for m in node.other_cgroups] == ["/mkl/kubepods/burstable", "/mkl/kubepods/besteffort"]
    assert node.rlimit is not None and (node.rlimit.max_pid, node.rlimit.cur_proc) == (32768, 472)
    assert node.image_fs is not None and node.image_fs.used == 2 * 1024  # the fake's pause and busybox images
    (pod,) = snap.pods
    assert (pod.name, pod.namespace, pod.uid, pod.sandbox_id) == ("web", "default", UID, sandbox)
    assert pod.cgroup is not None and pod.cgroup.id == POD_CG and pod.cgroup.sample.pids == 2
    assert pod.sandbox_cgroup is not None and pod.sandbox_cgroup.id == f"{POD_CG}/{sandbox}"
    (c,) = pod.containers
    assert (c.name, c.id, c.image) == ("app", cid, IMAGE)
    assert c.cgroup is not None and c.cgroup.sample.memory_working_set == 2**20
    assert c.cgroup.nano_cores is None  # one sample: no rate yet
    assert c.logs is not None and c.logs.used is not None and c.logs.used >= 10000
    (vol,) = pod.volumes
    assert vol.name == "scratch" and vol.fs.used is not None and vol.fs.used >= 20000
    assert pod.network is not None and pod.network.interfaces[0].rx_bytes == 100
    netns = (await provider.runtime.pod_sandbox_status(sandbox)).network_namespace
    assert netns and interfaces.calls == [netns, None]
    assert snap.errors == 0


async def test_cpu_rate_from_the_last_two_samples(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, _, tree, _, cid, _ = await make(tmp_path, proc, clock)
    await provider.update()
    clock.advance(10)
    tree.put(f"{POD_CG}/{cid}", 1_000_000_000 + 2_000_000_000, 2**20)  # 2 s of CPU in 10 s
    tree.put(POD_CG, 2_000_000_000 + 5_000_000_000, 2**20)
    snap = await provider.update()
    c = snap.pods[0].containers[0]
    assert c.cgroup is not None and c.cgroup.nano_cores == 200_000_000
    assert snap.pods[0].cgroup is not None and snap.pods[0].cgroup.nano_cores == 500_000_000
    assert snap.node.root is not None and snap.node.root.nano_cores == 0


async def test_a_pass_inspects_only_what_changed(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, rt, _, _, cid, _ = await make(tmp_path, proc, clock)
    await provider.update()
    first = [c.op for c in rt.calls]
    assert first.count("container_status") == 1 and first.count("pod_sandbox_status") == 1
    rt.calls.clear()
    await provider.update()
    assert [c.op for c in rt.calls] == ["list_summaries", "list_images"]
    rt.exit_container(cid, 0)
    rt.calls.clear()
    await provider.update()
    assert [c.op for c in rt.calls].count("container_status") == 1


async def test_stopped_sandboxes_and_exited_containers_leave_the_snapshot(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, rt, _, sandbox, cid, _ = await make(tmp_path, proc, clock)
    await provider.update()
    rt.exit_container(cid, 0)
    snap = await provider.update()
    assert snap.pods[0].containers == ()
    assert not any(k.endswith(cid) for k in provider._previous)  # its last sample is forgotten
    await rt.stop_pod_sandbox(sandbox)
    assert (await provider.update()).pods == ()


async def test_unreadable_parts_count_as_errors_not_failures(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, *_ = await make(tmp_path, proc, clock)

    def broken(netns: str | None) -> list[InterfaceSample]:
        raise OSError("netlink: permission denied")

    provider._interfaces = broken
    snap = await provider.update()
    assert snap.errors == 2  # the pod's namespace and the node's
    assert snap.pods[0].network is None and snap.node.network is None
    assert snap.pods[0].containers[0].cgroup is not None


async def test_housekeeping_samples_on_the_interval(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, *_ = await make(tmp_path, proc, clock)
    task = asyncio.create_task(provider.run())
    try:
        for _ in range(50):
            await asyncio.sleep(0.01)
            if provider.passes == 1:
                break
        assert provider.passes == 1
        clock.advance(9.9)
        await asyncio.sleep(0.05)
        assert provider.passes == 1
        clock.advance(0.1)
        for _ in range(50):
            await asyncio.sleep(0.01)
            if provider.passes == 2:
                break
        assert provider.passes == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_device_of_the_deepest_mount() -> None:
    mounts = [("/dev/vda", "/"), ("tmpfs", "/run"), ("/dev/vdb", "/var/lib/kubelet"), ("/dev/vdc", "/var/lib/kube")]
    assert device_of("/var/lib/kubelet/pods", mounts) == "/dev/vdb"
    assert device_of("/var/lib/kubelet", mounts) == "/dev/vdb"
    assert device_of("/var/lib/kubelets", mounts) == "/dev/vda"
    assert device_of("/x", []) == ""


def test_cgroup_files_refuse_traversal(tmp_path: Path) -> None:
    files = CgroupFiles(v1={"cpuacct": tmp_path, "memory": tmp_path})
    with pytest.raises(ValueError):
        files.sample("/kubepods/../../etc")
    with pytest.raises(ValueError):
        CgroupFiles()


async def test_a_pass_yields_to_the_event_loop_while_it_walks(tmp_path: Path, proc: Path) -> None:
    """A large emptyDir is walked in slices: another task on the loop runs many times during one pass."""
    clock = FakeClock()
    provider, *_ = await make(tmp_path, proc, clock)
    scratch = tmp_path / f"root/pods/{UID}/volumes/kubernetes.io~empty-dir/scratch"
    for i in range(40):
        d = scratch / f"d{i}"
        d.mkdir()
        for j in range(50):
            (d / f"f{j}").write_bytes(b"z")
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = ticks
    snap = await provider.update()
    done.set()
    await task
    assert ticks - start >= 2000 // 256  # at least one turn of the loop per walk slice
    (vol,) = snap.pods[0].volumes
    assert vol.fs.inodes_used is not None and vol.fs.inodes_used >= 2000


async def test_volumes_are_walked_once_per_volume_stats_agg_period(tmp_path: Path, proc: Path) -> None:
    """upstream's volume stats calculators (volumeStatsAggPeriod, 1m): a pod's volumes are walked on its first
    pass, then again only once a period (jittered by up to one more) has passed; <= 0 walks none."""
    clock = FakeClock()
    provider, *_ = await make(tmp_path, proc, clock)
    assert provider.volume_period == 60.0
    data = tmp_path / f"root/pods/{UID}/volumes/kubernetes.io~empty-dir/scratch/data"

    async def used() -> int | None:
        (vol,) = (await provider.update()).pods[0].volumes
        return vol.fs.used

    first = await used()
    assert first is not None and first >= 20000
    data.write_bytes(b"y" * 200000)
    clock.advance(10)
    assert await used() == first  # the stats pass every 10 s reports the last walk
    clock.advance(50)
    assert await used() == first  # jitter: at least one period
    clock.advance(61)
    later = await used()
    assert later is not None and later >= 200000
    provider.volume_period = 0
    clock.advance(200)
    assert (await provider.update()).pods[0].volumes == ()


async def test_a_cri_runtime_gives_the_writable_layers(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, _, _, _, cid, _ = await make(tmp_path, proc, clock)
    layers = tmp_path / "snapshots"
    layers.mkdir()
    calls = 0

    async def list_container_stats() -> list[ContainerStats]:
        nonlocal calls
        calls += 1
        return [ContainerStats(cid, clock.now() - 1, cpu_usage_core_nanoseconds=5, writable_layer_used_bytes=12288,
                               writable_layer_inodes_used=3, writable_layer_mountpoint=str(layers),
                               writable_layer_timestamp=clock.now() - 1),
                ContainerStats("not-ours", clock.now(), writable_layer_used_bytes=1)]

    provider._cri_stats = list_container_stats
    snap = await provider.update()
    (pod,) = snap.pods
    (c,) = pod.containers
    assert c.rootfs is not None and (c.rootfs.used, c.rootfs.inodes_used) == (12288, 3)
    assert c.rootfs.time == clock.now() - 1 and c.rootfs.capacity is not None and c.rootfs.capacity.capacity > 0
    assert c.cgroup is not None and c.cgroup.sample.cpu_usage_ns == 1_000_000_000  # CPU stays the cgroup's
    rendered = summary.container(c, only_cpu_and_memory=False)
    assert list(rendered) == ["name", "startTime", "cpu", "memory", "rootfs", "logs", "swap"]
    assert rendered["rootfs"]["usedBytes"] == 12288 and rendered["rootfs"]["inodesUsed"] == 3
    assert "rootfs" not in summary.container(c, only_cpu_and_memory=True)
    storage = summary.ephemeral_storage(pod, clock.now())
    assert storage is not None and c.logs is not None and c.logs.used is not None
    assert storage.used is not None and storage.used >= 12288 + c.logs.used + 20000
    assert calls == 1


async def test_a_failing_list_container_stats_leaves_rootfs_out(tmp_path: Path, proc: Path) -> None:
    provider, _, _, _, _, _ = await make(tmp_path, proc, FakeClock())

    async def failing() -> list[ContainerStats]:
        raise RuntimeError_("rpc error: code = Unimplemented")

    provider._cri_stats = failing
    snap = await provider.update()
    assert snap.pods[0].containers[0].rootfs is None and snap.pods[0].containers[0].cgroup is not None
class _NoSystemd:
    """Reading stats never talks to systemd: any call is a failure."""

    def start_transient_unit(self, unit: str, properties: list[Property]) -> None:
        raise AssertionError(f"start_transient_unit {unit}")

    def stop_unit(self, unit: str) -> None:
        raise AssertionError(f"stop_unit {unit}")

    def set_unit_properties(self, unit: str, properties: list[Property]) -> None:
        raise AssertionError(f"set_unit_properties {unit}")


def test_stats_read_the_files_under_the_systemd_driver(tmp_path: Path) -> None:
    # found by the VM lab on real systemd: an agent on cgroupDriver systemd exited at start here
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "mountinfo").write_text("")
    files = CgroupV2Driver(root=root, prefix="/", mountinfo=tmp_path / "mountinfo")
    manager = CgroupManager(SystemdCgroupDriver(files, _NoSystemd()), "systemd", {"cpu": "2", "memory": "4Gi"},
                            {}, {}, ["pods"])
    found = CgroupFiles.of(manager)
    assert (found.v2, found.v1) == (root, None)


async def test_the_cadvisor_extras_are_read_when_first_asked_once_per_pass(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, _, tree, _, cid, _ = await make(tmp_path, proc, clock)
    shares = tree.mounts["cpu"] / POD_CG.lstrip("/") / cid / "cpu.shares"
    shares.write_text("512\n")
    snap = await provider.update()
    m = snap.pods[0].containers[0].cgroup
    assert m is not None and m.sample.spec is None  # the pass left the limits unread
    shares.write_text("1024\n")
    tree.put(f"{POD_CG}/{cid}", 5_000_000_000, 2**20)  # CPU and memory move after the pass
    assert m.sample.pids == 0  # a container's task count is left to the extras too
    full = m.full
    assert full.spec is not None and full.spec.cpu_shares == 1024  # read now, on the first ask
    assert full.pids == 1
    assert (full.cpu_user_ns, full.cpu_system_ns) == (10_000_000, 10_000_000)
    assert full.cpu_usage_ns == m.sample.cpu_usage_ns == 1_000_000_000  # the pass's own values stay
    assert full.memory_working_set == m.sample.memory_working_set
    shares.write_text("2048\n")
    assert m.full is full  # once per snapshot: a second render reads nothing again
    clock.advance(10)
    again = (await provider.update()).pods[0].containers[0].cgroup
    assert again is not None and again.full.spec is not None and again.full.spec.cpu_shares == 2048
    assert again.full.cpu_usage_ns == 5_000_000_000
    shares.parent.joinpath("cpu.shares").unlink()
    gone = (await provider.update()).pods[0].containers[0].cgroup
    assert gone is not None and gone.full.spec is not None and gone.full.spec.cpu_shares == 0  # as a missing file


async def test_the_sandbox_cgroup_is_read_when_first_asked_not_in_the_pass(tmp_path: Path, proc: Path) -> None:
    clock = FakeClock()
    provider, _, tree, sandbox, _, _ = await make(tmp_path, proc, clock)
    snap = await provider.update()
    pod = snap.pods[0]
    assert pod.cgroup is not None and pod.cgroup.sample.cpu_usage_ns == 2_000_000_000  # the pod's own: in the pass
    tree.put(f"{POD_CG}/{sandbox}", 7_000, 8192, pids=3)  # the pause container's cgroup moves after the pass
    clock.advance(4)
    m = pod.sandbox_cgroup
    assert m is not None and m.id == f"{POD_CG}/{sandbox}" and m.time == clock.now()  # read at the first ask
    assert (m.sample.cpu_usage_ns, m.sample.memory_usage, m.sample.pids) == (7_000, 8192, 3)
    assert m.nano_cores is None  # nothing reads a rate for it
    tree.put(f"{POD_CG}/{sandbox}", 9_000, 8192)
    assert pod.sandbox_cgroup is m  # once per snapshot
    assert f"{POD_CG}/{sandbox}" not in provider._previous  # the pass keeps no sample of it
    for c in tree.mounts:
        for f in tree.mounts[c].joinpath(*POD_CG.split("/"), sandbox).iterdir():
            f.unlink()
        tree.mounts[c].joinpath(*POD_CG.split("/"), sandbox).rmdir()
    gone = (await provider.update()).pods[0]
    assert gone.sandbox_cgroup is None and gone.cgroup is not None  # gone since: no series, no failure


async def test_a_log_path_is_resolved_once_per_container(tmp_path: Path, proc: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    provider, rt, _, _, cid, _ = await make(tmp_path, proc, clock)
    resolved: list[str] = []
    real = os.path.realpath

    def counting(path: str) -> str:
        resolved.append(path)
        return real(path)

    monkeypatch.setattr(os.path, "realpath", counting)
    log_path = str(tmp_path / "logs/app/0.log")
    for _ in range(3):
        c = (await provider.update()).pods[0].containers[0]
        clock.advance(10)
        fs = capacity(log_path)
        assert c.logs is not None and c.logs.capacity is not None and fs is not None and c.logs.used is not None
        assert c.logs.capacity.capacity == fs.capacity  # the log's own filesystem
    assert resolved.count(log_path) == 1
    await rt.stop_container(cid, 0)
    await provider.update()
    assert provider._log_real == {}  # forgotten with the running container


async def test_a_ready_sandboxs_namespace_is_looked_up_once(tmp_path: Path, proc: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    provider, rt, _, sandbox, _, interfaces = await make(tmp_path, proc, clock)
    looked_up: list[str] = []
    real = provider._netns_inode

    def counting(path: str) -> int | None:
        looked_up.append(path)
        return real(path)

    monkeypatch.setattr(provider, "_netns_inode", counting)
    for _ in range(3):
        assert (await provider.update()).pods[0].network is not None  # read every pass
        clock.advance(10)
    assert len(looked_up) == 1 and len([c for c in interfaces.calls if c is not None]) == 3
    await rt.stop_pod_sandbox(sandbox)
    await provider.update()
    assert provider._netns_inodes == {}  # forgotten once the sandbox is not ready

"""Issue 16 item 4: what only a real machine shows, in two Debian 12 guests with systemd and cgroup v2,
joined to the test API server and run by the project's systemd unit.

The tests run in file order on one lab (conftest.lab): the nodes join, pods start, then the agent is
restarted and killed under them, and a guest is rebooted.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from tests.apiserver.client import ApiStatusError, Client
from tests.integration.agent_env import BUSYBOX
from tests.lab import provision
from tests.lab.conftest import Lab
from tests.lab.guest import Guest

pytestmark = pytest.mark.asyncio(loop_scope="session")

T = TypeVar("T")
MiB = 1024 * 1024


async def wait_for(what: str, check: Callable[[], Awaitable[T | None]], timeout: float, interval: float = 2) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last={json.dumps(last)[:1500]}")


def condition(obj: dict[str, Any], kind: str) -> str:
    return next((c["status"] for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), "")


async def ready_node(admin: Client, name: str) -> dict[str, Any] | None:
    try:
        node = await admin.get("nodes", name)
    except ApiStatusError:
        return None
    return node if condition(node, "Ready") == "True" else None


async def agent_journal(guest: Guest) -> str:
    return (await guest.run("journalctl -u minikubelet --no-pager -n 60 -o cat")).out


def pod(name: str, node: str, command: str, resources: dict[str, Any] | None = None,
        restart: str = "Always") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": BUSYBOX, "command": ["sh", "-c", command]}
    if resources:
        container["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "restartPolicy": restart,
                     "terminationGracePeriodSeconds": 2, "containers": [container]}}


async def running_pod(lab: Lab, guest: Guest, name: str, timeout: float = 240) -> dict[str, Any]:
    admin = lab.api.admin()

    async def ready() -> dict[str, Any] | None:
        p = await admin.get("pods", name, "default")
        return p if condition(p, "Ready") == "True" else None

    try:
        return await wait_for(f"pod {name} Ready on {guest.name}", ready, timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- agent journal ---\n{await agent_journal(guest)}") from None


async def container_cgroup(guest: Guest, pod_name: str) -> str:
    """The cgroup v2 directory of the pod's running `main` container, read through its process."""
    out = await guest.sh(
        f"pid=$(docker inspect -f '{{{{.State.Pid}}}}' $(docker ps -q --filter label=io.kubernetes.pod.name={pod_name} "
        "--filter label=io.kubernetes.container.name=main)) && cat /proc/$pid/cgroup")
    line = out.strip().splitlines()[-1]
    assert line.startswith("0::/"), f"not a cgroup v2 membership: {out!r}"
    return "/sys/fs/cgroup" + line[3:]


async def read_files(guest: Guest, directory: str, *names: str) -> dict[str, str]:
    out = await guest.sh(" ; ".join(f"echo \"{n}=$(tr '\\n' ' ' < {directory}/{n})\"" for n in names))
    return {k: v.strip() for k, v in (line.split("=", 1) for line in out.strip().splitlines())}


async def pod_containers(guest: Guest, *, running: bool = False) -> dict[str, str]:
    """Every pod container and sandbox on the guest (or only the running ones): id -> its start time."""
    out = await guest.sh(f"docker ps -{'' if running else 'a'}q --filter label=io.kubernetes.pod.uid | "
                         "xargs -r docker inspect -f '{{.Id}} {{.State.StartedAt}}'")
    return dict(line.split(" ", 1) for line in out.strip().splitlines())


async def agent_pid(guest: Guest) -> int:
    return int((await guest.sh("systemctl show -p MainPID --value minikubelet")).strip())


def journal_times(journal: str, pattern: str) -> list[float]:
    """Unix times of the agent's journal lines (`-o short-unix`) matching `pattern`."""
    return [float(line.split()[0]) for line in journal.splitlines() if re.search(pattern, line)]


async def pod_gone(admin: Client, name: str, namespace: str = "default") -> bool | None:
    try:
        await admin.get("pods", name, namespace)
    except ApiStatusError as e:
        if e.reply.status == 404:
            return True
        raise
    return None


async def test_both_nodes_join_ready_on_cgroup_v2(lab: Lab) -> None:
    admin = lab.api.admin()
    for guest in lab.guests:
        try:
            node = await wait_for(f"node {guest.name} Ready", functools.partial(ready_node, admin, guest.name), 300)
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- agent journal ---\n{await agent_journal(guest)}") from None
        assert node["status"]["nodeInfo"]["kernelVersion"] == (await guest.sh("uname -r")).strip()
        assert [a for a in node["status"]["addresses"] if a["type"] == "InternalIP"] == [
            {"type": "InternalIP", "address": guest.ip}]
        assert (await guest.sh("stat -f -c %T /sys/fs/cgroup")).strip() == "cgroup2fs"
        assert (await guest.sh("systemctl is-active minikubelet")).strip() == "active"
    # the node identity is the client certificate the TLS bootstrap got, not the token
    users = {u for u, _, _ in lab.api.handler.requests}
    assert {f"system:node:{g.name}" for g in lab.guests} <= users


async def test_a_pod_reaches_a_pod_on_the_other_node_by_pod_ip(lab: Lab) -> None:
    server_node, client_node = lab.guests[1], lab.guests[0]
    admin = lab.api.admin()
    # both nodes got a podCIDR from the node IPAM, and each routes the other's via its InternalIP
    cidrs = {g.name: (await admin.get("nodes", g.name))["spec"].get("podCIDR", "") for g in lab.guests}
    assert all(cidrs.values()), cidrs

    async def route(guest: Guest, other: Guest) -> str | None:
        out = (await guest.run(f"ip route show {cidrs[other.name]} proto 77")).out
        return out if f"via {other.ip}" in out else None

    for a, b in ((client_node, server_node), (server_node, client_node)):
        await wait_for(f"{a.name}'s route to {b.name}'s podCIDR", functools.partial(route, a, b), 90)

    page = f"served-by-{server_node.name}"
    await admin.create(pod("web", server_node.name,
                           f"mkdir -p /www && echo {page} >/www/index.html && exec httpd -f -p 8080 -h /www"))
    web = await running_pod(lab, server_node, "web")
    web_ip = web["status"]["podIP"]
    assert ipaddress.ip_address(web_ip) in ipaddress.ip_network(cidrs[server_node.name])
    # the answer goes into the termination message, so the API shows what the client got (busybox's own
    # `timeout`: the image's busybox wget segfaults with -T)
    await admin.create(pod("fetch", client_node.name,
                           f"for i in $(seq 30); do timeout 10 wget -q -O /dev/termination-log http://{web_ip}:8080/ "
                           "&& exit 0; sleep 2; done; exit 1", restart="Never"))

    async def finished() -> dict[str, Any] | None:
        p = await admin.get("pods", "fetch", "default")
        return p if p["status"].get("phase") in ("Succeeded", "Failed") else None

    try:
        done = await wait_for("the fetch pod finished", finished, 240)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- agent journal ---\n{await agent_journal(client_node)}") from None
    terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (done["status"]["phase"], terminated["exitCode"]) == ("Succeeded", 0), terminated
    assert terminated.get("message", "").strip() == page
    fetch_ip = done["status"]["podIP"]
    assert ipaddress.ip_address(fetch_ip) in ipaddress.ip_network(cidrs[client_node.name])


async def test_cgroup_v2_limits_read_back(lab: Lab) -> None:
    guest = lab.guests[0]
    resources = {"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}}
    await lab.api.admin().create(pod("limits", guest.name, "sleep 3600", resources))
    p = await running_pod(lab, guest, "limits")
    assert p["status"]["qosClass"] == "Burstable"
    ctr = await container_cgroup(guest, "limits")
    assert f"/kubepods/burstable/pod{p['metadata']['uid']}/" in ctr
    values = await read_files(guest, ctr, "memory.max", "cpu.max", "cpu.weight", "memory.oom.group")
    # runc's conversion of the CPU shares the request gives (256) to a cgroup v2 weight
    shares = 250 * 1024 // 1000
    assert values == {"memory.max": f"{64 * MiB}", "cpu.max": "50000 100000",
                      "cpu.weight": f"{1 + ((shares - 2) * 9999) // 262142}", "memory.oom.group": "1"}
    pod_dir = ctr.rsplit("/", 1)[0]
    pod_values = await read_files(guest, pod_dir, "pids.max", "memory.max")
    assert pod_values == {"pids.max": f"{provision.POD_PIDS_LIMIT}", "memory.max": f"{64 * MiB}"}


async def test_systemd_cgroup_driver_makes_the_slices(lab: Lab) -> None:
    """lab-2 runs the agent and Docker with cgroupDriver systemd (issue 16 item 2): the pod's cgroups are
    transient slices systemd knows, with the limits as unit properties and in the cgroup v2 files."""
    guest = lab.guests[1]
    assert provision.CGROUP_DRIVERS[guest.name] == "systemd"
    assert (await guest.sh("docker info -f '{{.CgroupDriver}}'")).strip() == "systemd"
    resources = {"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}}
    await lab.api.admin().create(pod("slices", guest.name, "sleep 3600", resources))
    p = await running_pod(lab, guest, "slices")
    uid = p["metadata"]["uid"].replace("-", "_")
    unit = f"kubepods-burstable-pod{uid}.slice"
    props = dict(line.split("=", 1) for line in (await guest.sh(
        f"systemctl show -p ActiveState -p ControlGroup -p MemoryMax -p CPUQuotaPerSecUSec -p TasksMax {unit}"
    )).strip().splitlines())
    pod_dir = f"/kubepods.slice/kubepods-burstable.slice/{unit}"
    assert props == {"ActiveState": "active", "ControlGroup": pod_dir, "MemoryMax": f"{64 * MiB}",
                     "CPUQuotaPerSecUSec": "500ms", "TasksMax": f"{provision.POD_PIDS_LIMIT}"}, props
    for parent in ("kubepods.slice", "kubepods-burstable.slice"):
        assert (await guest.sh(f"systemctl is-active {parent}")).strip() == "active"
    assert await read_files(guest, "/sys/fs/cgroup" + pod_dir, "memory.max", "cpu.max", "pids.max") == {
        "memory.max": f"{64 * MiB}", "cpu.max": "50000 100000", "pids.max": f"{provision.POD_PIDS_LIMIT}"}
    ctr = await container_cgroup(guest, "slices")
    assert ctr.startswith(f"/sys/fs/cgroup{pod_dir}/docker-") and ctr.endswith(".scope"), ctr
    assert (await read_files(guest, ctr, "memory.max"))["memory.max"] == f"{64 * MiB}"


def guaranteed(cpu: int, mem: int) -> dict[str, Any]:
    both = {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}
    return {"requests": dict(both), "limits": dict(both)}


async def resize_in_place(lab: Lab, guest: Guest, name: str) -> None:
    """Resize the running Guaranteed pod `name` (100m/32Mi) up then down; at every poll where the status shows the
    new values, the container's and the pod's cgroup v2 files must hold them already."""
    admin = lab.api.admin()
    p = await running_pod(lab, guest, name)
    first = p["status"]["containerStatuses"][0]
    ctr = await container_cgroup(guest, name)
    pod_dir = ctr.rsplit("/", 1)[0]

    async def kernel() -> tuple[dict[str, str], dict[str, str]]:
        return (await read_files(guest, ctr, "cpu.max", "memory.max"),
                await read_files(guest, pod_dir, "cpu.max", "memory.max"))

    async def step(generation: int, cpu: int, mem: int) -> dict[str, Any]:
        want = {"cpu.max": f"{cpu * 100} 100000", "memory.max": f"{mem * MiB}"}
        await admin.patch("pods", name, {"spec": {"containers": [{"name": "main", "resources": guaranteed(cpu, mem)}]}},
                          "default", sub="resize")

        async def in_force() -> dict[str, Any] | None:
            got = await admin.get("pods", name, "default")
            status = got["status"]["containerStatuses"][0]
            if status.get("resources") != guaranteed(cpu, mem) or got["status"].get("observedGeneration") != generation:
                return None
            assert await kernel() == (want, want), f"{guest.name}: the status is ahead of the kernel"
            return got

        try:
            return await wait_for(f"{name} resized to {cpu}m/{mem}Mi", in_force, 60, interval=0.5)
        except AssertionError as e:
            got = await admin.get("pods", name, "default")
            raise AssertionError(f"{e}\nstatus: {json.dumps(got['status'])}\nkernel: {await kernel()}\n"
                                 f"--- agent journal ---\n{await agent_journal(guest)}") from None

    start = {"cpu.max": "10000 100000", "memory.max": f"{32 * MiB}"}
    assert await kernel() == (start, start)
    for generation, (cpu, mem) in enumerate(((200, 64), (150, 48)), start=2):
        p = await step(generation, cpu, mem)
        status = p["status"]["containerStatuses"][0]
        assert (status["containerID"], status["restartCount"]) == (first["containerID"], 0)
        assert status["allocatedResources"] == guaranteed(cpu, mem)["requests"]
        assert not {c["type"] for c in p["status"]["conditions"]} & {"PodResizePending", "PodResizeInProgress"}


async def test_in_place_resize_reaches_the_cgroup_v2_files(lab: Lab) -> None:
    """Issue 30: a resize through pods/resize is written to cpu.max and memory.max of the container and of the pod,
    on both cgroup drivers (lab-1 cgroupfs, lab-2 systemd), without a restart; the status reports the new values
    only once the kernel holds them."""
    admin = lab.api.admin()
    for guest in lab.guests:
        await admin.create(pod(f"resize-{guest.name}", guest.name, "sleep 3600", guaranteed(100, 32)))
    for guest in lab.guests:
        await resize_in_place(lab, guest, f"resize-{guest.name}")
    for guest in lab.guests:
        await admin.delete("pods", f"resize-{guest.name}", "default")
    for guest in lab.guests:
        await wait_for(f"resize-{guest.name} deleted", functools.partial(pod_gone, admin, f"resize-{guest.name}"), 120)


async def test_oom_kill_seen_in_memory_events(lab: Lab) -> None:
    guest = lab.guests[0]
    admin = lab.api.admin()
    # The shell stays after dd is killed unless the whole container goes (memory.oom.group=1). The setting
    # must hold from the first instruction: set after the start, dd can be killed alone and the shell sleeps on.
    oom_group = "$(cat /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/memory.oom.group)"
    await admin.create(pod("oom", guest.name,
                           f'g="{oom_group}"; [ "$g" = 1 ] || {{ echo "memory.oom.group=$g at the start"'
                           " > /dev/termination-log; exit 3; }; dd if=/dev/zero of=/dev/null bs=128M count=1;"
                           " sleep 3600",
                           {"limits": {"memory": "32Mi"}}))
    seen: list[dict[str, Any]] = []

    async def oom_killed() -> dict[str, Any] | None:
        p = await admin.get("pods", "oom", "default")
        statuses = p["status"].get("containerStatuses") or [{}]
        for terminated in (statuses[0].get("lastState", {}).get("terminated"),
                           statuses[0].get("state", {}).get("terminated")):
            if terminated and terminated not in seen:
                seen.append(terminated)
        assert all(t["exitCode"] == 137 for t in seen), seen
        return next((t for t in seen if t.get("reason") == "OOMKilled"), None)

    # Docker sets State.OOMKilled only from containerd's OOM event, which the runc shim raises from
    # an inotify watch on memory.events: on cgroup v2 it can come after the exit or not at all, and
    # the agent then says "Error", as the kubelet over cri-dockerd does (docs/runtime-docker.md).
    # Every restart is killed again, so some attempt within the backoff's first minutes carries it.
    try:
        try:
            await wait_for("an attempt of the oom pod's container terminated as OOMKilled", oom_killed, 240)
        except AssertionError as e:
            raise AssertionError(f"{e}\nseen={seen}\n--- agent journal ---\n{await agent_journal(guest)}") from None
        assert all(t["exitCode"] == 137 and t["reason"] in ("OOMKilled", "Error") for t in seen), seen
        uid = (await admin.get("pods", "oom", "default"))["metadata"]["uid"]
        pod_dir = f"/sys/fs/cgroup/kubepods/burstable/pod{uid}"
        events = dict(line.split() for line in (await guest.sh(f"cat {pod_dir}/memory.events")).splitlines())
        assert int(events["oom_kill"]) >= 1
        assert int(events["oom_group_kill"]) >= 1
    finally:
        # a crash-looping pod left behind would restart under the next test's watch
        await admin.delete("pods", "oom", "default")
        await wait_for("the oom pod gone", functools.partial(pod_gone, admin, "oom"), 120)


async def test_agent_restart_and_kill9_restart_no_container(lab: Lab) -> None:
    guest = lab.guests[0]
    admin = lab.api.admin()
    # the running ones: an exited container of a deleted pod may be collected meanwhile, as the kubelet's GC does
    before = await pod_containers(guest, running=True)
    assert before, "no pod containers on the guest to watch"
    restarts = {c["name"]: c["restartCount"]
                for c in (await admin.get("pods", "limits", "default"))["status"]["containerStatuses"]}

    pid = await agent_pid(guest)
    await guest.sh("systemctl restart minikubelet", timeout=300)
    pid2 = await agent_pid(guest)
    assert pid2 not in (0, pid)
    await guest.sh(f"kill -9 {pid2}")

    async def restarted_by_systemd() -> int | None:
        p = await agent_pid(guest)
        active = (await guest.run("systemctl is-active minikubelet")).out.strip()
        return p if p not in (0, pid2) and active == "active" else None

    await wait_for("systemd to restart the killed agent", restarted_by_systemd, 120)
    await wait_for(f"node {guest.name} Ready again", functools.partial(ready_node, admin, guest.name), 180)
    await running_pod(lab, guest, "limits")
    # give the restarted agent a few sync periods to act on what it found
    await asyncio.sleep(20)
    after = await pod_containers(guest)
    assert {k: v for k, v in after.items() if k in before} == before, "a container was restarted or removed"
    running = {c["name"]: c["restartCount"]
               for c in (await admin.get("pods", "limits", "default"))["status"]["containerStatuses"]}
    assert running == restarts


async def test_watchdog_restarts_a_stopped_agent(lab: Lab) -> None:
    guest = lab.guests[1]
    unit = (await guest.sh("systemctl show -p Type -p WatchdogUSec minikubelet")).split()
    if "Type=notify" not in unit:
        pytest.skip("the installed unit is not Type=notify with a WatchdogSec yet (issue 16 item 2)")
    pid = await agent_pid(guest)
    before = await pod_containers(guest)
    await guest.sh(f"kill -STOP {pid}")

    async def replaced() -> int | None:
        p = await agent_pid(guest)
        return p if p not in (0, pid) else None

    await wait_for("systemd's watchdog to replace the stopped agent", replaced, 240, interval=5)
    journal = (await guest.sh("journalctl -u minikubelet --no-pager -o cat | grep -i watchdog || true"))
    assert "watchdog" in journal.lower()
    after = await pod_containers(guest)
    assert {k: v for k, v in after.items() if k in before} == before


async def sandboxes(guest: Guest, pod_name: str) -> set[str]:
    out = await guest.sh(f"docker ps -aq --no-trunc --filter label=io.kubernetes.pod.name={pod_name} "
                         "--filter label=io.kubernetes.docker.type=podsandbox")
    return set(out.split())


def status_of(p: dict[str, Any], key: str) -> dict[str, Any]:
    first: dict[str, Any] = (p["status"].get(key) or [{}])[0]
    return first


async def test_reboot_brings_pods_back(lab: Lab) -> None:
    """Issue 17 item 4: after a host reboot the pod gets a new sandbox, its init container runs again, and the
    restart counts are upstream's: the runtime (Docker) still lists the exited `main`, so its count is the old
    one + 1; the old init container was purged with the old sandbox, so its count comes from its log
    directory (`0.log` there: 1), as `calcRestartCountByLogDir` in kuberuntime_container.go."""
    guest = lab.guests[1]
    admin = lab.api.admin()
    survivor = pod("survivor", guest.name, "sleep 3600")
    runs = "/var/lib/mkl-survivor"
    survivor["spec"]["volumes"] = [{"name": "m", "hostPath": {"path": runs, "type": "DirectoryOrCreate"}}]
    survivor["spec"]["initContainers"] = [{"name": "init", "image": BUSYBOX, "command": ["sh", "-c", "echo ran >>/m/runs"],
                                           "volumeMounts": [{"name": "m", "mountPath": "/m"}]}]
    await admin.create(survivor)
    before = await running_pod(lab, guest, "survivor")
    assert (status_of(before, "initContainerStatuses")["restartCount"], status_of(before, "containerStatuses")["restartCount"]) == (0, 0)
    boot_id = (await admin.get("nodes", guest.name))["status"]["nodeInfo"]["bootID"]
    old = await pod_containers(guest)
    old_sandboxes = await sandboxes(guest, "survivor")
    assert (await guest.sh(f"cat {runs}/runs")).split() == ["ran"]

    await guest.run("systemctl reboot", timeout=30)
    await guest.wait_ssh_gone()
    await guest.wait_ssh()

    async def rebooted_and_running() -> dict[str, Any] | None:
        node = await admin.get("nodes", guest.name)
        if node["status"]["nodeInfo"]["bootID"] == boot_id or condition(node, "Ready") != "True":
            return None
        p = await admin.get("pods", "survivor", "default")
        # Ready from before the reboot until the agent reports again: only a new container counts
        main = status_of(p, "containerStatuses")
        cid = main.get("containerID", "").removeprefix("docker://")
        fresh = cid and cid not in old and "running" in main.get("state", {})
        return p if fresh and condition(p, "Ready") == "True" else None

    try:
        after = await wait_for("the survivor pod Ready after the reboot", rebooted_and_running, 420, interval=5)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- agent journal ---\n{await agent_journal(guest)}") from None
    running = await guest.sh("docker ps -q --no-trunc --filter label=io.kubernetes.pod.name=survivor")
    assert running.split() and not set(running.split()) & set(old)
    new_sandboxes = await sandboxes(guest, "survivor") - old_sandboxes
    assert len(new_sandboxes) == 1, f"sandboxes before {old_sandboxes}, now {await sandboxes(guest, 'survivor')}"
    assert (await guest.sh(f"cat {runs}/runs")).split() == ["ran", "ran"], "the init container did not run again"
    init, main = status_of(after, "initContainerStatuses"), status_of(after, "containerStatuses")
    assert init["containerID"].removeprefix("docker://") not in old
    assert init["state"]["terminated"]["reason"] == "Completed"
    assert (init["restartCount"], main["restartCount"]) == (1, 1), (init, main)

"""Issue 17 item 3 in the VM lab: graceful node shutdown against the real systemd-logind.

`systemctl poweroff` of a joined guest whose pods write a marker in their preStop hook: the agent holds a logind
delay inhibitor (logind's InhibitDelayMaxSec raised through its drop-in), stops the regular pod before the
critical one, releases the lock, and the machine powers off; after the guest boots again the markers are on its
disk and the API shows the pods Failed/Terminated. Runs after test_lab.py on the same lab (guest lab-1).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import pytest
import yaml

from minikubelet.install import layout
from tests.integration.agent_env import BUSYBOX
from tests.lab.conftest import Lab
from tests.lab.guest import Guest
from tests.lab.test_lab import agent_journal, condition, journal_times, ready_node, running_pod, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

MARKERS = "/var/lib/mkl-shutdown-markers"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
GRACE, CRITICAL_GRACE = 30, 10
MAIN = "trap 'exit 143' TERM; while true; do sleep 1; done"


def marker_pod(name: str, node: str, pre_stop: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
                     "volumes": [{"name": "m", "hostPath": {"path": MARKERS, "type": "DirectoryOrCreate"}}],
                     "containers": [{"name": "main", "image": BUSYBOX, "command": ["sh", "-c", MAIN],
                                     "volumeMounts": [{"name": "m", "mountPath": "/m"}],
                                     "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", pre_stop]}}}}],
                     **spec}}


async def sh(guest: Guest, command: str) -> str:
    """`guest.sh`, again when ssh itself failed (exit 255: no connection within its timeout on a loaded host)."""
    for _ in range(5):
        r = await guest.run(command)
        if r.rc != 255:
            break
        await asyncio.sleep(3)
    assert r.rc == 0, f"{guest.name}: {command!r} exited {r.rc}:\n{r.out[-3000:]}"
    return r.out


async def kubelet_lock(guest: Guest) -> str | None:
    out = (await guest.run("systemd-inhibit --list --no-pager --no-legend")).out
    line = next((ln for ln in out.splitlines() if ln.split()[:1] == ["kubelet"]), None)
    return line


async def lock_held_for(guest: Guest) -> float:
    """Seconds from the agent seeing logind's PrepareForShutdown to its releasing the delay lock, in the boot
    that powered off (the agent logs both: manager.py's watch and process_shutdown)."""
    journal = await sh(guest, "journalctl -b -1 -u minikubelet --no-pager -o short-unix")

    def at(message: str) -> float:
        found = journal_times(journal, message)
        assert found, f"no {message!r} in the agent's journal of the previous boot:\n" + journal[-8000:]
        return found[-1]

    return at("Shutdown manager completed processing shutdown event") - at("Shutdown manager detected new shutdown event")


async def test_poweroff_gives_pods_their_grace(lab: Lab) -> None:
    guest = lab.guests[0]
    admin = lab.api.admin()
    # the KubeletConfiguration `minikubelet join` wrote, with the shutdown grace added
    config = {**yaml.safe_load(await sh(guest, f"cat {layout.CONFIG}")), "shutdownGracePeriod": f"{GRACE}s",
              "shutdownGracePeriodCriticalPods": f"{CRITICAL_GRACE}s"}
    await guest.put(layout.CONFIG, yaml.safe_dump(config).encode())
    await guest.sh(f"rm -rf {MARKERS} && systemctl restart minikubelet", timeout=300)
    await wait_for(f"node {guest.name} Ready", functools.partial(ready_node, admin, guest.name), 180)

    # the real logind: the kubelet's delay lock, and the delay raised from logind's default 5 s to 30 s
    try:
        lock = await wait_for("the kubelet's inhibitor lock", functools.partial(kubelet_lock, guest), 60)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- agent journal ---\n{await agent_journal(guest)}") from None
    assert "shutdown" in lock and "delay" in lock and "Kubelet needs time to handle node shutdown" in lock
    assert (await sh(guest, "cat /etc/systemd/logind.conf.d/99-kubelet.conf")) == (
        f"# Kubelet logind override\n[Login]\nInhibitDelayMaxSec={GRACE}\n")
    delay = await sh(guest, "busctl get-property org.freedesktop.login1 /org/freedesktop/login1 "
                           "org.freedesktop.login1.Manager InhibitDelayMaxUSec")
    assert delay.split() == ["t", str(GRACE * 1_000_000)]

    await admin.create(marker_pod("sd-regular", guest.name, "sleep 2; echo stopped > /m/regular"))
    await admin.create(marker_pod(
        "sd-critical", guest.name, "if [ -e /m/regular ]; then echo after-regular; else echo early; fi > /m/critical",
        priorityClassName="system-node-critical", priority=2000001000))
    for name in ("sd-regular", "sd-critical"):
        await running_pod(lab, guest, name)
    boot_id = (await admin.get("nodes", guest.name))["status"]["nodeInfo"]["bootID"]

    t0 = time.monotonic()
    await guest.run("systemctl poweroff", timeout=30)
    seen_not_ready = ""
    while guest.qemu_pid() is not None:
        assert time.monotonic() - t0 < 300, f"{guest.name} still up 300 s after poweroff:\n{guest.console_tail()}"
        node = await admin.get("nodes", guest.name)
        ready: dict[str, Any] = next((c for c in node["status"]["conditions"] if c["type"] == "Ready"), {})
        if ready.get("status") == "False":
            seen_not_ready = ready.get("message", "")
        await asyncio.sleep(1)
    # the node said why it went NotReady before it was gone
    assert seen_not_ready == "node is shutting down"

    await guest.boot()
    await guest.wait_ssh()
    # With a 30 s budget, the pods' ~3 s of preStop must not have cost the whole delay: the agent released its
    # lock early and logind did not have to time it out. Read in the guest's persistent journal, since the time
    # the whole emulated guest takes to power off varies too much under TCG to show it.
    held = await lock_held_for(guest)
    assert held < GRACE - 5, f"the agent held its delay lock {held:.1f} s of the {GRACE} s"
    logind = await sh(guest, "journalctl -b -1 -u systemd-logind --no-pager -o cat")
    assert "inhibitor timeout is reached" not in logind, logind[-3000:]
    markers = await sh(guest, f"cat {MARKERS}/regular {MARKERS}/critical")
    assert markers == "stopped\nafter-regular\n", markers

    async def rebooted() -> dict[str, Any] | None:
        node = await admin.get("nodes", guest.name)
        return node if node["status"]["nodeInfo"]["bootID"] != boot_id and condition(node, "Ready") == "True" else None

    await wait_for(f"{guest.name} Ready after the boot", rebooted, 420, interval=5)
    for name in ("sd-regular", "sd-critical"):
        status = (await admin.get("pods", name, "default"))["status"]
        if (status["phase"], status.get("reason"), status.get("message")) != ("Failed", "Terminated", SHUTDOWN_MESSAGE):
            # what the agent did in the boot that powered off (the journal is persistent on the guest)
            before = (await guest.run("journalctl -b -1 -u minikubelet --no-pager -o cat | tail -120")).out
            raise AssertionError(f"{name}: {status}\n--- agent journal of the previous boot ---\n{before}")
        assert any(c["type"] == "DisruptionTarget" and c["status"] == "True"
                   and c.get("reason") == "TerminationByKubelet" for c in status["conditions"])

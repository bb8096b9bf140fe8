"""The node shutdown manager against a real dbus-daemon and the logind double (tests/logind_double.py): the
inhibitor lock, logind's InhibitDelayMaxSec raised through its drop-in and a reload, PrepareForShutdown and its
cancellation. No Docker: pods here are plain objects and their kill is the test's; the agent test with real
containers is test_agent_node_shutdown.py."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from minikubelet.base.clock import RealClock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.nodeshutdown.groups import shutdown_periods
from minikubelet.nodeshutdown.logind import INHIBIT_WHY, KUBELET_LOGIND_CONF, Logind
from minikubelet.nodeshutdown.manager import NodeShutdownManager
from minikubelet.worker.lifecycle import PodStatusFn
from tests.logind_double import LogindDouble


@pytest.fixture
async def logind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LogindDouble]:
    double = await LogindDouble(tmp_path).start()
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", double.address)
    try:
        yield double
    finally:
        await double.stop()


def _pod(name: str, priority: int | None = None) -> Pod:
    spec: dict[str, object] = {"containers": [{"name": "c", "image": "busybox"}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


class Pods:
    """The pods the manager sees, and a record of how it killed them (each kill completes at once)."""

    def __init__(self, *pods: Pod) -> None:
        self.pods = list(pods)
        self.killed: list[tuple[str, int, dict[str, object]]] = []
        self.events: list[tuple[str, str, str]] = []

    def kill(self, pod: Pod, grace: int, status_fn: PodStatusFn) -> asyncio.Event:
        status: dict[str, object] = {"phase": "Running"}
        status_fn(status)
        self.killed.append((pod["metadata"]["name"], grace, status))
        done = asyncio.Event()
        done.set()
        return done

    def manager(self, config: KubeletConfig) -> NodeShutdownManager:
        return NodeShutdownManager(
            shutdown_periods(config), RealClock(), lambda: list(self.pods), self.kill,
            lambda t, r, m: self.events.append((t, r, m)), lambda _p, t, r, m: None, lambda: None,
            lambda: Logind.connect(self._conf_dir))

    _conf_dir = ""


async def _until(what: str, check: object, timeout: float = 10.0) -> None:
    assert callable(check)
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_lock_delay_override_shutdown_and_cancel(logind: LogindDouble) -> None:
    pods = Pods(_pod("web"), _pod("dns", priority=2_000_001_000))
    pods._conf_dir = logind.conf_dir
    m = pods.manager(KubeletConfig(shutdown_grace_period=20.0, shutdown_grace_period_critical_pods=8.0))
    task = asyncio.create_task(m.run())
    try:
        # logind allowed 5 s; the kubelet asks 20: its drop-in, then SIGHUP to logind through systemd
        held = await logind.wait_held()
        assert [(i.who, i.why, i.mode, i.what) for i in held] == [("kubelet", INHIBIT_WHY, "delay", "shutdown")]
        assert logind.kill_units == [("systemd-logind.service", "all", 1)]
        drop_in = Path(logind.conf_dir) / KUBELET_LOGIND_CONF
        assert drop_in.read_text() == "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=20\n"
        assert logind.inhibit_delay_max == 20.0
        assert m.admit(_pod("new"), []).admit and m.errors() == ()

        waited = await logind.shutdown()
        # released as soon as both groups were done, long before logind's 20 s
        assert waited < 5.0 and not logind.held()
        assert m.shutting_down and m.errors() == ("node is shutting down",)
        refused = m.admit(_pod("late"), [])
        assert (refused.admit, refused.reason, refused.message) == (
            False, "NodeShutdown", "Pod was rejected as the node is shutting down.")
        assert [(n, g) for n, g, _ in pods.killed] == [("web", 12), ("dns", 8)]  # regular first, then critical
        status = pods.killed[0][2]
        assert (status["phase"], status["reason"], status["message"]) == (
            "Failed", "Terminated", "Pod was terminated in response to imminent node shutdown.")
        assert ("Normal", "NodeShutdown", "Shutdown manager detected shutdown event") in pods.events

        # cancelled: the node takes the lock again and admits pods again
        logind.cancel()
        await _until("the lock taken again", lambda: len(logind.held()) == 1)
        assert not m.shutting_down and m.admit(_pod("new"), []).admit
        assert ("Normal", "NodeShutdown", "Shutdown manager detected shutdown cancellation") in pods.events
        assert len(logind.kill_units) == 1  # the delay already suffices: no second reload
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # the agent stopping releases the lock
    await _until("the lock released on stop", lambda: not logind.held())


async def test_enough_delay_no_override(logind: LogindDouble, tmp_path: Path) -> None:
    pods = Pods()
    pods._conf_dir = logind.conf_dir
    m = pods.manager(KubeletConfig(shutdown_grace_period=3.0))
    task = asyncio.create_task(m.run())
    try:
        await logind.wait_held()
        assert logind.kill_units == [] and not os.path.exists(logind.conf_dir)
        # no pods: nothing to wait for, the lock goes at once
        assert await logind.shutdown() < 2.0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_no_system_bus_is_logged_and_the_manager_stays_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/no-bus")
    pods = Pods(_pod("web"))
    m = pods.manager(KubeletConfig(shutdown_grace_period=10.0))
    with caplog.at_level(logging.ERROR, logger="minikubelet.nodeshutdown"):
        await asyncio.wait_for(m.run(), 5)
    assert "Failed to start node shutdown manager" in caplog.text
    assert m.admit(_pod("new"), []).admit and m.errors() == ()


async def test_a_lost_bus_is_reconnected_and_the_lock_taken_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = await LogindDouble(tmp_path).start()
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", first.address)
    pods = Pods()
    pods._conf_dir = first.conf_dir
    m = pods.manager(KubeletConfig(shutdown_grace_period=3.0))
    task = asyncio.create_task(m.run())
    second: LogindDouble | None = None
    try:
        await first.wait_held()
        await first.stop()  # the bus goes away (dbus-daemon restarted, as on a package upgrade)
        second = await LogindDouble(tmp_path).start()
        # upstream retries every second
        held = await second.wait_held(timeout=10)
        assert [i.who for i in held] == ["kubelet"]
        assert await second.shutdown() < 2.0 and m.shutting_down
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if second is not None:
            await second.stop()


async def test_a_delay_logind_does_not_take_leaves_the_manager_off_with_upstreams_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    double = await LogindDouble(tmp_path, rereads_config=False).start()
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", double.address)
    pods = Pods()
    pods._conf_dir = double.conf_dir
    m = pods.manager(KubeletConfig(shutdown_grace_period=20.0))
    try:
        with caplog.at_level(logging.ERROR, logger="minikubelet.nodeshutdown"):
            await asyncio.wait_for(m.run(), 10)  # five polls, 100 ms doubling: about 3 s
        errors = [getattr(r, "kv", {}).get("err") for r in caplog.records
                  if r.getMessage() == "Failed to start node shutdown manager"]
        assert errors == ["node shutdown manager was timed out after 5 attempts waiting for logind InhibitDelayMaxSec "
                          "to update to 20s (ShutdownGracePeriod), current value is 5s"]
        assert not double.held()  # no lock taken: logind would not honour it long enough
    finally:
        await double.stop()

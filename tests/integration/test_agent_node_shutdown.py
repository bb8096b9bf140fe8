"""Graceful node shutdown with the real agent, the real Docker Engine and the test API server; logind is the double
of tests/logind_double.py on a dbus-daemon of the test's own (this host has no systemd: the real-logind check,
`systemctl poweroff` in the VM lab, is described in docs/node-shutdown.md).

The agent takes a delay inhibitor, raises InhibitDelayMaxSec through its drop-in; on PrepareForShutdown(true) the
regular pod's preStop hook runs and ends before the critical pod's starts, both pods end Failed/Terminated with
DisruptionTarget, the node turns NotReady with upstream's message, a new pod is refused with NodeShutdown, and
the lock is released as soon as the pods are down."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent, stop_and_clean
from tests.integration.runtime_view import RuntimeView
from tests.logind_double import LogindDouble

docker = agent_env.docker
runtime_view = views.runtime_view
api = agent_env.api

pytestmark = pytest.mark.integration

SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
# dies of SIGTERM at once, as a program without a handler (a shell as PID 1 would ignore it until the SIGKILL)
MAIN = "trap 'exit 143' TERM; while true; do sleep 1; done"


@pytest.fixture
async def logind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LogindDouble]:
    (tmp_path / "bus").mkdir()
    double = await LogindDouble(tmp_path / "bus").start()
    # the agent process inherits these: its system bus, and where logind's drop-ins live
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", double.address)
    monkeypatch.setenv("MKL_LOGIND_CONF_DIR", double.conf_dir)
    try:
        yield double
    finally:
        await double.stop()


def _pod(node: str, name: str, marker_dir: Path, pre_stop: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
                     "volumes": [{"name": "m", "hostPath": {"path": str(marker_dir), "type": "Directory"}}],
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sh", "-c", MAIN],
                                     "volumeMounts": [{"name": "m", "mountPath": "/m"}],
                                     "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", pre_stop]}}}}],
                     **spec}}


async def test_poweroff_stops_regular_then_critical_pods_and_releases_the_lock(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, logind: LogindDouble, runtime_view: RuntimeView) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.extra = {"shutdownGracePeriod": "20s", "shutdownGracePeriodCriticalPods": "10s"}
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
        held = await logind.wait_held(timeout=30)
        assert [(i.who, i.mode) for i in held] == [("kubelet", "delay")]
        # logind's 5 s did not cover 20 s: the drop-in, then a reload through systemd's KillUnit(SIGHUP)
        assert logind.inhibit_delay_max == 20.0 and logind.kill_units == [("systemd-logind.service", "all", 1)]

        await admin.create(_pod(agent.node, "regular", markers, "sleep 2; echo stopped > /m/regular"))
        # the real API server's Priority admission gives system-node-critical this priority
        await admin.create(_pod(agent.node, "critical", markers,
                                "if [ -e /m/regular ]; then echo after-regular; else echo early; fi > /m/critical",
                                priorityClassName="system-node-critical", priority=2000001000))

        async def both_running() -> bool:
            pods = [await _get(admin, "pods", n, "default") for n in ("regular", "critical")]
            return all(p is not None and (p.get("status") or {}).get("phase") == "Running" for p in pods)

        await agent.wait_for("both pods Running", both_running, timeout=60)

        waited = await logind.shutdown()
        # held until both groups were down: the regular preStop alone takes 2 s; released long before 20 s
        assert 2.0 <= waited < 15.0, waited
        assert not logind.held()
        assert (markers / "regular").read_text() == "stopped\n"
        assert (markers / "critical").read_text() == "after-regular\n"

        async def final(name: str) -> dict[str, Any] | None:
            pod = await _get(admin, "pods", name, "default")
            status = (pod or {}).get("status") or {}
            return status if status.get("phase") == "Failed" else None

        for name in ("regular", "critical"):
            # already in the API when the lock went: a machine going down must not lose them
            status = await final(name) or {}
            assert status, await _get(admin, "pods", name, "default")
            assert (status["reason"], status["message"]) == ("Terminated", SHUTDOWN_MESSAGE)
            disruption = [c for c in status["conditions"] if c["type"] == "DisruptionTarget"]
            assert len(disruption) == 1 and {k: disruption[0][k] for k in ("status", "reason", "message")} == {
                "status": "True", "reason": "TerminationByKubelet", "message": SHUTDOWN_MESSAGE}
            main = status["containerStatuses"][0]
            assert "terminated" in main["state"], main
            assert not await runtime_view.running(main["containerID"])

        async def not_ready() -> dict[str, Any] | None:
            node = await _get(admin, "nodes", agent.node)
            ready = next((c for c in ((node or {}).get("status") or {}).get("conditions", [])
                          if c["type"] == "Ready"), None)
            return ready if ready is not None and ready["status"] == "False" else None

        ready = await agent.wait_for("the node NotReady", not_ready, timeout=20)
        assert (ready["reason"], ready["message"]) == ("KubeletNotReady", "node is shutting down")

        await admin.create(_pod(agent.node, "late", markers, "true"))
        status = await agent.wait_for("the late pod refused", lambda: final("late"), timeout=20)
        # upstream's rejectPod prefixes the handler's message
        assert (status["reason"], status["message"]) == (
            "NodeShutdown", "Pod was rejected: Pod was rejected as the node is shutting down.")

        events = (await admin.list("events", "default"))["items"]
        assert any(e["reason"] == "NodeShutdown" and e["message"] == "Shutdown manager detected shutdown event"
                   and e["involvedObject"]["kind"] == "Node" for e in events)
    finally:
        await stop_and_clean(agent, docker)


async def _get(admin: Any, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
    try:
        got: dict[str, Any] = await admin.get(plural, name, namespace)
    except ApiStatusError:
        return None
    return got


def _bind(check: Callable[[str], Awaitable[dict[str, Any] | None]], name: str) -> Callable[[], Awaitable[Any]]:
    return lambda: check(name)

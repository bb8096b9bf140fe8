"""The probe manager: which workers exist, the started/ready/liveness queries, events, metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from cri.runtime import RuntimeService
from cri.types import ExecResult
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod, PodView
from minikubelet.base.prometheus import CollectorRegistry
from probes.manager import ProbeManager
from probes.result import ProbeKind


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


async def advance(clock: FakeClock, seconds: float, step: float = 1.0) -> None:
    for _ in range(round(seconds / step)):
        clock.advance(step)
        await settle()


class ScriptRuntime:
    """exec_sync answers by the command's first word: exit codes set by the test."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.exit_codes: dict[str, int] = {}
        self.calls: list[tuple[float, str, str]] = []

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        self.calls.append((self.clock.monotonic(), container_id, cmd[0]))
        code = self.exit_codes.get(cmd[0], 0)
        return ExecResult(code, f"{cmd[0]} said {code}".encode())

    def times(self, word: str) -> list[float]:
        return [t for t, _, w in self.calls if w == word]


def probe(word: str, **extra: Any) -> dict[str, Any]:
    return {"exec": {"command": [word]}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
            "failureThreshold": 3, "initialDelaySeconds": 0, **extra}


def make_pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}, "spec": spec}


class Env:
    def __init__(self, rng_value: float = 0.0) -> None:
        self.clock = FakeClock()
        self.runtime = ScriptRuntime(self.clock)
        self.registry = CollectorRegistry()
        self.changes: list[str] = []
        self.events: list[tuple[str, str, str, str]] = []
        self.manager = ProbeManager(
            cast(RuntimeService, self.runtime), self.clock, self.registry, self.changes.append,
            events=self.record, rng=lambda: rng_value,
        )

    def record(self, pod: Pod, etype: str, reason: str, message: str, container: str = "") -> None:
        assert pod["metadata"]["uid"] == "u1"
        self.events.append((container, etype, reason, message))


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = Env()
    yield e
    await e.manager.close()


async def test_workers_only_for_running_app_containers_and_sidecars(env: Env) -> None:
    pod = make_pod(
        initContainers=[
            {"name": "init", "livenessProbe": probe("init")},
            {"name": "side", "restartPolicy": "Always", "readinessProbe": probe("side")},
        ],
        containers=[
            {"name": "app", "livenessProbe": probe("live"), "readinessProbe": probe("ready")},
            {"name": "stopped", "livenessProbe": probe("x")},
            {"name": "plain"},
        ],
        ephemeralContainers=[{"name": "debug", "livenessProbe": probe("eph")}],
    )
    ids = {"init": "i1", "side": "s1", "app": "a1", "stopped": None, "plain": "p1", "debug": "d1"}
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", ids, {})
    assert env.manager.worker_keys() == {
        ("u1", "side", ProbeKind.READINESS),
        ("u1", "app", ProbeKind.LIVENESS),
        ("u1", "app", ProbeKind.READINESS),
    }


async def test_no_probes_means_started_and_ready_while_running(env: Env) -> None:
    pod = make_pod(containers=[{"name": "app"}])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    assert env.manager.started("u1", "app") and env.manager.readiness("u1", "app")
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": None}, {})
    assert not env.manager.started("u1", "app")
    assert not env.manager.readiness("u1", "app")


async def test_startup_gates_the_other_probes_and_readiness_follows_at_once(env: Env) -> None:
    env.runtime.exit_codes["start"] = 1
    pod = make_pod(containers=[{
        "name": "app",
        "startupProbe": probe("start", failureThreshold=30),
        "livenessProbe": probe("live"),
        "readinessProbe": probe("ready", periodSeconds=30),
    }])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {"app": env.clock.now()})
    await settle()
    await advance(env.clock, 20)
    assert env.runtime.times("start") == [0.0, 10.0, 20.0]
    assert env.runtime.times("live") == env.runtime.times("ready") == []
    assert not env.manager.started("u1", "app")
    assert not env.manager.readiness("u1", "app")

    env.runtime.exit_codes["start"] = 0
    await advance(env.clock, 10)
    assert env.manager.started("u1", "app")
    # readiness is probed right away (not at its next 30 s tick), so the pod is ready at once
    assert env.runtime.times("ready") == [30.0]
    assert env.manager.readiness("u1", "app")
    await advance(env.clock, 30)
    assert env.runtime.times("start") == [0.0, 10.0, 20.0, 30.0]  # idle once started
    # liveness shares startup's ticks: its 30 s tick may see the container started or not
    assert env.runtime.times("live")[-3:] == [40.0, 50.0, 60.0]
    assert min(env.runtime.times("live")) >= 30.0
    assert env.runtime.times("ready") == [30.0, 60.0]
    assert "u1" in env.changes


async def test_liveness_failure_is_reported_with_kill_message_and_events(env: Env) -> None:
    env.runtime.exit_codes["live"] = 3
    pod = make_pod(containers=[{"name": "app", "livenessProbe": probe("live")}])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {"app": env.clock.now()})
    await settle()
    await advance(env.clock, 10)
    assert env.manager.liveness_failed("u1", "app", "a1") is None
    await advance(env.clock, 10)
    failure = env.manager.liveness_failed("u1", "app", "a1")
    assert failure is not None
    assert failure.kind is ProbeKind.LIVENESS
    assert failure.message() == "Container app failed liveness probe, will be restarted"
    assert failure.message(will_restart=False) == "Container app failed liveness probe"
    assert failure.reason == "LivenessProbe"
    assert env.manager.liveness_failed("u1", "app", "other") is None
    assert env.events == [("app", "Warning", "Unhealthy", "Liveness probe failed: live said 3")] * 3

    # The pod worker kills it and starts a new container: probing resumes for the new one.
    env.runtime.exit_codes["live"] = 0
    await advance(env.clock, 30)
    assert len(env.runtime.times("live")) == 3
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a2"}, {"app": env.clock.now()})
    assert env.manager.liveness_failed("u1", "app", "a2") is None
    await advance(env.clock, 10)
    assert [cid for _, cid, _ in env.runtime.calls][-1] == "a2"


async def test_container_stop_stops_workers_and_restart_starts_them(env: Env) -> None:
    pod = make_pod(containers=[{"name": "app", "readinessProbe": probe("ready")}])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    await settle()
    assert env.manager.readiness("u1", "app")
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": None}, {})
    await settle()
    assert env.manager.worker_keys() == set()
    assert env.manager.results.get("u1", "app", ProbeKind.READINESS) is None
    assert not env.manager.readiness("u1", "app")
    calls = len(env.runtime.calls)
    await advance(env.clock, 30)
    assert len(env.runtime.calls) == calls
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a2"}, {})
    assert not env.manager.readiness("u1", "app")  # Failure until the new container's first probe
    await settle()
    assert env.manager.readiness("u1", "app")


async def test_deletion_stops_liveness_and_startup_but_keeps_readiness(env: Env) -> None:
    pod = make_pod(containers=[{"name": "app", "startupProbe": probe("start"), "livenessProbe": probe("live"),
                                "readinessProbe": probe("ready")}])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    await settle()
    assert len(env.manager.worker_keys()) == 3
    pod["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    assert env.manager.worker_keys() == {("u1", "app", ProbeKind.READINESS)}
    env.runtime.exit_codes["live"] = 1
    await advance(env.clock, 50)
    assert env.manager.liveness_failed("u1", "app", "a1") is None
    assert env.runtime.times("ready")[-1] == 50.0


async def test_remove_pod_drops_everything(env: Env) -> None:
    pod = make_pod(containers=[{"name": "app", "readinessProbe": probe("ready")}])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    await settle()
    env.manager.remove_pod("u1")
    await settle()
    assert env.manager.worker_keys() == set()
    assert env.manager.results.keys() == []
    assert not env.manager.started("u1", "app")


async def test_metrics_count_results_and_forget_stopped_workers(env: Env) -> None:
    env.runtime.exit_codes["ready"] = 1
    pod = make_pod(containers=[{"name": "app", "readinessProbe": probe("ready")}])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    await settle()
    await advance(env.clock, 10)
    env.runtime.exit_codes["ready"] = 0
    await advance(env.clock, 10)
    labels = {"probe_type": "Readiness", "container": "app", "pod": "web", "namespace": "ns", "pod_uid": "u1"}
    total = "prober_probe_total"
    assert env.registry.get_sample_value(total, {**labels, "result": "failed"}) == 2
    assert env.registry.get_sample_value(total, {**labels, "result": "successful"}) == 1
    duration_labels = {k: v for k, v in labels.items() if k != "pod_uid"}
    assert env.registry.get_sample_value("prober_probe_duration_seconds_count", duration_labels) == 1
    env.manager.remove_pod("u1")
    assert env.registry.get_sample_value(total, {**labels, "result": "successful"}) is None


async def test_unknown_results_emit_errored_events_and_do_not_kill(env: Env) -> None:
    pod = make_pod(containers=[{"name": "app", "ports": [], "livenessProbe": {
        **probe("x"), "exec": None, "tcpSocket": {"port": "missing"}, "failureThreshold": 1}}])
    env.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    await settle()
    await advance(env.clock, 20)
    assert env.manager.liveness_failed("u1", "app", "a1") is None
    reasons = {(t, r) for _, t, r, _ in env.events}
    assert reasons == {("Warning", "Unhealthy")}
    assert env.events[0][3].startswith("Liveness probe errored and resulted in unknown state: port")
    labels = {"probe_type": "Liveness", "container": "app", "pod": "web", "namespace": "ns", "pod_uid": "u1",
              "result": "unknown"}
    assert env.registry.get_sample_value("prober_probe_total", labels) == 3


async def test_jitter_only_right_after_the_agent_starts() -> None:
    e = Env(rng_value=0.5)
    pod = make_pod(containers=[{"name": "app", "readinessProbe": probe("ready")}])
    e.manager.update_pod(PodView.of(pod), "10.0.0.5", {"app": "a1"}, {})
    await settle()
    await advance(e.clock, 10)
    assert e.runtime.times("ready") == [5.0]
    pod2 = make_pod(containers=[{"name": "late", "readinessProbe": probe("ready")}])
    pod2["metadata"]["uid"] = "u2"
    e.manager.update_pod(PodView.of(pod2), "10.0.0.6", {"late": "l1"}, {})
    await settle()
    assert e.runtime.calls[-1] == (10.0, "l1", "ready")  # no jitter once the agent is a period old
    await e.manager.close()

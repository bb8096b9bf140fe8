"""Divergences from the v1.36 kubelet found by review, as table tests (issue 10: D1, D1b, D2).

Each names the upstream function it follows (pkg/kubelet/kuberuntime)."""

from __future__ import annotations

from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.worker.planner import compute_pod_actions
from probes.result import ProbeResults, Result
from tests.unit.factories import c, exited, pod, running, sandbox, sidecar


def test_D1_computeInitContainerActions_restarts_an_earlier_sidecar_that_exited() -> None:
    """Inits [sidecar proxy, migrate]: proxy exited 1 while migrate runs -> upstream restarts proxy."""
    p = pod([c("app")], inits=[sidecar("proxy"), c("migrate")])
    state = PodRuntimeState("uid-1", [sandbox()], [exited(p, "proxy", 1), running(p, "migrate")])
    a = compute_pod_actions(PodView.of(p), state, ProbeResults())
    assert a.init_to_start == ["proxy"] and not a.kill_pod and a.containers_to_start == []


def test_D1b_computeInitContainerActions_kills_an_earlier_sidecar_failing_liveness() -> None:
    """A sidecar failing its liveness probe while a later regular init container runs is restarted."""
    p = pod([c("app")], inits=[sidecar("proxy", livenessProbe={"exec": {"command": ["true"]}}), c("migrate")])
    proxy = running(p, "proxy")
    state = PodRuntimeState("uid-1", [sandbox()], [proxy, running(p, "migrate")])
    a = compute_pod_actions(PodView.of(p), state, ProbeResults(liveness={proxy.id: Result.FAILURE}))
    assert list(a.containers_to_kill) == [proxy.id]
    assert a.containers_to_kill[proxy.id].message == "Init container proxy failed liveness probe"
    assert a.init_to_start == ["proxy"]


def test_D1_walk_keeps_later_progress_marker() -> None:
    """The furthest init container found still drives progress: migrate done -> the app starts; the exited
    earlier sidecar is restarted in the same pass."""
    p = pod([c("app")], inits=[sidecar("proxy"), c("migrate")])
    state = PodRuntimeState("uid-1", [sandbox()], [exited(p, "proxy", 137), exited(p, "migrate", 0)])
    a = compute_pod_actions(PodView.of(p), state, ProbeResults())
    assert a.init_to_start == ["proxy"]


def test_D2_isInitContainerFailed_counts_an_oom_kill_with_exit_code_0() -> None:
    """restartPolicy Never, i1 exited 0 with reason OOMKilled: upstream kills the pod, never starts i2."""
    p = pod([c("app")], inits=[c("i1"), c("i2")], restart_policy="Never")
    state = PodRuntimeState("uid-1", [sandbox()], [exited(p, "i1", 0, reason="OOMKilled")])
    a = compute_pod_actions(PodView.of(p), state, ProbeResults())
    assert a.kill_pod and a.init_to_start == []


def test_D2_oom_killed_init_is_restarted_when_the_policy_allows() -> None:
    p = pod([c("app")], inits=[c("i1"), c("i2")], restart_policy="Always")
    state = PodRuntimeState("uid-1", [sandbox()], [exited(p, "i1", 0, reason="OOMKilled")])
    a = compute_pod_actions(PodView.of(p), state, ProbeResults())
    assert not a.kill_pod and a.init_to_start == ["i1"]


def test_D12_HashContainer_hashes_only_name_and_image() -> None:
    """A change of a field upstream does not hash (resources, env, probes) keeps the running container; a new
    image restarts it."""
    p = pod([c("app", env=[{"name": "A", "value": "1"}])])
    app = running(p, "app")
    changed = pod([c("app", env=[{"name": "A", "value": "2"}], resources={"limits": {"cpu": "1"}},
                     readinessProbe={"exec": {"command": ["true"]}})])
    keep = compute_pod_actions(PodView.of(changed), PodRuntimeState("uid-1", [sandbox()], [app]), ProbeResults())
    assert keep.idle
    new_image = pod([c("app", image="busybox:1.37", env=[{"name": "A", "value": "1"}])])
    restart = compute_pod_actions(PodView.of(new_image), PodRuntimeState("uid-1", [sandbox()], [app]), ProbeResults())
    assert restart.containers_to_kill[app.id].message == "Container app definition changed, will be restarted"

"""PodView, ContainerView and ProbeSpec: typed reads of a validated pod, upstream defaults for what is left out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from minikubelet.base import podview
from minikubelet.base.podview import ContainerPort, ContainerView, PodView, ProbeSpec, VolumeMount
from tests.fixtures import KUBERNETES


def real_pod() -> dict[str, Any]:
    """A pod a real kubelet ran (API-defaulted): init container, sidecar, app container."""
    fx = json.loads((KUBERNETES / "pod-real-kubelet-crashloopbackoff.json").read_text())["response"]["body"]
    return {"metadata": {"name": "rich", "namespace": "default", "uid": "uid-1"}, "spec": fx["spec"]}


def test_containers_by_kind_in_spec_order() -> None:
    v = PodView.of(real_pod())
    assert [(c.name, c.kind) for c in v.containers] == [
        ("init-setup", "init"), ("sidecar-logger", "sidecar"), ("main", "regular")]
    assert [c.name for c in v.regular_inits] == ["init-setup"]
    assert [c.name for c in v.sidecars] == ["sidecar-logger"]
    assert [c.name for c in v.probed_containers] == ["sidecar-logger", "main"]
    assert v.container_kind("main") == "regular" and v.container_kind("nope") is None
    assert v.find("nope") is None
    with pytest.raises(KeyError):
        v.container("nope")


def test_identity_and_pod_fields() -> None:
    raw = real_pod()
    raw["metadata"]["annotations"] = {"kubernetes.io/config.source": "file"}
    raw["spec"].update(hostNetwork=True, hostPID=True, activeDeadlineSeconds=60,
                       readinessGates=[{"conditionType": "example.com/a"}])
    v = PodView.of(raw)
    assert (v.uid, v.name, v.namespace, v.full_name, v.format_pod) == (
        "uid-1", "rich", "default", "rich_default", "rich_default(uid-1)")
    assert (v.host_network, v.host_pid, v.host_ipc) == (True, True, False)
    assert v.active_deadline_seconds == 60 and v.readiness_gates == ("example.com/a",)
    assert v.is_static and v.restart_policy == "Always" and v.should_restart_on_failure
    assert v.raw is raw  # the JSON stays the source of truth: unknown fields are read from it


def test_missing_optional_fields_read_as_upstream_defaults() -> None:
    v = PodView.of({"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "a"}]}})
    assert (v.name, v.namespace, v.restart_policy, v.grace_period) == ("", "default", "Always", 30)
    assert (v.generation, v.deletion_timestamp, v.active_deadline_seconds) == (None, None, None)
    assert v.init_containers == () and v.readiness_gates == () and v.volumes == () and not v.is_static
    assert v.api_status == {} and v.requests is None and v.overhead is None
    c = v.container("a")
    assert (c.image, c.image_pull_policy, c.restart_policy, c.is_sidecar) == ("", "IfNotPresent", None, False)
    assert (c.termination_message_path, c.termination_message_policy) == ("/dev/termination-log", "File")
    assert (c.startup_probe, c.liveness_probe, c.readiness_probe, c.post_start, c.pre_stop) == (None,) * 5
    assert (c.has_resources, c.requests, c.limits, c.ports, c.volume_mounts) == (False, None, None, (), ())
    assert (c.run_as_user, c.privileged, c.stdin, c.tty, c.stop_signal) == (None, False, False, False, "")
    assert PodView.of({}).containers == ()


@pytest.mark.parametrize(
    ("meta", "spec", "grace"),
    [
        ({}, {"terminationGracePeriodSeconds": 5}, 5),
        ({"deletionGracePeriodSeconds": 0}, {"terminationGracePeriodSeconds": 5}, 0),
        ({}, {"terminationGracePeriodSeconds": -1}, 30),
        ({}, {}, 30),
    ],
)
def test_grace_period_prefers_the_deletion(meta: dict[str, Any], spec: dict[str, Any], grace: int) -> None:
    raw = {"metadata": {"uid": "u", **meta}, "spec": {"containers": [], **spec}}
    assert PodView.of(raw).grace_period == grace


def test_container_fields() -> None:
    raw = {
        "name": "web", "image": "busybox:1.36", "imagePullPolicy": "Never", "command": ["sh"], "args": ["-c", "x"],
        "workingDir": "/w", "env": [{"name": "A", "value": "1"}],
        "ports": [{"name": "http", "containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.1"},
                  {"containerPort": 53, "protocol": "UDP"}],
        "volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": True}],
        "lifecycle": {"postStart": {"exec": {"command": ["true"]}}, "stopSignal": "SIGUSR1"},
        "resources": {"limits": {"memory": "64Mi"}},
        "securityContext": {"runAsUser": 1000, "readOnlyRootFilesystem": True},
        "terminationMessagePolicy": "FallbackToLogsOnError", "tty": True, "x-unknown": 1,
    }
    c = ContainerView.of(raw)
    assert (c.name, c.image, c.kind, c.image_pull_policy) == ("web", "busybox:1.36", "regular", "Never")
    assert (c.command, c.args, c.working_dir, c.env) == (("sh",), ("-c", "x"), "/w", ({"name": "A", "value": "1"},))
    assert c.ports == (ContainerPort("http", 80, "TCP", 8080, "127.0.0.1"), ContainerPort("", 53, "UDP"))
    assert c.volume_mounts == (VolumeMount("v", "/v", True),)
    assert c.post_start == {"exec": {"command": ["true"]}} and c.pre_stop is None and c.stop_signal == "SIGUSR1"
    assert (c.has_resources, c.limits, c.requests) == (True, {"memory": "64Mi"}, None)
    assert (c.run_as_user, c.run_as_group, c.read_only_root_filesystem) == (1000, None, True)
    assert c.termination_message_policy == "FallbackToLogsOnError" and c.tty and not c.stdin
    assert c.raw["x-unknown"] == 1


def test_spec_hash_is_the_container_hash_and_ignores_key_order() -> None:
    a = {"name": "a", "image": "x", "command": ["sleep", "1"]}
    b = {"command": ["sleep", "1"], "image": "x", "name": "a"}
    assert ContainerView.of(a).spec_hash == podview.container_hash(a) == ContainerView.of(b).spec_hash
    assert ContainerView.of({**a, "image": "y"}).spec_hash != ContainerView.of(a).spec_hash
    assert ContainerView.of({**a, "command": ["sleep", "2"]}).spec_hash == ContainerView.of(a).spec_hash


def test_probe_defaults_as_upstream() -> None:
    p = ProbeSpec.of({"exec": {"command": ["cat", "/ready"]}})
    assert (p.handler, p.command) == ("exec", ("cat", "/ready"))
    assert (p.initial_delay_seconds, p.timeout_seconds, p.period_seconds) == (0, 1, 10)
    assert (p.success_threshold, p.failure_threshold, p.termination_grace_period_seconds) == (1, 3, None)


def test_probe_handlers() -> None:
    http = ProbeSpec.of({"httpGet": {"port": "web", "path": "/h", "scheme": "HTTPS", "host": "h",
                                     "httpHeaders": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}]},
                         "periodSeconds": 3, "failureThreshold": 1, "terminationGracePeriodSeconds": 7})
    assert (http.handler, http.port, http.path, http.scheme, http.host) == ("httpGet", "web", "/h", "HTTPS", "h")
    assert http.http_headers == (("X", "1"), ("X", "2"))
    assert (http.period_seconds, http.failure_threshold, http.termination_grace_period_seconds) == (3, 1, 7)
    tcp = ProbeSpec.of({"tcpSocket": {"port": 80}})
    assert (tcp.handler, tcp.port, tcp.host, tcp.scheme) == ("tcpSocket", 80, "", "HTTP")
    grpc = ProbeSpec.of({"grpc": {"service": "s"}})
    assert (grpc.handler, grpc.port, grpc.service) == ("grpc", 0, "s")
    assert ProbeSpec.of({"timeoutSeconds": 2}).handler is None


def test_container_probes_by_kind() -> None:
    c = ContainerView.of({"name": "a", "livenessProbe": {"tcpSocket": {"port": 1}}}, "sidecar")
    assert c.is_sidecar and c.probe("liveness") == c.liveness_probe is not None
    assert c.probe("startup") is None and c.probe("readiness") is None
    with pytest.raises(ValueError):
        c.probe("bogus")

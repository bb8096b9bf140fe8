"""Pod defaulting against the API server's behaviour recorded in fixtures/pod-rich-create.json."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from minikubelet.api.defaults import apply_defaults, parse_image_tag, pull_policy_for
from tests.fixtures import KUBERNETES

FIXTURE = KUBERNETES / "pod-rich-create.json"
# What admission (not defaulting) adds: ServiceAccount and DefaultTolerationSeconds plugins.
ADMISSION_ONLY = {"serviceAccount", "serviceAccountName"}


def strip_admission(spec: dict[str, Any]) -> dict[str, Any]:
    spec = {k: v for k, v in spec.items() if k not in ADMISSION_ONLY}
    spec["volumes"] = [v for v in spec["volumes"] if not v["name"].startswith("kube-api-access-")]
    spec["tolerations"] = [t for t in spec["tolerations"] if t.get("key") != "node.kubernetes.io/unreachable"]
    for kind in ("initContainers", "containers"):
        for c in spec[kind]:
            c["volumeMounts"] = [m for m in c["volumeMounts"] if not m["name"].startswith("kube-api-access-")]
    return spec


def test_rich_pod_defaults_match_the_api_server() -> None:
    exchange = json.loads(FIXTURE.read_text())
    request, response = exchange["request"]["body"], exchange["response"]["body"]
    out = apply_defaults(request)
    assert out["spec"] == strip_admission(response["spec"])
    assert out["metadata"]["namespace"] == "default"


def test_input_is_not_mutated_and_unknown_fields_survive() -> None:
    pod = {"metadata": {"name": "p", "x-extra": 1}, "spec": {"containers": [{"name": "c", "image": "i", "futureField": {"a": 1}}],
                                                               "futureSpec": True}, "futureTop": [1]}
    before = copy.deepcopy(pod)
    out = apply_defaults(pod)
    assert pod == before
    assert out["futureTop"] == [1] and out["spec"]["futureSpec"] is True
    assert out["spec"]["containers"][0]["futureField"] == {"a": 1}
    assert out["metadata"]["x-extra"] == 1


def test_minimal_pod_gets_every_spec_default() -> None:
    out = apply_defaults({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert out["metadata"]["namespace"] == "default"
    spec = out["spec"]
    assert {k: spec[k] for k in ("restartPolicy", "terminationGracePeriodSeconds", "dnsPolicy", "securityContext",
                                 "schedulerName", "enableServiceLinks", "priority", "preemptionPolicy")} == {
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "securityContext": {}, "schedulerName": "default-scheduler", "enableServiceLinks": True, "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    assert spec["containers"][0] == {
        "name": "c", "image": "busybox", "imagePullPolicy": "Always", "resources": {},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }


def test_explicit_values_are_kept() -> None:
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "enableServiceLinks": False,
            "dnsPolicy": "Default", "containers": [{"name": "c", "image": "x", "imagePullPolicy": "Never"}]}
    out = apply_defaults({"spec": spec})["spec"]
    assert (out["restartPolicy"], out["terminationGracePeriodSeconds"], out["enableServiceLinks"], out["dnsPolicy"]) == (
        "Never", 0, False, "Default")
    assert out["containers"][0]["imagePullPolicy"] == "Never"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("docker.io/library/busybox", "Always"),
        ("localhost:5000/app", "Always"),
        ("localhost:5000/app:v1", "IfNotPresent"),
        ("registry.k8s.io/pause:3.10", "IfNotPresent"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),
        ("busybox:latest@sha256:" + "a" * 64, "Always"),
        ("busybox:1.2@sha256:" + "a" * 64, "IfNotPresent"),
        ("Busybox", "IfNotPresent"),  # invalid reference: parse error, IfNotPresent like upstream
        ("", "IfNotPresent"),
        ("a:b:c", "IfNotPresent"),
    ],
)
def test_image_pull_policy_default(image: str, policy: str) -> None:
    assert pull_policy_for(image) == policy


def test_parse_image_tag() -> None:
    assert parse_image_tag("quay.io/org/app:v2") == ("v2", "")
    assert parse_image_tag("app") == ("latest", "")
    assert parse_image_tag("app@sha256:" + "b" * 64) == ("", "sha256:" + "b" * 64)
    assert parse_image_tag("app@sha256:short") is None


def test_every_container_kind_is_defaulted_and_requests_come_from_limits() -> None:
    spec = {
        "initContainers": [{"name": "i", "image": "x:1", "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                                                           "requests": {"cpu": "500m"}}}],
        "containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"memory": "64Mi"}}}],
        "ephemeralContainers": [{"name": "e", "image": "x"}],
    }
    out = apply_defaults({"spec": spec})["spec"]
    assert out["initContainers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert out["containers"][0]["resources"]["requests"] == {"memory": "64Mi"}
    eph = out["ephemeralContainers"][0]
    assert eph["imagePullPolicy"] == "Always" and eph["terminationMessagePolicy"] == "File"


def test_probe_and_port_defaults() -> None:
    container = {
        "name": "c", "image": "x:1",
        "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
        "livenessProbe": {"httpGet": {"port": 80}, "periodSeconds": 0},
        "readinessProbe": {"tcpSocket": {"port": 80}, "successThreshold": 3},
        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}},
    }
    c = apply_defaults({"spec": {"containers": [container]}})["spec"]["containers"][0]
    assert [p["protocol"] for p in c["ports"]] == ["TCP", "UDP"]
    assert c["livenessProbe"] == {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "periodSeconds": 10,
                                  "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    assert c["readinessProbe"]["successThreshold"] == 3
    assert c["lifecycle"]["preStop"]["httpGet"] == {"port": 80, "path": "/stop", "scheme": "HTTP"}


def test_host_network_defaults_host_ports() -> None:
    spec = {"hostNetwork": True, "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 8080}]}]}
    assert apply_defaults({"spec": spec})["spec"]["containers"][0]["ports"][0]["hostPort"] == 8080


def test_volume_defaults() -> None:
    volumes = [
        {"name": "bare"},
        {"name": "hp", "hostPath": {"path": "/tmp"}},
        {"name": "cm", "configMap": {"name": "x"}},
        {"name": "sec", "secret": {"secretName": "s", "defaultMode": 256}},
        {"name": "dapi", "downwardAPI": {"items": [{"path": "l", "fieldRef": {"fieldPath": "metadata.labels"}},
                                                   {"path": "c", "resourceFieldRef": {"resource": "limits.cpu"}}]}},
        {"name": "proj", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
    ]
    out = {v["name"]: v for v in apply_defaults({"spec": {"volumes": volumes}})["spec"]["volumes"]}
    assert out["bare"] == {"name": "bare", "emptyDir": {}}
    assert out["hp"]["hostPath"] == {"path": "/tmp", "type": ""}
    assert out["cm"]["configMap"]["defaultMode"] == 420
    assert out["sec"]["secret"]["defaultMode"] == 256
    assert out["dapi"]["downwardAPI"]["defaultMode"] == 420
    assert out["dapi"]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert out["dapi"]["downwardAPI"]["items"][1]["resourceFieldRef"]["divisor"] == "0"
    assert out["proj"]["projected"] == {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}}],
                                        "defaultMode": 420}


@pytest.mark.parametrize(
    "pod",
    [
        {},
        {"spec": None},
        {"spec": "x"},
        {"metadata": "x", "spec": {"containers": "x", "volumes": 5}},
        {"spec": {"containers": [None, 1, "s", {"ports": "x", "livenessProbe": "y", "resources": {"limits": "z"},
                                                 "env": [{"valueFrom": "q"}], "image": 5, "lifecycle": []}]}},
        {"spec": {"volumes": [{"name": "v", "hostPath": "x", "projected": {"sources": "y"}}]}},
        {"spec": {"containers": [{"resources": {"limits": {"cpu": "1"}, "requests": "bad"}}]}},
    ],
)
def test_wrong_types_never_raise(pod: dict[str, Any]) -> None:
    apply_defaults(pod)


def test_false_probe_values_are_not_mistaken_for_zero() -> None:
    c = {"name": "c", "image": "x", "livenessProbe": {"exec": {"command": ["a"]}, "periodSeconds": False}}
    out = apply_defaults({"spec": {"containers": [c]}})
    assert out["spec"]["containers"][0]["livenessProbe"]["periodSeconds"] is False

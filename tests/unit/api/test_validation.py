"""Pod validation: API-server paths and messages, hostile input never raises."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from minikubelet.api.defaults import apply_defaults
from minikubelet.api.validation import FieldError, format_errors, validate_pod
from tests.fixtures import KUBERNETES

FIXTURES = KUBERNETES


def base() -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "containers": [{"name": "app", "image": "nginx:1.25", "ports": [{"name": "http", "containerPort": 80}],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }


def errors_of(pod: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate_pod(apply_defaults(pod))]


def test_valid_pod_has_no_errors() -> None:
    assert errors_of(base()) == []


def test_messages_match_the_api_server_422() -> None:
    exchange = json.loads((FIXTURES / "status-422-invalid-pod.json").read_text())
    pod = exchange["request"]["body"]
    pod["metadata"]["namespace"] = "default"
    # The API server defaults before validating, except restartPolicy which is set here.
    errs = validate_pod(apply_defaults(pod))
    causes = exchange["response"]["body"]["details"]["causes"]
    assert [(e.path, e.message, e.reason) for e in errs] == [(c["field"], c["message"], c["reason"]) for c in causes]
    assert exchange["response"]["body"]["message"].endswith(format_errors(errs))


def mutate(path: str, value: Any) -> dict[str, Any]:
    """base() with a dotted path set (list indices as integers); value DELETE removes the key."""
    pod = base()
    parts = path.split(".")
    target: Any = pod
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return pod


DELETE = object()
C0 = "spec.containers.0"

CASES = [
    ("metadata.name", "a" * 254, "metadata.name: Invalid value: \"" + "a" * 254 + "\": must be no more than 253 bytes"),
    ("metadata.name", DELETE, "metadata.name: Required value: name or generateName is required"),
    ("metadata.name", 5, "metadata.name: Invalid value: 5: must be a string"),
    ("metadata.namespace", "Bad.NS", "metadata.namespace: Invalid value: \"Bad.NS\": a lowercase RFC 1123 label"),
    ("metadata.labels", {"a": 1}, "metadata.labels[a]: Invalid value: 1: must be a string"),
    ("spec.containers", [], "spec.containers: Required value"),
    ("spec.containers", "x", "spec.containers: Invalid value: \"x\": must be a list"),
    ("spec.containers.0", "x", "spec.containers[0]: Invalid value: \"x\": must be an object"),
    (f"{C0}.image", 5, "spec.containers[0].image: Invalid value: 5: must be a string"),
    (f"{C0}.image", DELETE, "spec.containers[0].image: Required value"),
    (f"{C0}.image", " nginx", "spec.containers[0].image: Invalid value: \" nginx\": must not have leading"),
    (f"{C0}.name", "App", "spec.containers[0].name: Invalid value: \"App\": a lowercase RFC 1123 label"),
    (f"{C0}.name", "a" * 64, "spec.containers[0].name: Invalid value: \"" + "a" * 64 + "\": must be no more than 63"),
    (f"{C0}.name", DELETE, "spec.containers[0].name: Required value"),
    (f"{C0}.restartPolicy", "Always", "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init"),
    ("spec.restartPolicy", "Sometimes",
     'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ("spec.dnsPolicy", "Google", 'spec.dnsPolicy: Unsupported value: "Google"'),
    ("spec.terminationGracePeriodSeconds", -1,
     "spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0"),
    ("spec.terminationGracePeriodSeconds", "30", "spec.terminationGracePeriodSeconds: Invalid value: \"30\": must be an integer"),
    ("spec.activeDeadlineSeconds", 0, "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647"),
    ("spec.activeDeadlineSeconds", 2**40, "spec.activeDeadlineSeconds: Invalid value: 1099511627776: must be between 1"),
    ("spec.hostNetwork", "yes", "spec.hostNetwork: Invalid value: \"yes\": must be a boolean"),
    (f"{C0}.ports.0.containerPort", 0, "spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535"),
    (f"{C0}.ports.0.containerPort", 70000, "spec.containers[0].ports[0].containerPort: Invalid value: 70000"),
    (f"{C0}.ports.0.containerPort", DELETE, "spec.containers[0].ports[0].containerPort: Required value"),
    (f"{C0}.ports.0.containerPort", "80", "spec.containers[0].ports[0].containerPort: Invalid value: \"80\": must be an integer"),
    (f"{C0}.ports.0.protocol", "ICMP",
     'spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
    (f"{C0}.ports.0.name", "a-very-long-port-name", "spec.containers[0].ports[0].name: Invalid value: \"a-very-long-port-name\": must be no more than 15"),
    (f"{C0}.ports.0.name", "8080", "spec.containers[0].ports[0].name: Invalid value: \"8080\": must contain at least one letter"),
    (f"{C0}.ports.0.name", "we--b", "must not contain consecutive hyphens"),
    (f"{C0}.ports.0.name", "-web", "must not begin or end with a hyphen"),
    (f"{C0}.ports.0.name", "Web", "must contain only alpha-numeric characters"),
    (f"{C0}.volumeMounts.0.name", "nope", 'spec.containers[0].volumeMounts[0].name: Not found: "nope"'),
    (f"{C0}.volumeMounts.0.mountPath", "data", "spec.containers[0].volumeMounts[0].mountPath: Invalid value: \"data\": must be an absolute path"),
    (f"{C0}.volumeMounts.0.mountPath", "/a:b", "must not contain ':'"),
    (f"{C0}.volumeMounts.0.mountPath", DELETE, "spec.containers[0].volumeMounts[0].mountPath: Required value"),
    (f"{C0}.volumeMounts.0.subPath", "../../etc", "spec.containers[0].volumeMounts[0].subPath: Invalid value: \"../../etc\": must not contain '..'"),
    (f"{C0}.volumeMounts.0.subPath", "/abs", "must be a relative path"),
    ("spec.volumes.0", {"name": "data"}, None),  # defaulted to emptyDir: valid
    ("spec.volumes.0", {"name": "data", "emptyDir": {}, "hostPath": {"path": "/x"}},
     "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"),
    ("spec.volumes.0", {"name": "data", "hostPath": {"path": "relative"}},
     "spec.volumes[0].hostPath.path: Invalid value: \"relative\": must be an absolute path"),
    ("spec.volumes.0", {"name": "data", "hostPath": {"path": "/var/../etc"}}, "must not contain '..'"),
    ("spec.volumes.0", {"name": "data", "hostPath": {"path": "/x", "type": "Pipe"}}, 'spec.volumes[0].hostPath.type: Unsupported value: "Pipe"'),
    ("spec.volumes.0", {"name": "data", "configMap": {"name": "c", "defaultMode": 4096}}, "spec.volumes[0].configMap.defaultMode: Invalid value: 4096"),
    ("spec.volumes.0", {"name": "Data_1", "emptyDir": {}}, "spec.volumes[0].name: Invalid value: \"Data_1\""),
    ("spec.volumes.0", {"name": "data", "emptyDir": "big"}, "spec.volumes[0].emptyDir: Invalid value: \"big\": must be an object"),
    (f"{C0}.env", [{"name": "A=B", "value": "x"}],
     "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='"),
    (f"{C0}.env", [{"name": "ÄÖ", "value": "x"}], "a valid environment variable name"),
    (f"{C0}.env", [{"name": "1-weird.but ok", "value": "x"}], None),
    (f"{C0}.env", [{"value": "x"}], "spec.containers[0].env[0].name: Required value"),
    (f"{C0}.env", [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
     "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty"),
    (f"{C0}.env", [{"name": "A", "valueFrom": {}}], "must specify one of"),
    (f"{C0}.env", [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}],
     'spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "spec.containers"'),
    (f"{C0}.env", [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}}], None),
    (f"{C0}.env", "PATH=/bin", "spec.containers[0].env: Invalid value: \"PATH=/bin\": must be a list"),
    (f"{C0}.command", ["sh", 5], "spec.containers[0].command[1]: Invalid value: 5: must be a string"),
    (f"{C0}.resources", {"requests": {"cpu": "-1"}},
     "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"),
    (f"{C0}.resources", {"requests": {"memory": "lots"}}, "spec.containers[0].resources.requests[memory]: Invalid value: \"lots\": quantities must match"),
    (f"{C0}.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
     "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"),
    (f"{C0}.resources", {"limits": {"cpu": True}}, "spec.containers[0].resources.limits[cpu]: Invalid value: true"),
    (f"{C0}.resources", {"limits": "1"}, "spec.containers[0].resources.limits: Invalid value: \"1\": must be an object"),
    (f"{C0}.resources", {"limits": {"memory": "1e400"}}, "out of range"),
    (f"{C0}.livenessProbe", {"exec": {"command": ["true"]}, "successThreshold": 2},
     "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"),
    (f"{C0}.startupProbe", {"exec": {"command": ["true"]}, "successThreshold": 3}, "startupProbe.successThreshold: Invalid value: 3: must be 1"),
    (f"{C0}.readinessProbe", {"exec": {"command": ["true"]}, "successThreshold": 3}, None),
    (f"{C0}.livenessProbe", {"periodSeconds": 5}, "spec.containers[0].livenessProbe: Required value: must specify a handler type"),
    (f"{C0}.livenessProbe", {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}},
     "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"),
    (f"{C0}.livenessProbe", {"exec": {"command": ["true"]}, "periodSeconds": -5},
     "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -5: must be greater than or equal to 0"),
    (f"{C0}.livenessProbe", {"exec": {"command": ["true"]}, "failureThreshold": "3"}, "failureThreshold: Invalid value: \"3\": must be an integer"),
    (f"{C0}.livenessProbe", {"httpGet": {"port": 0}}, "spec.containers[0].livenessProbe.httpGet.port: Invalid value: 0"),
    (f"{C0}.livenessProbe", {"httpGet": {"port": "http"}}, None),
    (f"{C0}.livenessProbe", {"httpGet": {"port": "8080"}}, "httpGet.port: Invalid value: \"8080\": must contain at least one letter"),
    (f"{C0}.livenessProbe", {"httpGet": {"port": 80, "scheme": "FTP"}}, 'httpGet.scheme: Unsupported value: "FTP"'),
    (f"{C0}.livenessProbe", {"exec": {}}, "spec.containers[0].livenessProbe.exec.command: Required value"),
    (f"{C0}.livenessProbe", {"grpc": {"port": 99999}}, "livenessProbe.grpc.port: Invalid value: 99999"),
    (f"{C0}.readinessProbe", {"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 5}, "must not be set for readinessProbes"),
    (f"{C0}.livenessProbe", "yes", "spec.containers[0].livenessProbe: Invalid value: \"yes\": must be an object"),
    (f"{C0}.lifecycle", {"preStop": {}}, "spec.containers[0].lifecycle.preStop: Required value: must specify a handler type"),
    (f"{C0}.lifecycle", {"preStop": {"sleep": {"seconds": 1}}}, None),
    (f"{C0}.imagePullPolicy", "Sometimes", 'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"'),
]


@pytest.mark.parametrize(("path", "value", "expected"), CASES)
def test_field_errors(path: str, value: Any, expected: str | None) -> None:
    errs = errors_of(mutate(path, value))
    if expected is None:
        assert errs == []
    else:
        assert any(expected in e for e in errs), errs


def test_container_names_unique_across_all_kinds() -> None:
    pod = base()
    pod["spec"]["initContainers"] = [{"name": "app", "image": "x"}]
    pod["spec"]["ephemeralContainers"] = [{"name": "init", "image": "x"}, {"name": "init", "image": "x"}]
    errs = errors_of(pod)
    assert 'spec.initContainers[0].name: Duplicate value: "app"' in errs
    assert 'spec.ephemeralContainers[1].name: Duplicate value: "init"' in errs


def test_duplicate_port_names_volume_names_and_mount_paths() -> None:
    pod = base()
    c = pod["spec"]["containers"][0]
    c["ports"].append({"name": "http", "containerPort": 81})
    c["volumeMounts"].append({"name": "data", "mountPath": "/data"})
    pod["spec"]["volumes"].append({"name": "data", "emptyDir": {}})
    errs = errors_of(pod)
    assert 'spec.containers[0].ports[1].name: Duplicate value: "http"' in errs
    assert 'spec.volumes[1].name: Duplicate value: "data"' in errs
    assert 'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique' in errs


def test_container_restart_policy_rules() -> None:
    pod = base()
    pod["spec"]["initContainers"] = [
        {"name": "side", "image": "x", "restartPolicy": "Always", "readinessProbe": {"exec": {"command": ["a"]}}},
        {"name": "bad", "image": "x", "restartPolicy": "Never"},
        {"name": "plain", "image": "x", "livenessProbe": {"exec": {"command": ["a"]}}, "lifecycle": {}},
    ]
    errs = errors_of(pod)
    assert errs == [
        'spec.initContainers[1].restartPolicy: Unsupported value: "Never": supported values: "Always"',
        "spec.initContainers[2].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
        "spec.initContainers[2].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always",
    ]


def test_ephemeral_container_restrictions() -> None:
    pod = base()
    pod["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "x", "ports": [{"containerPort": 1}],
                                           "readinessProbe": {"exec": {"command": ["a"]}},
                                           "resources": {"limits": {"cpu": "1"}}}]
    errs = errors_of(pod)
    assert "spec.ephemeralContainers[0].ports: Forbidden: cannot be set on ephemeral containers" in errs
    assert "spec.ephemeralContainers[0].readinessProbe: Forbidden: may not be set for ephemeral containers" in errs
    assert "spec.ephemeralContainers[0].resources: Forbidden: cannot be set on ephemeral containers" in errs


HOSTILE: list[Any] = [
    None, "pod", 5, [], {"spec": None}, {"metadata": None, "spec": "x"}, {"metadata": [], "spec": []},
    {"metadata": {"name": {"x": 1}}, "spec": {"containers": {"a": 1}}},
    {"metadata": {"name": "p", "namespace": 7}, "spec": {"containers": [{"name": ["x"], "image": None,
        "ports": [None, {"containerPort": 1.5, "protocol": 6, "name": 9}], "env": [{"name": None, "valueFrom": []}],
        "resources": {"requests": {"cpu": None}}, "volumeMounts": "all", "livenessProbe": {"httpGet": {"port": [1]}},
        "lifecycle": "x"}], "volumes": [None, {"name": 1, "hostPath": {"path": 5}}], "initContainers": 5,
        "terminationGracePeriodSeconds": 1e999}},
    {"metadata": {"name": "p" * 100000}, "spec": {"containers": [{"name": "c", "image": "x" * 100000}]}},
]


@pytest.mark.parametrize("pod", HOSTILE)
def test_hostile_input_yields_errors_not_exceptions(pod: Any) -> None:
    errs = validate_pod(pod)
    assert errs and all(isinstance(e, FieldError) for e in errs)
    validate_pod(apply_defaults(pod) if isinstance(pod, dict) else pod)


def test_fixture_rich_pod_is_valid() -> None:
    path = FIXTURES / "pod-rich-create.json"
    pod = json.loads(path.read_text())["request"]["body"]
    assert validate_pod(apply_defaults(copy.deepcopy(pod))) == []

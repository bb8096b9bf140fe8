"""A corpus of invalid Pod manifests, each with the field path the API server's error names.

`invalid_pod_cases()` is what the adversarial-corpus integration test feeds to the real agent;
`invalid_pod_cases_with_reason()` adds the error type (FieldValueInvalid, ...) the unit tests check.
Three families: the findings of issue 11 (accepted before validation covered them), one wrong JSON
type (or out-of-range integer) for every field of the pod's main objects, generated from the
schema table, and the ValidatePodCreate rules one by one. Every case starts from `base_pod()`,
a valid pod that uses each of those objects.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from minikubelet.api.pod_types import TYPES

Pod = dict[str, Any]
Case = tuple[str, Pod, str, str]  # name, pod, expected field path, expected error type
INVALID, REQUIRED, UNSUPPORTED = "FieldValueInvalid", "FieldValueRequired", "FieldValueNotSupported"
TYPE, FORBIDDEN, DUPLICATE, NOT_FOUND = "FieldValueTypeInvalid", "FieldValueForbidden", "FieldValueDuplicate", "FieldValueNotFound"
TOO_LONG = "FieldValueTooLong"
IMAGE = "minikubelet.test/busybox:1.36"
C0 = "spec.containers[0]"


def base_pod() -> Pod:
    """A valid pod that holds one of each object the generated type cases reach into."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "adversarial", "namespace": "default", "labels": {"app": "adv"},
                     "annotations": {"example.com/note": "x"}},
        "spec": {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", "sleep 3600"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"}],
                "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}, "requests": {"cpu": "50m", "memory": "32Mi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "securityContext": {"runAsUser": 0, "capabilities": {"add": ["NET_ADMIN"]}},
                "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 10},
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
                "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
            }],
            "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Mi"}}],
            "securityContext": {"runAsUser": 0, "supplementalGroups": [1]},
            "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
            "tolerations": [{"key": "example.com/k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a.example"]}],
            "readinessGates": [{"conditionType": "example.com/ready"}],
        },
    }  # fmt: skip


# Where the generated type cases set a field: the path in base_pod() and the schema type there.
ANCHORS: list[tuple[tuple[str | int, ...], str]] = [
    (("metadata",), "ObjectMeta"),
    (("spec",), "PodSpec"),
    (("spec", "containers", 0), "Container"),
    (("spec", "containers", 0, "ports", 0), "ContainerPort"),
    (("spec", "containers", 0, "env", 0), "EnvVar"),
    (("spec", "containers", 0, "resources"), "ResourceRequirements"),
    (("spec", "containers", 0, "volumeMounts", 0), "VolumeMount"),
    (("spec", "containers", 0, "securityContext"), "SecurityContext"),
    (("spec", "containers", 0, "securityContext", "capabilities"), "Capabilities"),
    (("spec", "containers", 0, "livenessProbe"), "Probe"),
    (("spec", "containers", 0, "livenessProbe", "exec"), "ExecAction"),
    (("spec", "containers", 0, "readinessProbe", "httpGet"), "HTTPGetAction"),
    (("spec", "containers", 0, "lifecycle"), "Lifecycle"),
    (("spec", "containers", 0, "lifecycle", "preStop"), "LifecycleHandler"),
    (("spec", "containers", 0, "lifecycle", "preStop", "sleep"), "SleepAction"),
    (("spec", "volumes", 0), "Volume"),
    (("spec", "volumes", 0, "emptyDir"), "EmptyDirVolumeSource"),
    (("spec", "securityContext"), "PodSecurityContext"),
    (("spec", "dnsConfig"), "PodDNSConfig"),
    (("spec", "dnsConfig", "options", 0), "PodDNSConfigOption"),
    (("spec", "tolerations", 0), "Toleration"),
    (("spec", "hostAliases", 0), "HostAlias"),
    (("spec", "readinessGates", 0), "PodReadinessGate"),
]

# Per schema type: (label, wrong value, error type). Integers also get their range's first value
# outside it.
WRONG: dict[str, list[tuple[str, Any, str]]] = {
    "string": [("int", 5, TYPE), ("list", ["a"], TYPE)],
    "boolean": [("string", "yes", TYPE), ("int", 1, TYPE)],
    "int32": [("string", "1", TYPE), ("float", 1.5, TYPE), ("over", 2**31, TYPE), ("under", -(2**31) - 1, TYPE)],
    "int64": [("string", "1", TYPE), ("bool", True, TYPE), ("over", 2**63, TYPE), ("under", -(2**63) - 1, TYPE)],
    "number": [("string", "x", TYPE)],
    "IntOrString": [("bool", True, TYPE), ("list", [1], TYPE), ("over", 2**31, TYPE)],
    "Quantity": [("garbage", "lots", INVALID), ("bool", True, TYPE)],
    "date-time": [("garbage", "yesterday", INVALID), ("int", 5, TYPE)],
    "byte": [("int", 5, TYPE)],
    "list": [("string", "x", TYPE), ("object", {"a": 1}, TYPE)],
    "map": [("string", "x", TYPE), ("list", [], TYPE)],
    "object": [("string", "x", TYPE), ("list", [], TYPE)],
}


def _format(tokens: tuple[str | int, ...]) -> str:
    out = ""
    for tok in tokens:
        out += f"[{tok}]" if isinstance(tok, int) else (f".{tok}" if out else tok)
    return out


def set_path(pod: Pod, tokens: tuple[str | int, ...], value: Any) -> Pod:
    """A copy of `pod` with the value at `tokens` replaced (parents must exist)."""
    out = copy.deepcopy(pod)
    target: Any = out
    for tok in tokens[:-1]:
        target = target[tok]
    target[tokens[-1]] = value
    return out


def _wrong_for(spec: str) -> list[tuple[str, Any, str]]:
    if spec == "any":
        return []
    if spec.startswith("[]"):
        return WRONG["list"]
    if spec.startswith("{}"):
        inner = [(f"entry-{label}", {"k": value}, kind) for label, value, kind in _wrong_for(spec[2:])[:1]]
        return WRONG["map"] + inner
    return WRONG.get(spec, WRONG["object"] if spec in TYPES else [])


def type_cases() -> list[Case]:
    cases: list[Case] = []
    base = base_pod()
    for anchor, type_name in ANCHORS:
        for fname, spec in TYPES[type_name].items():
            tokens = (*anchor, fname)
            for label, value, kind in _wrong_for(spec):
                path = _format(tokens)
                if label.startswith("entry-"):
                    path += "[k]"
                cases.append((f"type:{path}={label}", set_path(base, tokens, value), path, kind))
    return cases


Mutation = Callable[[Pod], None]


def _rule(name: str, mutate: Mutation, path: str, kind: str) -> Case:
    pod = base_pod()
    mutate(pod)
    return (name, pod, path, kind)


def _c0(pod: Pod) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def _set(*tokens: str | int, value: Any) -> Mutation:
    def mutate(pod: Pod) -> None:
        target: Any = pod
        for tok in tokens[:-1]:
            target = target[tok]
        target[tokens[-1]] = value
    return mutate


def _delete(*tokens: str | int) -> Mutation:
    def mutate(pod: Pod) -> None:
        target: Any = pod
        for tok in tokens[:-1]:
            target = target[tok]
        del target[tokens[-1]]
    return mutate


def _both(*mutations: Mutation) -> Mutation:
    def mutate(pod: Pod) -> None:
        for m in mutations:
            m(pod)
    return mutate


def _md(key: str, value: Any) -> Mutation:
    return _set("metadata", key, value=value)


def _spec(key: str, value: Any) -> Mutation:
    return _set("spec", key, value=value)


def _ctr(key: str, value: Any) -> Mutation:
    return _set("spec", "containers", 0, key, value=value)


def finding_cases() -> list[Case]:
    """Issue 11: manifests that were accepted and whose containers ran."""
    return [
        _rule("finding:label-key", _md("labels", {"bad key!": "x"}), "metadata.labels", INVALID),
        _rule("finding:label-value", _md("labels", {"app": "bad value!"}), "metadata.labels", INVALID),
        _rule("finding:annotations-over-256KiB", _md("annotations", {"a": "x" * 262144}), "metadata.annotations", TOO_LONG),
        _rule("finding:dnsPolicy-None-without-dnsConfig", _both(_spec("dnsPolicy", "None"), _delete("spec", "dnsConfig")),
              "spec.dnsConfig", REQUIRED),
        _rule("finding:terminationGracePeriodSeconds-beyond-int64", _spec("terminationGracePeriodSeconds", 2**63),
              "spec.terminationGracePeriodSeconds", TYPE),
        _rule("finding:hostname", _spec("hostname", "Bad_Host"), "spec.hostname", INVALID),
        _rule("finding:subdomain", _spec("subdomain", "a.b"), "spec.subdomain", INVALID),
        _rule("finding:priority-string", _spec("priority", "1000"), "spec.priority", TYPE),
        _rule("finding:tolerations-string", _spec("tolerations", "all"), "spec.tolerations", TYPE),
        _rule("finding:securityContext-list", _ctr("securityContext", [{"runAsUser": 0}]), f"{C0}.securityContext", TYPE),
        _rule("finding:runAsUser-negative", _set("spec", "securityContext", "runAsUser", value=-1),
              "spec.securityContext.runAsUser", INVALID),
        _rule("finding:runAsUser-string", _set("spec", "containers", 0, "securityContext", "runAsUser", value="0"),
              f"{C0}.securityContext.runAsUser", TYPE),
        _rule("finding:stdin-yes", _ctr("stdin", "yes"), f"{C0}.stdin", TYPE),
        _rule("finding:tty-1", _ctr("tty", 1), f"{C0}.tty", TYPE),
        _rule("finding:privileged-string", _set("spec", "containers", 0, "securityContext", "privileged", value="true"),
              f"{C0}.securityContext.privileged", TYPE),
        _rule("finding:capabilities-add-string",
              _set("spec", "containers", 0, "securityContext", "capabilities", "add", value="NET_ADMIN"),
              f"{C0}.securityContext.capabilities.add", TYPE),
        _rule("finding:hostAliases-ip", _set("spec", "hostAliases", 0, "ip", value="999.0.0.1"), "spec.hostAliases[0].ip", INVALID),
        _rule("finding:dnsConfig-4-nameservers",
              _set("spec", "dnsConfig", "nameservers", value=["1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"]),
              "spec.dnsConfig.nameservers", INVALID),
        _rule("finding:readinessGates-conditionType", _set("spec", "readinessGates", 0, "conditionType", value="not ready!"),
              "spec.readinessGates[0].conditionType", INVALID),
        _rule("finding:unknown-resource-name", _set("spec", "containers", 0, "resources", "limits", "gpu", value="1"),
              f"{C0}.resources.limits[gpu]", INVALID),
        _rule("finding:mountPropagation-bogus", _set("spec", "containers", 0, "volumeMounts", 0, "mountPropagation", value="Sideways"),
              f"{C0}.volumeMounts[0].mountPropagation", UNSUPPORTED),
        _rule("finding:emptyDir-sizeLimit-garbage", _set("spec", "volumes", 0, "emptyDir", "sizeLimit", value="lots"),
              "spec.volumes[0].emptyDir.sizeLimit", INVALID),
        _rule("finding:emptyDir-sizeLimit-negative", _set("spec", "volumes", 0, "emptyDir", "sizeLimit", value="-1Gi"),
              "spec.volumes[0].emptyDir.sizeLimit", FORBIDDEN),
        _rule("finding:emptyDir-medium-number", _set("spec", "volumes", 0, "emptyDir", "medium", value=1),
              "spec.volumes[0].emptyDir.medium", TYPE),
        _rule("finding:uid-dotdot", _md("uid", ".."), "metadata.uid", INVALID),
        _rule("finding:uid-dot", _md("uid", "."), "metadata.uid", INVALID),
        _rule("finding:uid-slash", _md("uid", "../../etc"), "metadata.uid", INVALID),
    ]  # fmt: skip


def rule_cases() -> list[Case]:
    """ValidatePodCreate's rules, one violation each."""
    ctr = C0
    return [
        # metadata
        _rule("rule:name-invalid", _md("name", "Bad_Name"), "metadata.name", INVALID),
        _rule("rule:name-too-long", _md("name", "a" * 254), "metadata.name", INVALID),
        _rule("rule:name-empty", _md("name", ""), "metadata.name", REQUIRED),
        _rule("rule:namespace-invalid", _md("namespace", "Bad.NS"), "metadata.namespace", INVALID),
        _rule("rule:label-key-three-parts", _md("labels", {"a/b/c": "x"}), "metadata.labels", INVALID),
        _rule("rule:label-key-empty-prefix", _md("labels", {"/a": "x"}), "metadata.labels", INVALID),
        _rule("rule:label-key-bad-prefix", _md("labels", {"Example.COM/a": "x"}), "metadata.labels", INVALID),
        _rule("rule:label-key-name-too-long", _md("labels", {"a" * 64: "x"}), "metadata.labels", INVALID),
        _rule("rule:label-value-too-long", _md("labels", {"a": "x" * 64}), "metadata.labels", INVALID),
        _rule("rule:label-value-dash", _md("labels", {"a": "-x"}), "metadata.labels", INVALID),
        _rule("rule:annotation-key", _md("annotations", {"bad key!": "x"}), "metadata.annotations", INVALID),
        _rule("rule:annotations-total-size", _md("annotations", {f"k{i}": "x" * 70000 for i in range(4)}),
              "metadata.annotations", TOO_LONG),
        _rule("rule:uid-underscore", _md("uid", "a_b"), "metadata.uid", INVALID),
        _rule("rule:uid-space", _md("uid", "a b"), "metadata.uid", INVALID),
        _rule("rule:uid-too-long", _md("uid", "a" * 129), "metadata.uid", INVALID),
        _rule("rule:uid-leading-dash", _md("uid", "-a"), "metadata.uid", INVALID),
        _rule("rule:uid-newline", _md("uid", "a\nb"), "metadata.uid", INVALID),
        # pod spec
        _rule("rule:restartPolicy", _spec("restartPolicy", "Sometimes"), "spec.restartPolicy", UNSUPPORTED),
        _rule("rule:dnsPolicy", _spec("dnsPolicy", "Google"), "spec.dnsPolicy", UNSUPPORTED),
        _rule("rule:dnsPolicy-None-without-nameservers", _spec("dnsPolicy", "None"), "spec.dnsConfig.nameservers", REQUIRED),
        _rule("rule:nameserver-not-ip", _set("spec", "dnsConfig", "nameservers", value=["dns.example"]),
              "spec.dnsConfig.nameservers[0]", INVALID),
        _rule("rule:nameserver-zone", _set("spec", "dnsConfig", "nameservers", value=["fe80::1%eth0"]),
              "spec.dnsConfig.nameservers[0]", INVALID),
        _rule("rule:searches-33", _set("spec", "dnsConfig", "searches", value=[f"s{i}.example" for i in range(33)]),
              "spec.dnsConfig.searches", INVALID),
        _rule("rule:searches-too-long", _set("spec", "dnsConfig", "searches", value=["a" * 60 + f".s{i}" for i in range(32)]),
              "spec.dnsConfig.searches", INVALID),
        _rule("rule:search-invalid", _set("spec", "dnsConfig", "searches", value=["Bad!.example"]),
              "spec.dnsConfig.searches[0]", INVALID),
        _rule("rule:dns-option-without-name", _set("spec", "dnsConfig", "options", value=[{"value": "2"}]),
              "spec.dnsConfig.options[0]", REQUIRED),
        _rule("rule:hostAlias-ip-empty", _set("spec", "hostAliases", 0, "ip", value=""), "spec.hostAliases[0].ip", INVALID),
        _rule("rule:hostAlias-ip-short", _set("spec", "hostAliases", 0, "ip", value="10.0.1"), "spec.hostAliases[0].ip", INVALID),
        _rule("rule:hostAlias-hostname", _set("spec", "hostAliases", 0, "hostnames", value=["Bad_Host"]),
              "spec.hostAliases[0].hostnames[0]", INVALID),
        _rule("rule:hostname-too-long", _spec("hostname", "a" * 64), "spec.hostname", INVALID),
        _rule("rule:subdomain-invalid", _spec("subdomain", "Sub_Domain"), "spec.subdomain", INVALID),
        _rule("rule:readinessGate-empty", _set("spec", "readinessGates", 0, "conditionType", value=""),
              "spec.readinessGates[0].conditionType", INVALID),
        _rule("rule:toleration-key", _set("spec", "tolerations", 0, "key", value="bad key!"), "spec.tolerations[0].key", INVALID),
        _rule("rule:toleration-operator", _set("spec", "tolerations", 0, "operator", value="Maybe"),
              "spec.tolerations[0].operator", UNSUPPORTED),
        _rule("rule:toleration-operator-Lt", _set("spec", "tolerations", 0, "operator", value="Lt"),
              "spec.tolerations[0].operator", UNSUPPORTED),
        _rule("rule:toleration-effect", _set("spec", "tolerations", 0, "effect", value="Sometimes"),
              "spec.tolerations[0].effect", UNSUPPORTED),
        _rule("rule:toleration-seconds-without-NoExecute", _set("spec", "tolerations", 0, "tolerationSeconds", value=5),
              "spec.tolerations[0].effect", INVALID),
        _rule("rule:toleration-empty-key-Equal", _set("spec", "tolerations", 0, "key", value=""),
              "spec.tolerations[0].operator", INVALID),
        _rule("rule:toleration-Exists-with-value", _set("spec", "tolerations", 0, "operator", value="Exists"),
              "spec.tolerations[0].operator", INVALID),
        _rule("rule:toleration-value", _set("spec", "tolerations", 0, "value", value="bad value!"),
              "spec.tolerations[0].operator", INVALID),
        _rule("rule:activeDeadlineSeconds-0", _spec("activeDeadlineSeconds", 0), "spec.activeDeadlineSeconds", INVALID),
        _rule("rule:activeDeadlineSeconds-over-int32", _spec("activeDeadlineSeconds", 2**31), "spec.activeDeadlineSeconds", INVALID),
        _rule("rule:priorityClassName", _spec("priorityClassName", "Bad_Class"), "spec.priorityClassName", INVALID),
        _rule("rule:preemptionPolicy", _spec("preemptionPolicy", "Sometimes"), "spec.preemptionPolicy", UNSUPPORTED),
        _rule("rule:runAsUser-over-int32", _set("spec", "securityContext", "runAsUser", value=2**31),
              "spec.securityContext.runAsUser", INVALID),
        _rule("rule:runAsGroup-negative", _set("spec", "securityContext", "runAsGroup", value=-1),
              "spec.securityContext.runAsGroup", INVALID),
        _rule("rule:fsGroup-negative", _set("spec", "securityContext", "fsGroup", value=-5), "spec.securityContext.fsGroup", INVALID),
        _rule("rule:supplementalGroup-negative", _set("spec", "securityContext", "supplementalGroups", value=[-1]),
              "spec.securityContext.supplementalGroups[0]", INVALID),
        _rule("rule:shareProcessNamespace-with-hostPID",
              _both(_spec("hostPID", True), _set("spec", "securityContext", "shareProcessNamespace", value=True)),
              "spec.securityContext.shareProcessNamespace", INVALID),
        _rule("rule:nodeSelector-key", _spec("nodeSelector", {"bad key!": "x"}), "spec.nodeSelector", INVALID),
        _rule("rule:containers-empty", _spec("containers", []), "spec.containers", REQUIRED),
        # containers
        _rule("rule:container-name", _ctr("name", "App"), f"{ctr}.name", INVALID),
        _rule("rule:container-name-missing", _delete("spec", "containers", 0, "name"), f"{ctr}.name", REQUIRED),
        _rule("rule:container-name-duplicate",
              lambda p: p["spec"]["containers"].append({"name": "app", "image": IMAGE}), "spec.containers[1].name", DUPLICATE),
        _rule("rule:image-missing", _delete("spec", "containers", 0, "image"), f"{ctr}.image", REQUIRED),
        _rule("rule:image-whitespace", _ctr("image", f" {IMAGE}"), f"{ctr}.image", INVALID),
        _rule("rule:imagePullPolicy", _ctr("imagePullPolicy", "Sometimes"), f"{ctr}.imagePullPolicy", UNSUPPORTED),
        _rule("rule:terminationMessagePolicy", _ctr("terminationMessagePolicy", "Never"), f"{ctr}.terminationMessagePolicy", UNSUPPORTED),
        _rule("rule:container-restartPolicy", _ctr("restartPolicy", "Always"), f"{ctr}.restartPolicy", FORBIDDEN),
        _rule("rule:containerPort-0", _set("spec", "containers", 0, "ports", 0, "containerPort", value=0),
              f"{ctr}.ports[0].containerPort", INVALID),
        _rule("rule:containerPort-70000", _set("spec", "containers", 0, "ports", 0, "containerPort", value=70000),
              f"{ctr}.ports[0].containerPort", INVALID),
        _rule("rule:hostPort-70000", _set("spec", "containers", 0, "ports", 0, "hostPort", value=70000),
              f"{ctr}.ports[0].hostPort", INVALID),
        _rule("rule:protocol", _set("spec", "containers", 0, "ports", 0, "protocol", value="ICMP"),
              f"{ctr}.ports[0].protocol", UNSUPPORTED),
        _rule("rule:port-name-upper", _set("spec", "containers", 0, "ports", 0, "name", value="Web"), f"{ctr}.ports[0].name", INVALID),
        _rule("rule:port-name-digits", _set("spec", "containers", 0, "ports", 0, "name", value="8080"), f"{ctr}.ports[0].name", INVALID),
        _rule("rule:port-name-long", _set("spec", "containers", 0, "ports", 0, "name", value="a-very-long-port-name"),
              f"{ctr}.ports[0].name", INVALID),
        _rule("rule:env-name-equals", _set("spec", "containers", 0, "env", 0, "name", value="A=B"), f"{ctr}.env[0].name", INVALID),
        _rule("rule:env-name-empty", _set("spec", "containers", 0, "env", 0, "name", value=""), f"{ctr}.env[0].name", REQUIRED),
        _rule("rule:env-value-and-valueFrom",
              _set("spec", "containers", 0, "env", 0, "valueFrom", value={"fieldRef": {"fieldPath": "metadata.name"}}),
              f"{ctr}.env[0].valueFrom", INVALID),
        _rule("rule:env-fieldPath", _set("spec", "containers", 0, "env", value=[
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}]),
            f"{ctr}.env[0].valueFrom.fieldRef.fieldPath", UNSUPPORTED),
        _rule("rule:resource-extended-fraction", _set("spec", "containers", 0, "resources", "limits", "example.com/dev", value="1.5"),
              f"{ctr}.resources.limits[example.com/dev]", INVALID),
        _rule("rule:resource-bad-extended", _set("spec", "containers", 0, "resources", "limits", "requests.example.com/x", value="1"),
              f"{ctr}.resources.limits[requests.example.com/x]", INVALID),
        _rule("rule:resource-negative", _set("spec", "containers", 0, "resources", "requests", "cpu", value="-1"),
              f"{ctr}.resources.requests[cpu]", INVALID),
        _rule("rule:request-over-limit", _set("spec", "containers", 0, "resources", "requests", "cpu", value="2"),
              f"{ctr}.resources.requests", INVALID),
        _rule("rule:hugepages-request-not-limit", _both(
            _set("spec", "containers", 0, "resources", "limits", "hugepages-2Mi", value="4Mi"),
            _set("spec", "containers", 0, "resources", "requests", "hugepages-2Mi", value="2Mi")),
            f"{ctr}.resources.requests", INVALID),
        _rule("rule:mount-volume-missing", _set("spec", "containers", 0, "volumeMounts", 0, "name", value="nope"),
              f"{ctr}.volumeMounts[0].name", NOT_FOUND),
        _rule("rule:mountPath-relative", _set("spec", "containers", 0, "volumeMounts", 0, "mountPath", value="data"),
              f"{ctr}.volumeMounts[0].mountPath", INVALID),
        _rule("rule:subPath-dotdot", _set("spec", "containers", 0, "volumeMounts", 0, "subPath", value="../x"),
              f"{ctr}.volumeMounts[0].subPath", INVALID),
        _rule("rule:mountPropagation-Bidirectional-unprivileged",
              _set("spec", "containers", 0, "volumeMounts", 0, "mountPropagation", value="Bidirectional"),
              f"{ctr}.volumeMounts[0].mountPropagation", FORBIDDEN),
        _rule("rule:liveness-successThreshold", _set("spec", "containers", 0, "livenessProbe", "successThreshold", value=2),
              f"{ctr}.livenessProbe.successThreshold", INVALID),
        _rule("rule:probe-period-negative", _set("spec", "containers", 0, "livenessProbe", "periodSeconds", value=-1),
              f"{ctr}.livenessProbe.periodSeconds", INVALID),
        _rule("rule:probe-without-handler", _ctr("livenessProbe", {"periodSeconds": 5}), f"{ctr}.livenessProbe", REQUIRED),
        _rule("rule:probe-two-handlers", _set("spec", "containers", 0, "livenessProbe", "tcpSocket", value={"port": 80}),
              f"{ctr}.livenessProbe.tcpSocket", FORBIDDEN),
        _rule("rule:httpGet-port-0", _set("spec", "containers", 0, "readinessProbe", "httpGet", "port", value=0),
              f"{ctr}.readinessProbe.httpGet.port", INVALID),
        _rule("rule:httpGet-scheme", _set("spec", "containers", 0, "readinessProbe", "httpGet", "scheme", value="FTP"),
              f"{ctr}.readinessProbe.httpGet.scheme", UNSUPPORTED),
        _rule("rule:exec-command-empty", _set("spec", "containers", 0, "livenessProbe", "exec", "command", value=[]),
              f"{ctr}.livenessProbe.exec.command", REQUIRED),
        _rule("rule:grpc-port", _ctr("startupProbe", {"grpc": {"port": 99999}}), f"{ctr}.startupProbe.grpc.port", INVALID),
        _rule("rule:readiness-terminationGracePeriod",
              _set("spec", "containers", 0, "readinessProbe", "terminationGracePeriodSeconds", value=5),
              f"{ctr}.readinessProbe.terminationGracePeriodSeconds", INVALID),
        _rule("rule:stopSignal-without-os", _set("spec", "containers", 0, "lifecycle", "stopSignal", value="SIGTERM"),
              f"{ctr}.lifecycle.stopSignal", FORBIDDEN),
        _rule("rule:stopSignal-unknown", _both(_spec("os", {"name": "linux"}),
                                               _set("spec", "containers", 0, "lifecycle", "stopSignal", value="SIGNOPE")),
              f"{ctr}.lifecycle.stopSignal", UNSUPPORTED),
        _rule("rule:httpHeader-name", _set("spec", "containers", 0, "readinessProbe", "httpGet", "httpHeaders",
                                           value=[{"name": "Bad Header", "value": "x"}]),
              f"{ctr}.readinessProbe.httpGet.httpHeaders", INVALID),
        _rule("rule:preStop-without-handler", _set("spec", "containers", 0, "lifecycle", "preStop", value={}),
              f"{ctr}.lifecycle.preStop", REQUIRED),
        _rule("rule:init-readinessProbe", _spec("initContainers", [
            {"name": "init", "image": IMAGE, "readinessProbe": {"exec": {"command": ["true"]}}}]),
            "spec.initContainers[0].readinessProbe", FORBIDDEN),
        _rule("rule:init-restartPolicy", _spec("initContainers", [{"name": "init", "image": IMAGE, "restartPolicy": "Never"}]),
              "spec.initContainers[0].restartPolicy", UNSUPPORTED),
        _rule("rule:ephemeral-ports", _spec("ephemeralContainers", [
            {"name": "dbg", "image": IMAGE, "ports": [{"containerPort": 1}]}]), "spec.ephemeralContainers[0].ports", FORBIDDEN),
        # volumes
        _rule("rule:volume-name", _set("spec", "volumes", 0, "name", value="Bad_Vol"), "spec.volumes[0].name", INVALID),
        _rule("rule:volume-name-duplicate", lambda p: p["spec"]["volumes"].append({"name": "data", "emptyDir": {}}),
              "spec.volumes[1].name", DUPLICATE),
        _rule("rule:volume-two-sources", _set("spec", "volumes", 0, "hostPath", value={"path": "/tmp"}),
              "spec.volumes[0].hostPath", FORBIDDEN),
        _rule("rule:hostPath-relative", _set("spec", "volumes", 0, value={"name": "data", "hostPath": {"path": "tmp"}}),
              "spec.volumes[0].hostPath.path", INVALID),
        _rule("rule:hostPath-type", _set("spec", "volumes", 0, value={"name": "data", "hostPath": {"path": "/tmp", "type": "Pipe"}}),
              "spec.volumes[0].hostPath.type", UNSUPPORTED),
        _rule("rule:configMap-defaultMode", _set("spec", "volumes", 0, value={"name": "data", "configMap": {"name": "c", "defaultMode": 4096}}),
              "spec.volumes[0].configMap.defaultMode", INVALID),
    ]  # fmt: skip


def invalid_pod_cases_with_reason() -> list[Case]:
    return finding_cases() + type_cases() + rule_cases()


def invalid_pod_cases() -> list[tuple[str, Pod, str]]:
    """(name, pod, the field path the API server's error names) for every invalid manifest."""
    return [(name, pod, path) for name, pod, path, _ in invalid_pod_cases_with_reason()]

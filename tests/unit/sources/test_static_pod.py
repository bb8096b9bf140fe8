"""Static pod manifests: parsing, naming, UID, annotations, tolerations, validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from minikubelet.sources.static_pod import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    ManifestError,
    make_static_pod,
    parse_manifest,
    rfc3339_nano,
    should_read,
    static_pod_uid,
)

MANIFESTS = Path(__file__).parent / "manifests"


def load(name: str) -> dict[str, Any]:
    return parse_manifest((MANIFESTS / name).read_bytes(), name)


@pytest.mark.parametrize(
    ("name", "read"),
    [("web.yaml", True), (".web.yaml.swp", False), (".hidden", False), ("/etc/kubernetes/manifests/a.json", True),
     ("/etc/kubernetes/manifests/.tmp", False), ("dir.d/.x", False), ("noext", True)],
)
def test_should_read_ignores_dotfiles(name: str, read: bool) -> None:
    assert should_read(name) is read


def test_yaml_and_json_manifests_parse() -> None:
    assert load("nginx.yaml")["metadata"]["name"] == "web"
    assert load("busybox.json")["spec"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ((MANIFESTS / "multi-doc.yaml").read_bytes(), "holds 2 documents"),
        ((MANIFESTS / "deployment.yaml").read_bytes(), "kind: must be \"Pod\", got 'Deployment'"),
        (b'{"apiVersion": "v1", "kind": "PodList", "items": []}', "lists are not supported"),
        (b"apiVersion: v2\nkind: Pod\n", "apiVersion: must be \"v1\""),
        (b"", "the file is empty"),
        (b"# just a comment\n", "the file is empty"),
        (b"- a\n- b\n", "got a list"),
        (b"just a string", "got a string"),
        (b"kind: Pod\napiVersion: v1\nmetadata: {name: \xff\xfe}\n", "not valid UTF-8"),
        (b"kind: Pod\n  bad: indent: here\n", "not valid YAML or JSON"),
        (b"{\"kind\": \"Pod\",", "not valid YAML or JSON"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {creationTimestamp: 2024-01-01 00:00:00}\n", "no JSON form"),
        (b"apiVersion: v1\nkind: Pod\n1: x\n", "no JSON form"),
        (b"apiVersion: v1\nkind: Pod\nx: !!binary aGVsbG8=\n", "no JSON form"),
        (b"apiVersion: v1\nkind: Pod\nx: !!python/object:os.system {}\n", "not valid YAML"),
        (b"[" * 5000 + b"]" * 5000, "not valid YAML or JSON"),
    ],
)
def test_bad_manifests_raise_manifest_error_naming_the_file(data: bytes, needle: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data, "/etc/kubernetes/manifests/x.yaml")
    assert str(info.value).startswith("/etc/kubernetes/manifests/x.yaml: ")
    assert needle in str(info.value)


def test_huge_manifest_is_refused() -> None:
    with pytest.raises(ManifestError, match="larger than"):
        parse_manifest(b" " * (10 * 1024 * 1024 + 1), "big.yaml")


def test_make_static_pod_identity_and_annotations() -> None:
    pod = make_static_pod(load("nginx.yaml"), "Node-1", "/etc/kubernetes/manifests/nginx.yaml", seen=1_700_000_000.25)
    md = pod["metadata"]
    assert md["name"] == "web-node-1"
    assert md["namespace"] == "default"
    assert len(md["uid"]) == 32 and int(md["uid"], 16) >= 0
    assert md["annotations"][CONFIG_HASH_ANNOTATION] == md["uid"]
    assert md["annotations"][CONFIG_SOURCE_ANNOTATION] == "file"
    assert md["annotations"][CONFIG_SEEN_ANNOTATION] == "2023-11-14T22:13:20.25Z"
    assert md["labels"] == {"app": "web"}
    assert pod["spec"]["nodeName"] == "Node-1"
    assert pod["spec"]["tolerations"] == [{"operator": "Exists", "effect": "NoExecute"}]
    assert pod["status"] == {"phase": "Pending"}
    # defaults were applied
    c = pod["spec"]["containers"][0]
    assert c["imagePullPolicy"] == "IfNotPresent" and c["livenessProbe"]["httpGet"]["scheme"] == "HTTP"
    assert pod["spec"]["restartPolicy"] == "Always"


def test_uid_is_deterministic_and_changes_with_content_node_and_path() -> None:
    manifest = load("nginx.yaml")
    path = "/etc/kubernetes/manifests/nginx.yaml"
    uid = make_static_pod(manifest, "n1", path)["metadata"]["uid"]
    assert make_static_pod(load("nginx.yaml"), "n1", path)["metadata"]["uid"] == uid
    edited = load("nginx.yaml")
    edited["spec"]["containers"][0]["image"] = "nginx:1.26"
    assert make_static_pod(edited, "n1", path)["metadata"]["uid"] != uid
    assert make_static_pod(manifest, "n2", path)["metadata"]["uid"] != uid
    assert make_static_pod(manifest, "n1", path + ".bak")["metadata"]["uid"] != uid


def test_uid_ignores_key_order_and_explicit_defaults() -> None:
    a = parse_manifest(b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x:1"}]}}', "a")
    b = parse_manifest(b'{"spec":{"containers":[{"image":"x:1","name":"c","imagePullPolicy":"IfNotPresent"}],'
                       b'"restartPolicy":"Always"},"metadata":{"name":"p"},"kind":"Pod","apiVersion":"v1"}', "b")
    assert make_static_pod(a, "n", "/m/p")["metadata"]["uid"] == make_static_pod(b, "n", "/m/p")["metadata"]["uid"]


def test_uid_is_md5_of_documented_inputs() -> None:
    import hashlib

    from minikubelet.api.defaults import apply_defaults

    manifest = load("busybox.json")
    defaulted = apply_defaults(manifest)
    expected = hashlib.md5(
        json.dumps(defaulted, sort_keys=True, separators=(",", ":")).encode() + b"host:n1" + b"file:/m/b.json"
    ).hexdigest()
    assert static_pod_uid(defaulted, "n1", "/m/b.json") == expected
    assert make_static_pod(manifest, "n1", "/m/b.json")["metadata"]["uid"] == expected


def test_explicit_uid_and_namespace_are_kept() -> None:
    manifest = load("busybox.json")
    manifest["metadata"]["uid"] = "my-fixed-uid"
    pod = make_static_pod(manifest, "n1", "/m/b.json")
    assert pod["metadata"]["uid"] == "my-fixed-uid"
    assert pod["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == "my-fixed-uid"
    assert pod["metadata"]["namespace"] == "kube-system"


def test_input_manifest_is_not_mutated() -> None:
    manifest = load("nginx.yaml")
    before = json.dumps(manifest, sort_keys=True)
    make_static_pod(manifest, "n1", "/m/x")
    assert json.dumps(manifest, sort_keys=True) == before


def test_existing_tolerations_are_kept_and_matching_one_replaced() -> None:
    manifest = load("nginx.yaml")
    manifest["spec"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]
    pod = make_static_pod(manifest, "n1", "/m/x")
    assert pod["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute"},
    ]


def test_invalid_pod_lists_field_errors_with_file_name() -> None:
    with pytest.raises(ManifestError) as info:
        make_static_pod(load("invalid-pod.yaml"), "n1", "/m/invalid-pod.yaml")
    err = info.value
    assert err.filename == "/m/invalid-pod.yaml"
    paths = [e.path for e in err.errors]
    assert paths == ["metadata.name", "spec.containers[0].image", "spec.restartPolicy"]
    assert str(err).startswith("/m/invalid-pod.yaml: invalid pod: [metadata.name: Invalid value: \"Bad_Name-n1\"")


@pytest.mark.parametrize(
    "manifest",
    [
        {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "image": "x"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ""}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": "x", "spec": {}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": ["a"]}, "spec": {}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": "x"},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": [{"name": "h", "hostPath": {"path": "../../etc"}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/x", "subPath": "../.."}]}],
                  "volumes": [{"name": "v"}]}},
    ],
)
def test_broken_pods_raise_manifest_error(manifest: dict[str, Any]) -> None:
    with pytest.raises(ManifestError) as info:
        make_static_pod(manifest, "n1", "/m/x.yaml")
    assert str(info.value).startswith("/m/x.yaml: ")


def test_name_too_long_after_node_suffix_is_rejected() -> None:
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a" * 250},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}
    with pytest.raises(ManifestError, match="must be no more than 253 bytes"):
        make_static_pod(manifest, "node", "/m/x")


@pytest.mark.parametrize(("ts", "text"), [(0.0, "1970-01-01T00:00:00Z"), (1.5, "1970-01-01T00:00:01.5Z"),
                                         (1_700_000_000.123456, "2023-11-14T22:13:20.123456Z")])
def test_rfc3339_nano(ts: float, text: str) -> None:
    assert rfc3339_nano(ts) == text

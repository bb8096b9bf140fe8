"""Static pods from manifest files: parsing and the identity the kubelet's file source gives them.

Pure: no file system access; the source that watches the directory passes bytes and names in.
Upstream reference: pkg/kubelet/config/common.go (applyDefaults, generatePodName) and file.go.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from minikubelet.api.field import FieldError, format_errors
from minikubelet.base.bounded_reader import DEFAULT_BOUNDS, MAX_MANIFEST_BYTES, Bounds, YAMLLoadError, load_yaml

__all__ = ["MAX_MANIFEST_BYTES", "ManifestError", "make_static_pod", "parse_manifest", "should_read"]

CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash"
CONFIG_SEEN_ANNOTATION = "kubernetes.io/config.seen"
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FILE_SOURCE = "file"
HTTP_SOURCE = "http"


class ManifestError(ValueError):
    """A manifest file that does not hold exactly one valid Pod; the message names the file."""

    def __init__(self, filename: str, message: str, errors: list[FieldError] | None = None,
                 reason: str = "invalid") -> None:
        super().__init__(f"{filename}: {message}")
        self.filename = filename
        self.message = message
        self.errors = errors or []
        # the metric label: "invalid", or "too_complex" when a parsing bound refused the file
        self.reason = reason


def guarded_reply(build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The parser process's reply from `build()`, or its error shape {"error", "reason", "errors"}."""
    try:
        return build()
    except ManifestError as e:
        return {"error": e.message, "reason": e.reason, "errors": [[f.path, f.message, f.reason] for f in e.errors]}
    except MemoryError:
        return {"error": "parsing needs more memory than the parser may use", "reason": "too_complex", "errors": []}
    except RecursionError:
        return {"error": "nested too deeply to process", "reason": "too_complex", "errors": []}


def should_read(filename: str) -> bool:
    """Whether the file source reads this file: the kubelet ignores names starting with '.'."""
    return not os.path.basename(filename).startswith(".")


def parse_manifest(data: bytes, filename: str, bounds: Bounds = DEFAULT_BOUNDS) -> dict[str, Any]:
    """The single Pod object in a YAML or JSON manifest; raises ManifestError otherwise."""
    doc = load_manifest_document(data, filename, bounds)
    kind = doc.get("kind")
    if kind != "Pod":
        if kind == "PodList" or (isinstance(kind, str) and kind.endswith("List")):
            raise ManifestError(filename, f"kind: must be \"Pod\", got {_short(kind)} (lists are not supported)")
        raise ManifestError(filename, f"kind: must be \"Pod\", got {_short(kind)}")
    if doc.get("apiVersion") != "v1":
        raise ManifestError(filename, f"apiVersion: must be \"v1\", got {_short(doc.get('apiVersion'))}")
    return doc


def load_manifest_document(data: bytes, filename: str, bounds: Bounds = DEFAULT_BOUNDS) -> dict[str, Any]:
    """The single object in a YAML or JSON manifest, of any kind; raises ManifestError otherwise."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(filename, f"manifest is larger than {MAX_MANIFEST_BYTES} bytes", reason="too_large")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(filename, f"not valid UTF-8 (byte {exc.start})") from None
    try:
        docs = [d for d in load_yaml(text, bounds) if d is not None]
    except YAMLLoadError as exc:
        if exc.no_json_form:
            raise ManifestError(filename, f"holds YAML values with no JSON form: {exc}") from None
        raise ManifestError(filename, f"not valid YAML or JSON: {exc}",
                            reason="too_complex" if exc.bound else "invalid") from None
    if not docs:
        raise ManifestError(filename, "no Pod found: the file is empty")
    if len(docs) > 1:
        raise ManifestError(filename, f"holds {len(docs)} documents; a static pod manifest must hold exactly one Pod")
    doc = docs[0]
    if not isinstance(doc, dict):
        raise ManifestError(filename, f"must hold a Pod object, got a {_yaml_kind(doc)}")
    return doc


def _short(value: object, limit: int = 64) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _yaml_kind(value: object) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), type(value).__name__)


def canonical_json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def static_pod_uid(defaulted_pod: dict[str, Any], node_name: str, source_path: str, source: str = FILE_SOURCE) -> str:
    """md5 hex of canonical JSON(defaulted manifest) + "host:<node>" + "file:<path>" (a URL's pod: + "url:<url>").

    Upstream hashes the decoded, defaulted pod (hash.DeepHashObject) and then writes the same
    host/file strings; Go's object dump cannot be reproduced, so the canonical JSON stands in.
    """
    hasher = hashlib.md5(usedforsecurity=False)
    hasher.update(canonical_json(defaulted_pod))
    if source == FILE_SOURCE:
        hasher.update(f"host:{node_name}".encode())
        hasher.update(f"file:{source_path}".encode())
    else:
        hasher.update(f"url:{source_path}".encode())  # no node: upstream names only the URL
    return hasher.hexdigest()


def rfc3339_nano(ts: float) -> str:
    """Go's time.RFC3339Nano in local-independent UTC (trailing zeros dropped, like Go)."""
    dt = datetime.fromtimestamp(ts, tz=UTC)
    frac = f"{dt.microsecond:06d}000".rstrip("0")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


class StaticPod(dict[str, Any]):
    """The pod dict, with the API server's warnings about its manifest (unknown fields)."""

    warnings: list[str]


def make_static_pod(
    pod: dict[str, Any],
    node_name: str,
    source_path: str,
    seen: float | None = None,
    source: str = FILE_SOURCE,
) -> StaticPod:
    """The pod the kubelet runs for a manifest: defaulted, named for the node, with a stable UID.

    `seen` (epoch seconds) sets kubernetes.io/config.seen. `source` is FILE_SOURCE or HTTP_SOURCE
    (`source_path` is then the URL; upstream's applyDefaults then differs in the UID and adds no
    toleration). Raises ManifestError (naming the file and listing FieldErrors) when the result is
    not a valid pod. `.warnings` on the result name the manifest's unknown fields (the pod still
    runs, as the API server would accept it).
    """
    # Imported here: only the parser process builds pods, and the schema tables are heavy for the agent itself.
    from minikubelet.api.defaults import apply_defaults
    from minikubelet.api.schema import check_types
    from minikubelet.api.validation import validate_manifest, validate_pod

    types = check_types(pod)
    if types.errors:
        # The manifest as written, so that every error is listed before its types get in the way.
        errors = validate_manifest(pod).errors
        raise ManifestError(source_path, f"invalid pod: {format_errors(errors)}", errors)
    out = apply_defaults(copy.deepcopy(pod))
    metadata = out.get("metadata")
    if metadata is None:
        metadata = out["metadata"] = {}
    if not isinstance(metadata, dict):
        raise ManifestError(source_path, "metadata: must be an object")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(source_path, "invalid pod: [metadata.name: Required value: name or generateName is required]",
                            [FieldError("metadata.name", "Required value: name or generateName is required", "FieldValueRequired")])
    annotations = metadata.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        raise ManifestError(source_path, "metadata.annotations: must be an object")
    uid = metadata.get("uid")
    if not uid:
        # An explicit metadata.uid in the manifest is kept, as upstream does.
        uid = static_pod_uid(out, node_name, source_path, source)
        metadata["uid"] = uid
    metadata["name"] = f"{name}-{node_name.lower()}"
    if not metadata.get("namespace"):
        metadata["namespace"] = "default"
    annotations = metadata["annotations"] = dict(annotations or {})
    annotations[CONFIG_HASH_ANNOTATION] = str(uid)
    annotations[CONFIG_SOURCE_ANNOTATION] = source
    if seen is not None:
        annotations[CONFIG_SEEN_ANNOTATION] = rfc3339_nano(seen)
    spec = out.get("spec")
    if isinstance(spec, dict):
        spec["nodeName"] = node_name
        if source == FILE_SOURCE:
            _add_or_update_toleration(spec, {"operator": "Exists", "effect": "NoExecute"})
    status = out.get("status")
    out["status"] = {**status, "phase": "Pending"} if isinstance(status, dict) else {"phase": "Pending"}
    # The rules run on the pod as built, as the kubelet's file source does (the node suffix counts).
    errors = validate_pod(out)
    if errors:
        raise ManifestError(source_path, f"invalid pod: {format_errors(errors)}", errors)
    result = StaticPod(out)
    result.warnings = types.warnings
    return result


def _add_or_update_toleration(spec: dict[str, Any], toleration: dict[str, Any]) -> None:
    """Upstream helper.AddOrUpdateTolerationInPod: a matching toleration (same key, operator,
    value, effect) is replaced by this one; otherwise it is appended."""
    tolerations = spec.get("tolerations")
    result: list[Any] = []
    replaced = False
    for existing in tolerations if isinstance(tolerations, list) else []:
        if isinstance(existing, dict) and _matches(existing, toleration):
            if not replaced:
                result.append(dict(toleration))
            replaced = True
            continue
        result.append(existing)
    if not replaced:
        result.append(dict(toleration))
    spec["tolerations"] = result


def _matches(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all((a.get(k) or "") == (b.get(k) or "") for k in ("key", "operator", "value", "effect"))

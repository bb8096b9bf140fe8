"""What a manifest URL serves: one Pod or a PodList, made into the pods the kubelet runs for it.

Pure, and imported by the parser process (`manifest_worker`), so it stays free of I/O libraries.
Upstream reference: pkg/kubelet/config/http.go (extractFromURL) and common.go (tryDecodeSinglePod,
tryDecodePodList, applyDefaults with isFile=false).
"""

from __future__ import annotations

from typing import Any

from minikubelet.api.field import FieldError
from minikubelet.sources.static_pod import (
    HTTP_SOURCE,
    ManifestError,
    StaticPod,
    guarded_reply,
    load_manifest_document,
    make_static_pod,
)


def parse_url_manifest(data: bytes, url: str, node: str, seen: float | None) -> list[StaticPod]:
    """The pods of a Pod or PodList body; raises ManifestError.

    One invalid item rejects the whole list, as upstream's tryDecodePodList does (the source then keeps
    the pods it had).
    """
    doc = load_manifest_document(data, url)
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if api_version != "v1" or kind not in ("Pod", "PodList"):
        raise ManifestError(url, f"must hold a v1 Pod or PodList, got apiVersion {_short(api_version)}, "
                                 f"kind {_short(kind)}")
    if kind == "Pod":
        return [make_static_pod(doc, node, url, seen, source=HTTP_SOURCE)]
    items = doc.get("items") or []
    if not isinstance(items, list):
        raise ManifestError(url, "items: must be a list of Pods",
                            [FieldError("items", "must be a list of Pods")])
    pods: list[StaticPod] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ManifestError(url, f"items[{i}]: must be a Pod object",
                                [FieldError(f"items[{i}]", "must be a Pod object")])
        # A list's items are Pods whatever their own kind says (the Go types decide).
        pod = {**item, "apiVersion": "v1", "kind": "Pod"}
        try:
            pods.append(make_static_pod(pod, node, url, seen, source=HTTP_SOURCE))
        except ManifestError as e:
            errors = [FieldError(f"items[{i}].{f.path}", f.message, f.reason) for f in e.errors]
            raise ManifestError(url, f"items[{i}]: {e.message}", errors, e.reason) from None
    return pods


def build_url_pods(data: bytes, url: str, node: str, seen: float | None) -> dict[str, Any]:
    """The parser process's reply: {"pods", "warnings"}, or the error shape of build_static_pod."""
    def build() -> dict[str, Any]:
        pods = parse_url_manifest(data, url, node, seen)
        return {"pods": [dict(p) for p in pods], "warnings": [list(p.warnings) for p in pods]}

    return guarded_reply(build)


def pods_from_reply(reply: dict[str, Any]) -> list[StaticPod]:
    out: list[StaticPod] = []
    for raw, warnings in zip(reply["pods"], reply["warnings"], strict=True):
        pod = StaticPod(raw)
        pod.warnings = [str(w) for w in warnings]
        out.append(pod)
    return out


def _short(value: object, limit: int = 64) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"

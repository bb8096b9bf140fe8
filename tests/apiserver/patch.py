"""JSON merge patch (RFC 7386) and strategic merge patch, the latter driven by the OpenAPI schema's
x-kubernetes-patch-strategy / x-kubernetes-patch-merge-key, as apimachinery's strategicpatch does
with the Go struct tags the schema is generated from.
"""

from __future__ import annotations

from typing import Any

from tests.apiserver.openapi import Json, Schemas
from tests.apiserver.store import json_copy

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


class PatchError(ValueError):
    pass


def json_merge(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return json_copy(patch)
    out = json_copy(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = json_merge(out.get(key), value)
    return out


def strategic_merge(original: Json, patch: Json, schema: Json, schemas: Schemas) -> Json:
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object")
    return _merge_map(json_copy(original), patch, schemas.resolve(schema), schemas)


def _merge_map(original: Json, patch: Json, schema: Json, schemas: Schemas) -> Json:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: json_copy(v) for k, v in patch.items() if k != "$patch"}
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive!r} in map")
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith(_ORDER):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE):]
            if isinstance(original.get(field), list) and isinstance(value, list):
                original[field] = [v for v in original[field] if v not in value]
            continue
        if value is None:
            original.pop(key, None)
            continue
        sub = schemas.field(schema, key)
        current = original.get(key)
        merge_key = sub.get("x-kubernetes-patch-merge-key")
        if isinstance(value, dict) and value.get("$patch") == "delete":
            original.pop(key, None)
        elif isinstance(value, dict) and isinstance(current, dict) and sub.get("x-kubernetes-map-type") != "atomic":
            original[key] = _merge_map(current, value, sub, schemas)
        elif isinstance(value, dict):
            original[key] = _merge_map({}, value, sub, schemas)
        elif isinstance(value, list) and "merge" in str(sub.get("x-kubernetes-patch-strategy", "")).split(","):
            base = current if isinstance(current, list) else []
            merged = _merge_list(base, value, sub, schemas)
            order = patch.get(_ORDER + key)
            wanted = order if isinstance(order, list) else [v for v in value if not _is_delete(v)]
            original[key] = _normalize_order(merged, wanted, base, merge_key)
        else:
            original[key] = _strip(json_copy(value))
    if isinstance(retain, list):
        for key in list(original):
            if key not in retain:
                del original[key]
    return original


def _merge_list(original: list[Any], patch: list[Any], schema: Json, schemas: Schemas) -> list[Any]:
    merge_key = schema.get("x-kubernetes-patch-merge-key")
    if merge_key is None:  # a set of primitives: union, original order first
        return original + [v for v in patch if v not in original]
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_strip(json_copy(v)) for v in patch if not (isinstance(v, dict) and v.get("$patch"))]
    item_schema = schemas.items(schema)
    out = list(original)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {merge_key}")
        index = next((i for i, v in enumerate(out) if isinstance(v, dict) and v.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append(_merge_map({}, item, item_schema, schemas))
        else:
            out[index] = _merge_map(out[index], item, item_schema, schemas)
    return out


def _is_delete(v: Any) -> bool:
    return isinstance(v, dict) and v.get("$patch") == "delete"


def _normalize_order(merged: list[Any], patch_order: list[Any], server_order: list[Any], merge_key: object) -> list[Any]:
    """strategicpatch's normalizeElementOrder + mergeSortedSlice: the elements named by the patch
    (or its $setElementOrder) in that order, the server-only ones interleaved by their old position."""
    def key_of(v: Any) -> str:
        return repr(v.get(merge_key) if isinstance(v, dict) and isinstance(merge_key, str) else v)

    wanted = [key_of(v) for v in patch_order]
    server = [key_of(v) for v in server_order]
    left = sorted((v for v in merged if key_of(v) in wanted), key=lambda v: wanted.index(key_of(v)))
    right = sorted((v for v in merged if key_of(v) not in wanted),
                   key=lambda v: server.index(key_of(v)) if key_of(v) in server else len(server))
    out: list[Any] = []
    while left and right:
        li = server.index(key_of(left[0])) if key_of(left[0]) in server else -1
        ri = server.index(key_of(right[0])) if key_of(right[0]) in server else -1
        if li >= 0 and ri >= 0 and ri < li:
            out.append(right.pop(0))
        else:
            out.append(left.pop(0))
    return out + left + right


def _strip(value: Any) -> Any:
    """Drop null members of maps inside a replaced value: SMP treats null as 'absent' everywhere."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if v is not None and k != "$patch"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value

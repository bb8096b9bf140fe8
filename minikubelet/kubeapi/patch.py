"""Strategic merge patches from two versions of an object (apimachinery's CreateTwoWayMergePatch), for the
few fields a kubelet writes: lists with a merge key become per-element patches plus a
`$setElementOrder/<list>` directive, every other list is replaced whole, a removed key becomes null.

The merge keys are the OpenAPI's `x-kubernetes-patch-merge-key` of NodeStatus and PodStatus in v1.36.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

Json = dict[str, Any]

# dotted path of a list -> its merge key
NODE_MERGE_KEYS: Mapping[str, str] = {"status.conditions": "type", "status.addresses": "type"}
POD_MERGE_KEYS: Mapping[str, str] = {"status.conditions": "type", "status.podIPs": "ip"}


def two_way_merge_patch(original: Json, modified: Json, merge_keys: Mapping[str, str], path: str = "") -> Json:
    """The patch that turns `original` into `modified` ({} when they are equal)."""
    patch: Json = {}
    for key, new in modified.items():
        here = f"{path}.{key}" if path else key
        old = original.get(key)
        if key not in original:
            patch[key] = copy.deepcopy(new)
        elif isinstance(new, dict) and isinstance(old, dict):
            sub = two_way_merge_patch(old, new, merge_keys, here)
            if sub:
                patch[key] = sub
        elif isinstance(new, list) and isinstance(old, list) and here in merge_keys:
            items = _merge_list(old, new, merge_keys[here], merge_keys, here)
            if items is not None:
                patch[f"$setElementOrder/{key}"] = [{merge_keys[here]: e.get(merge_keys[here])} for e in new
                                                    if isinstance(e, dict)]
                patch[key] = items
        elif new != old:
            patch[key] = copy.deepcopy(new)
    for key in original:
        if key not in modified:
            patch[key] = None
    return patch


def _merge_list(old: list[Any], new: list[Any], key: str, merge_keys: Mapping[str, str], path: str) -> list[Any] | None:
    old_by_key = {e.get(key): e for e in old if isinstance(e, dict)}
    new_keys = {e.get(key) for e in new if isinstance(e, dict)}
    items: list[Any] = []
    for element in new:
        if not isinstance(element, dict):
            continue
        before = old_by_key.get(element.get(key))
        if before is None:
            items.append(copy.deepcopy(element))
            continue
        sub = two_way_merge_patch(before, element, merge_keys, path)
        if sub:
            items.append({key: element.get(key), **sub})
    for k, element in old_by_key.items():
        if k not in new_keys:
            items.append({key: element.get(key), "$patch": "delete"})
    if not items and [e.get(key) for e in old if isinstance(e, dict)] == [e.get(key) for e in new if isinstance(e, dict)]:
        return None
    return items


def node_status_patch(original: Json, modified: Json) -> Json:
    """What the kubelet's PatchNodeStatus sends: the spec is left alone, and changed addresses are replaced
    whole (their merge key `type` is not unique, so a merge would mix old and new)."""
    diff = copy.deepcopy(modified)
    diff["spec"] = copy.deepcopy(original.get("spec", {}))
    old_addresses = (original.get("status") or {}).get("addresses") or []
    new_addresses = (modified.get("status") or {}).get("addresses") or []
    replace_addresses = bool(old_addresses) and old_addresses != new_addresses
    if replace_addresses:
        diff.setdefault("status", {})["addresses"] = copy.deepcopy(old_addresses)
    patch = two_way_merge_patch(original, diff, NODE_MERGE_KEYS)
    if replace_addresses:
        patch.setdefault("status", {})["addresses"] = [*copy.deepcopy(new_addresses), {"$patch": "replace"}]
    return patch


def pod_status_patch(uid: str, original_status: Json, status: Json) -> Json:
    """A pod status patch as the status manager sends it: the uid as a precondition, the status diff."""
    diff = two_way_merge_patch({"status": original_status}, {"status": status}, POD_MERGE_KEYS)
    return {"metadata": {"uid": uid}, **diff}

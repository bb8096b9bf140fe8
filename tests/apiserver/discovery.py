"""Legacy (unaggregated) discovery: `/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`, enough for kubectl
to find the resources this server has and their kubelet-facing subresources (kubectl asks for aggregated
discovery first and takes a plain answer as the legacy form)."""

from __future__ import annotations

from typing import Any

from tests.apiserver.resources import BY_PATH, Resource

Json = dict[str, Any]
_VERBS_STORED = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SHORT = {"pods": ["po"], "nodes": ["no"], "configmaps": ["cm"], "events": ["ev"], "namespaces": ["ns"],
          "persistentvolumeclaims": ["pvc"], "persistentvolumes": ["pv"], "services": ["svc"],
          "serviceaccounts": ["sa"], "certificatesigningrequests": ["csr"]}
# (resource/subresource, kind, verbs) for the subresources kubectl reaches through the API server
_EXTRA: dict[tuple[str, str], list[tuple[str, str, list[str]]]] = {
    ("", "v1"): [("pods/log", "Pod", ["get"]), ("pods/exec", "PodExecOptions", ["create", "get"]),
                 ("pods/attach", "PodAttachOptions", ["create", "get"]),
                 ("pods/portforward", "PodPortForwardOptions", ["create", "get"]),
                 ("pods/ephemeralcontainers", "Pod", ["get", "patch", "update"]),
                 ("nodes/proxy", "NodeProxyOptions", ["create", "delete", "get", "patch", "update"])],
}


def _entry(res: Resource) -> Json:
    out: Json = {"name": res.plural, "singularName": res.kind.lower(), "namespaced": res.namespaced,
                 "kind": res.kind, "verbs": _VERBS_STORED if res.stored else ["create"]}
    if res.plural in _SHORT:
        out["shortNames"] = _SHORT[res.plural]
    return out


def _groups() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for group, version, _ in BY_PATH:
        if group and version not in groups.setdefault(group, []):
            groups[group].append(version)
    return groups


def document(path: str, server_address: str) -> Json | None:
    """The discovery document at `path`, or None when it is not one."""
    parts = [p for p in path.split("/") if p]
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in versions],
             "preferredVersion": {"groupVersion": f"{g}/{versions[0]}", "version": versions[0]}}
            for g, versions in sorted(_groups().items())]}
    if parts[:1] == ["api"] and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[:1] == ["apis"] and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    resources = [_entry(r) for (g, v, _), r in sorted(BY_PATH.items()) if (g, v) == (group, version)]
    if not resources:
        return None
    for res in [r for (g, v, _), r in BY_PATH.items() if (g, v) == (group, version)]:
        resources += [{"name": f"{res.plural}/{sub}", "singularName": "", "namespaced": res.namespaced,
                       "kind": res.kind, "verbs": ["get", "patch", "update"]}
                      for sub in sorted(res.subresources) if sub == "status"]
    resources += [{"name": name, "singularName": "", "namespaced": name.startswith("pods"), "kind": kind,
                   "verbs": verbs} for name, kind, verbs in _EXTRA.get((group, version), [])]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}".lstrip("/"),
            "resources": resources}

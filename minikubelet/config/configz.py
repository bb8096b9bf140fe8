"""The configuration as `/configz` serves it (upstream component-base/configz): `{"kubeletconfig": {...}}`,
the effective KubeletConfiguration in its v1beta1 wire form (durations as Go prints them, `kind` and
`apiVersion` first). Flag-only settings (kubeconfig, node IP, labels, verbosity) are not part of it, as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minikubelet.base.durations import go_duration
from minikubelet.config import kubelet_config as kc

Json = dict[str, Any]


def _wire(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _wire(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_wire(v) for v in value]
    return value


def served_config(cfg: kc.KubeletConfig) -> Json:
    out: Json = {"kind": kc.KIND, "apiVersion": kc.API_VERSION}
    for attr, name, is_duration in kc.file_fields():
        value = getattr(cfg, attr)
        if attr == "authentication":
            a = value
            out["authentication"] = {"x509": {"clientCAFile": a.client_ca_file} if a.client_ca_file else {},
                                     "webhook": {"enabled": a.webhook_enabled, "cacheTTL": go_duration(a.webhook_cache_ttl)},
                                     "anonymous": {"enabled": a.anonymous_enabled}}
        elif attr == "authorization_mode":
            out["authorization"] = {"mode": value, "webhook": {"cacheAuthorizedTTL": "5m0s",
                                                               "cacheUnauthorizedTTL": "30s"}}
        elif attr == "read_only_port":
            endpoint = kc.read_only_endpoint(cfg)
            if endpoint is not None:
                out[name] = endpoint[1]
        elif is_duration:
            out[name] = go_duration(float(value))
        elif attr == "shutdown_grace_period_by_pod_priority":
            if value:
                out[name] = [{"priority": p.priority, "shutdownGracePeriodSeconds": p.grace_seconds} for p in value]
        elif name in _NOT_UPSTREAM or (value in ("", (), {}) and name not in _KEEP_EMPTY):
            continue
        elif name in _OMIT_ZERO and not value:
            continue
        else:
            out[name] = _wire(value)
    return {"kubeletconfig": out}


# ours, not v1beta1's (upstream has flags for the first two)
_NOT_UPSTREAM = frozenset({"rootDir", "podInfraContainerImage", "legacyContainerLogsDir"})
# plain (not pointer) omitempty fields of v1beta1, and singleProcessOOMKill whose nil we model as false
_OMIT_ZERO = frozenset({"readOnlyPort", "port", "serverTLSBootstrap", "rotateCertificates", "singleProcessOOMKill",
                        "evictionMaxPodGracePeriod", "kernelMemcgNotification"})
# every other "" / [] / {} is omitempty in the v1beta1 type: absent when unset
_KEEP_EMPTY = frozenset({"staticPodPath", "podLogsDir"})

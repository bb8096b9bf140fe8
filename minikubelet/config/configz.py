"""The configuration as `/configz` serves it (upstream component-base/configz): `{"kubeletconfig": {...}}`,
the effective KubeletConfiguration in its v1beta1 wire form (durations as Go prints them, `kind` and
`apiVersion` first). Flag-only settings (kubeconfig, node IP, labels, verbosity) are not part of it, as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from minikubelet.base.durations import go_duration
from minikubelet.config import kubelet_config as kc

_DURATION_PARSERS = (kc._duration, kc._positive_duration, kc._cfs_period)
Json = dict[str, Any]


def _wire(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _wire(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_wire(v) for v in value]
    return value


def served_config(cfg: kc.KubeletConfig) -> Json:
    out: Json = {"kind": kc.KIND, "apiVersion": kc.API_VERSION}
    for f in kc._FIELDS:
        if f.yaml_name is None:
            continue
        value = getattr(cfg, f.attr)
        if f.attr == "authentication":
            a = value
            out["authentication"] = {"x509": {"clientCAFile": a.client_ca_file} if a.client_ca_file else {},
                                     "webhook": {"enabled": a.webhook_enabled, "cacheTTL": go_duration(a.webhook_cache_ttl)},
                                     "anonymous": {"enabled": a.anonymous_enabled}}
        elif f.attr == "authorization_mode":
            out["authorization"] = {"mode": value, "webhook": {"cacheAuthorizedTTL": "5m0s",
                                                               "cacheUnauthorizedTTL": "30s"}}
        elif f.parse in _DURATION_PARSERS:
            out[f.yaml_name] = go_duration(float(value))
        elif f.yaml_name in _NOT_UPSTREAM or (value in ("", (), {}) and f.attr in _OMIT_EMPTY):
            continue
        elif f.yaml_name in _OMIT_ZERO and not value:
            continue
        else:
            out[f.yaml_name] = _wire(value)
    return {"kubeletconfig": out}


# ours, not v1beta1's (upstream has flags for the first two)
_NOT_UPSTREAM = frozenset({"rootDir", "podInfraContainerImage", "legacyContainerLogsDir"})
# plain (not pointer) omitempty fields of v1beta1, and singleProcessOOMKill whose nil we model as false
_OMIT_ZERO = frozenset({"readOnlyPort", "port", "serverTLSBootstrap", "rotateCertificates", "singleProcessOOMKill"})
# omitempty in the v1beta1 type: absent rather than "" or [] when unset
_OMIT_EMPTY = frozenset(f.name for f in fields(kc.KubeletConfig)) - {"static_pod_path", "pod_logs_dir"}

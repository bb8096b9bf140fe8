"""The ConfigMaps and Secrets a pod uses, and the snapshot of them its env and volumes are built from.

`references` is upstream's VisitPodConfigmapNames / VisitPodSecretNames (every container kind, env, envFrom,
volumes, projected sources, imagePullSecrets). `PodObjects` holds what the agent read for one sync of the pod:
the objects, or why each could not be read, so that env and volume code stays pure.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

CONFIGMAP = "configmap"  # upstream's group-resource names in its messages (`configmap "x" not found`)
SECRET = "secret"


class ObjectUnavailable(Exception):
    """A ConfigMap/Secret could not be read; `not_found` lets `optional` references go on without it."""

    def __init__(self, message: str, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found


def not_found(kind: str, name: str) -> ObjectUnavailable:
    """Upstream apierrors.NewNotFound(Resource(kind), name)."""
    return ObjectUnavailable(f'{kind} "{name}" not found', not_found=True)


def _dicts(value: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (v for v in value if isinstance(v, dict))


def _name(ref: object, key: str = "name") -> str:
    name = ref.get(key) if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else ""


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from _dicts(spec.get(key))


def references(pod: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(ConfigMap names, Secret names) the pod references, in its own namespace."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return frozenset(), frozenset()
    cms: set[str] = set()
    secrets = {_name(s) for s in _dicts(spec.get("imagePullSecrets"))}
    for c in _containers(spec):
        for env in _dicts(c.get("env")):
            value_from = env.get("valueFrom")
            if isinstance(value_from, dict):
                cms.add(_name(value_from.get("configMapKeyRef")))
                secrets.add(_name(value_from.get("secretKeyRef")))
        for env_from in _dicts(c.get("envFrom")):
            cms.add(_name(env_from.get("configMapRef")))
            secrets.add(_name(env_from.get("secretRef")))
    for v in _dicts(spec.get("volumes")):
        cms.add(_name(v.get("configMap")))
        secrets.add(_name(v.get("secret"), "secretName"))
        projected = v.get("projected")
        for source in _dicts(projected.get("sources") if isinstance(projected, dict) else None):
            cms.add(_name(source.get("configMap")))
            secrets.add(_name(source.get("secret")))
    cms.discard("")
    secrets.discard("")
    return frozenset(cms), frozenset(secrets)


def configmap_data(cm: Mapping[str, Any]) -> dict[str, str]:
    data = cm.get("data")
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(data, dict) \
        else {}


def _decoded(obj: Mapping[str, Any], key: str, kind: str) -> dict[str, bytes]:
    data = obj.get(key)
    out: dict[str, bytes] = {}
    for k, v in data.items() if isinstance(data, dict) else ():
        if not isinstance(k, str) or not isinstance(v, str):
            continue
        try:
            out[k] = base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            name = _name(obj.get("metadata"))
            raise ObjectUnavailable(f'{kind} "{name}": {key}[{k}] is not valid base64') from None
    return out


def configmap_binary_data(cm: Mapping[str, Any]) -> dict[str, bytes]:
    return _decoded(cm, "binaryData", CONFIGMAP)


def secret_data(secret: Mapping[str, Any]) -> dict[str, bytes]:
    return _decoded(secret, "data", SECRET)


DEFAULT_TOKEN_SECONDS = 3600
STANDALONE_TOKEN = "failed to fetch token: cannot use TokenManager when kubelet is in standalone mode"


def token_key(source: Mapping[str, Any]) -> tuple[str, int]:
    """(audience, expirationSeconds) of a projected serviceAccountToken source: what its TokenRequest asks."""
    audience = source.get("audience")
    seconds = source.get("expirationSeconds")
    return (audience if isinstance(audience, str) else "",
            seconds if isinstance(seconds, int) and not isinstance(seconds, bool) else DEFAULT_TOKEN_SECONDS)


def token_sources(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every projected serviceAccountToken source of the pod."""
    spec = pod.get("spec")
    out: list[Mapping[str, Any]] = []
    for v in _dicts(spec.get("volumes") if isinstance(spec, dict) else None):
        projected = v.get("projected")
        for source in _dicts(projected.get("sources") if isinstance(projected, dict) else None):
            token = source.get("serviceAccountToken")
            if isinstance(token, dict):
                out.append(token)
    return out


@dataclass(frozen=True)
class PodObjects:
    """What one sync of a pod read: name -> object or the error reading it. A name absent from both maps was
    not read at all (a pod that does not come from the API server, or a node without one)."""

    namespace: str
    configmaps: Mapping[str, Mapping[str, Any] | ObjectUnavailable] = field(default_factory=dict)
    secrets: Mapping[str, Mapping[str, Any] | ObjectUnavailable] = field(default_factory=dict)
    # the Service env of the pod (None: the agent has no Service lister, as a kubelet without an API server)
    service_env: Mapping[str, str] | None = None
    service_env_error: str = ""
    # service account tokens by token_key (absent: the node has no API client)
    tokens: Mapping[tuple[str, int], str | ObjectUnavailable] = field(default_factory=dict)

    def token(self, source: Mapping[str, Any]) -> str:
        got = self.tokens.get(token_key(source))
        if got is None:
            raise ObjectUnavailable(STANDALONE_TOKEN)
        if isinstance(got, ObjectUnavailable):
            raise got
        return got

    def configmap(self, name: str) -> Mapping[str, Any]:
        return self._get(self.configmaps, name, "configMap")

    def secret(self, name: str) -> Mapping[str, Any]:
        return self._get(self.secrets, name, "secret")

    def _get(self, objects: Mapping[str, Mapping[str, Any] | ObjectUnavailable], name: str,
             what: str) -> Mapping[str, Any]:
        if name not in objects:
            # upstream's message when the kubelet has no API client
            raise ObjectUnavailable(f"couldn't get {what} {self.namespace}/{name}, no kubeClient defined")
        obj = objects[name]
        if isinstance(obj, ObjectUnavailable):
            raise obj
        return obj


def standalone(pod: Mapping[str, Any]) -> PodObjects:
    md = pod.get("metadata")
    ns = md.get("namespace") if isinstance(md, dict) else None
    return PodObjects(ns if isinstance(ns, str) else "")

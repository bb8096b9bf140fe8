"""projected volumes (upstream pkg/volume/projected): several sources in one directory, written by the atomic
writer into a memory-backed emptyDir. downwardAPI sources, and configMap, secret and serviceAccountToken sources
of pods from the API server; trust bundles and pod certificates are not served yet."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from minikubelet.api.pod_objects import ObjectUnavailable, PodObjects, standalone
from minikubelet.volumes import configmap, downward_api, secret
from minikubelet.volumes.atomic_writer import FileProjection

PLUGIN_DIR = "kubernetes.io~projected"
# they need the API server's trust bundles and certificate signers: not served yet
API_SOURCES = ("clusterTrustBundle", "podCertificate")
SERVED = ("downwardAPI", "configMap", "secret", "serviceAccountToken")
TOKEN_MODE_WITH_FS_GROUP = 0o600  # SetVolumeOwnership then adds group read


class ProjectedError(Exception):
    pass


def sources_of(source: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    sources = source.get("sources")
    return [s for s in sources if isinstance(s, dict)] if isinstance(sources, list) else []


def check_sources(source: Mapping[str, Any]) -> None:
    """Refuse, before anything is mounted, a projection the agent cannot serve."""
    for i, projection in enumerate(sources_of(source)):
        kinds = [k for k, v in projection.items() if v is not None]
        unserved = [k for k in kinds if k in API_SOURCES]
        if unserved:
            raise ProjectedError(f"sources[{i}]: projected {unserved[0]} sources are not supported yet; only "
                                 "downwardAPI, configMap, secret and serviceAccountToken sources can be served")
        if len(kinds) != 1 or kinds[0] not in SERVED:
            raise ProjectedError(f"sources[{i}]: projected source {', '.join(kinds) or '(none)'} is not supported")


def collect_data(source: Mapping[str, Any], pod: Mapping[str, Any], allocatable: Mapping[str, Fraction],
                 objects: PodObjects | None = None) -> dict[str, FileProjection]:
    """Every source's files with the projected volume's defaultMode; a later source wins a shared path; every
    failing source is reported (upstream's aggregate)."""
    check_sources(source)
    objs = objects if objects is not None else standalone(pod)
    default_mode = source.get("defaultMode")
    payload: dict[str, FileProjection] = {}
    errors: list[str] = []
    for projection in sources_of(source):
        try:
            if isinstance(projection.get("configMap"), dict):
                payload.update(configmap.collect_data(projection["configMap"], objs, default_mode))
            elif isinstance(projection.get("secret"), dict):
                payload.update(secret.collect_data(projection["secret"], objs, default_mode, name_key="name"))
            elif isinstance(projection.get("serviceAccountToken"), dict):
                token = projection["serviceAccountToken"]
                mode = TOKEN_MODE_WITH_FS_GROUP if _fs_group_set(pod) else default_mode
                if not isinstance(mode, int) or isinstance(mode, bool):
                    raise ProjectedError("no defaultMode used, not even the default value for it")
                payload[str(token.get("path", ""))] = FileProjection(objs.token(token).encode(), mode)
            else:
                payload.update(downward_api.collect_data(downward_api.items_of(projection["downwardAPI"]), pod,
                                                         default_mode, allocatable))
        except (downward_api.DownwardAPIError, configmap.ConfigMapVolumeError, ObjectUnavailable) as e:
            errors.append(str(e))
    if errors:
        raise ProjectedError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return payload


def _fs_group_set(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec")
    sc = spec.get("securityContext") if isinstance(spec, dict) else None
    return isinstance(sc, dict) and isinstance(sc.get("fsGroup"), int)

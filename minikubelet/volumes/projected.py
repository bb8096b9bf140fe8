"""projected volumes (upstream pkg/volume/projected): several sources in one directory, written by the atomic
writer into a memory-backed emptyDir. Only downwardAPI sources can be served without an API server."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from minikubelet.volumes import downward_api
from minikubelet.volumes.atomic_writer import FileProjection

PLUGIN_DIR = "kubernetes.io~projected"
# they need objects from the API server (or its token and certificate signers): they come with the cluster
API_SOURCES = ("secret", "configMap", "serviceAccountToken", "clusterTrustBundle", "podCertificate")


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
            raise ProjectedError(f"sources[{i}]: projected {unserved[0]} sources need the API server, which this "
                                 "node does not use yet; only downwardAPI sources can be served")
        if kinds != ["downwardAPI"]:
            raise ProjectedError(f"sources[{i}]: projected source {', '.join(kinds) or '(none)'} is not supported")


def collect_data(source: Mapping[str, Any], pod: Mapping[str, Any],
                 allocatable: Mapping[str, Fraction]) -> dict[str, FileProjection]:
    """Every source's files with the projected volume's defaultMode; a later source wins a shared path."""
    check_sources(source)
    default_mode = source.get("defaultMode")
    payload: dict[str, FileProjection] = {}
    errors: list[str] = []
    for projection in sources_of(source):
        try:
            payload.update(downward_api.collect_data(downward_api.items_of(projection["downwardAPI"]), pod,
                                                     default_mode, allocatable))
        except downward_api.DownwardAPIError as e:
            errors.append(str(e))
    if errors:
        raise ProjectedError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return payload

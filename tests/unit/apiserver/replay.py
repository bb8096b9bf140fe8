"""Replaying recorded exchanges (tests/fixtures/kubernetes/) against the test API server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.apiserver import Client, Reply

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes"
# Values that differ from run to run: ids, versions, server clocks, signatures, random name suffixes.
RUN_SPECIFIC = {"uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "managedFields",
                "expirationTimestamp", "token", "lastTransitionTime", "lastUpdateTime"}
_RANDOM_VOLUME = re.compile(r"^kube-api-access-[a-z0-9]{5}$")
Json = dict[str, Any]


def load(name: str) -> Any:
    """A recorded exchange (an object) or flow (a list of entries), as parsed JSON."""
    return json.loads((FIXTURES / name).read_text())


def substitute(value: Any, mapping: dict[str, str]) -> Any:
    """The recorded request with the recorded uids/resourceVersions replaced by this run's."""
    if isinstance(value, dict):
        return {k: substitute(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, mapping) for v in value]
    if isinstance(value, str):
        for old, new in mapping.items():
            value = value.replace(old, new)
    return value


def shape(value: Any) -> Any:
    """A body without its run-specific values; null members dropped (Go prints zero values we do not)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items() if v is not None and k not in RUN_SPECIFIC}
    if isinstance(value, list):
        return [shape(v) for v in value]
    if isinstance(value, str) and _RANDOM_VOLUME.match(value):
        return "kube-api-access-<random>"
    return value


async def send(client: Client, request: Json, mapping: dict[str, str] | None = None) -> Reply:
    body = substitute(request.get("body"), mapping or {})
    ctype = (request.get("headers") or {}).get("Content-Type", "application/json")
    path = substitute(request["path"], mapping or {})
    return await client.request(request["method"], path, body, content_type=ctype)

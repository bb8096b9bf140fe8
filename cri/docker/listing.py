"""The cheap container listing (`GET /containers/json?all=1`) behind the PLEG relist and the stats pass.

The PLEG relists every second, and with 100 pods the listing is ~200 objects (~310 KiB of JSON); decoding it was the
largest single cost of an idle agent. Between two listings of an idle node the body still changes: each object's
`Status` text ("Up 5 minutes") is rendered from the clock, and `Mounts` (and `Ports`) come out of a Go map in a
different order each time. A summary reads none of them (the state compared is `State`). So the body with those
taken out is kept and compared with the next one (a memcmp; taking them out costs ~1/8 of the decode), and an
unchanged body returns the summaries decoded last time. Any other change (a new or removed object, another `State`,
labels, network settings) decodes the body again, and so does a body whose arrays the patterns do not recognise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from cri.docker.naming import CONTAINER_TYPE_SANDBOX, LABEL_CONTAINER_TYPE
from cri.types import LABEL_POD_UID, ObjectSummary

# Go's encoder writes no spaces. A quote inside a value is escaped, so `[^"]*` ends a text at its closing quote (or
# at an escaped one: still the same bytes taken out of both bodies). A mount or port is a flat object; one holding
# a brace inside a string does not match, stays in, and at worst costs a decode.
_UNREAD = re.compile(rb'"Status":"[^"]*"|"(?:Mounts|Ports)":\[(?:\{[^{}]*\},?)*\]')


def summarize(listed: Iterable[dict[str, Any]]) -> list[ObjectSummary]:
    out = []
    for summary in listed:
        labels = {str(k): str(v) for k, v in (summary.get("Labels") or {}).items()}
        out.append(ObjectSummary(
            id=str(summary["Id"]),
            pod_uid=labels.get(LABEL_POD_UID, ""),
            state=str(summary.get("State", "")),
            is_sandbox=labels.get(LABEL_CONTAINER_TYPE) == CONTAINER_TYPE_SANDBOX,
            labels=labels,
        ))
    return out


def without_unread_fields(body: bytes) -> bytes:
    return _UNREAD.sub(b"", body)


class SummaryListing:
    """Summaries of listing bodies, decoded only when a body differs from the last one in what they read."""

    def __init__(self) -> None:
        self._last: bytes | None = None
        self._summaries: tuple[ObjectSummary, ...] = ()
        self.decodes = 0

    def summaries(self, body: bytes) -> list[ObjectSummary]:
        key = without_unread_fields(body)
        if key != self._last:
            listed = json.loads(body)
            if not isinstance(listed, list):
                raise ValueError(f"container listing is not a list: {type(listed).__name__}")
            self._summaries = tuple(summarize(listed))
            self._last = key
            self.decodes += 1
        return list(self._summaries)

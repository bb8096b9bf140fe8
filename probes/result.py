"""What one probe run tells: the outcome of a handler, and which kind of probe asked."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

# Upstream reads at most this much of an HTTP body or exec output into a probe's output.
MAX_OUTPUT_BYTES = 10 * 1024


class Result(enum.Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    # The diagnostic itself could not be run (bad port name, runtime error): take no action.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ProbeOutcome:
    result: Result
    output: str = ""
    # Success that upstream reports as probe.Warning (e.g. a redirect to another host).
    warning: bool = False


class ProbeKind(enum.Enum):
    STARTUP = "startup"
    LIVENESS = "liveness"
    READINESS = "readiness"

    @property
    def label(self) -> str:
        """Upstream's probeType.String(): used in events and the probe_type metric label."""
        return self.value.capitalize()

    @property
    def spec_field(self) -> str:
        return f"{self.value}Probe"


@dataclass(frozen=True)
class ProbeResults:
    """One pod's latest probe results, per kind: container id -> result.

    A container without an entry has no result yet (its worker has not published one)."""

    startup: Mapping[str, Result] = field(default_factory=dict)
    liveness: Mapping[str, Result] = field(default_factory=dict)
    readiness: Mapping[str, Result] = field(default_factory=dict)

    def of(self, kind: ProbeKind) -> Mapping[str, Result]:
        if kind is ProbeKind.STARTUP:
            return self.startup
        if kind is ProbeKind.LIVENESS:
            return self.liveness
        return self.readiness

    def get(self, kind: ProbeKind, container_id: str) -> Result | None:
        return self.of(kind).get(container_id)


def truncate_output(data: bytes) -> str:
    return data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")

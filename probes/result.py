"""What one probe run tells: the outcome of a handler, and which kind of probe asked."""

from __future__ import annotations

import enum
from dataclasses import dataclass

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


def truncate_output(data: bytes) -> str:
    return data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")

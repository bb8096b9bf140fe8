"""Container probes: exec, httpGet, tcpSocket and grpc handlers, one worker per probe, a manager."""

from probes.manager import ProbeFailure, ProbeManager
from probes.result import ProbeKind, ProbeOutcome, Result
from probes.results import CachedResult, ResultsCache

__all__ = ["CachedResult", "ProbeFailure", "ProbeKind", "ProbeManager", "ProbeOutcome", "Result", "ResultsCache"]

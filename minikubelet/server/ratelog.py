"""One log line per kind of event per interval, carrying the count of the ones it stood in for."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def __call__(self, kind: str, message: str, level: int = logging.WARNING,
                 exc_info: BaseException | None = None, **kv: Any) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return
        self._last[kind] = now
        suppressed = self._suppressed.pop(kind, 0)
        if suppressed:
            kv["suppressed"] = suppressed
        self._logger.log(level, message, exc_info=exc_info, extra={"kv": kv})

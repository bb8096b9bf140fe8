"""Structured logging: one line per event, `key=value` pairs, INFO by default; --v raises it."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [ts, record.levelname, record.name, repr(record.getMessage())]
        kv: Any = getattr(record, "kv", None)
        if isinstance(kv, dict):
            parts.extend(f"{k}={_quote(v)}" for k, v in kv.items())
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _quote(v: object) -> str:
    s = str(v)
    if not s or any(ch in s for ch in ' "=\n\t'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return s


def setup_logging(verbosity: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity >= 4 else logging.INFO)
    if verbosity < 6:
        for noisy in ("aiohttp.access", "asyncio", "watchfiles"):
            logging.getLogger(noisy).setLevel(logging.WARNING)

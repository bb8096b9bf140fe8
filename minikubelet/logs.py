"""Structured logging: one line per event, `key=value` pairs, INFO by default; --v raises it."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

# syslog priorities, which journald reads from a `<N>` line prefix (SyslogLevelPrefix=yes)
_SYSLOG_LEVEL = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}


def syslog_priority(levelno: int) -> int:
    return next((prio for level, prio in sorted(_SYSLOG_LEVEL.items(), reverse=True) if levelno >= level), 7)


def stderr_is_journal(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """systemd sets JOURNAL_STREAM=<dev>:<inode> of the stream it connected; a redirected stderr does not match."""
    raw = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    dev, _, ino = raw.partition(":")
    try:
        st = os.fstat(stream.fileno())
        return bool(raw) and st.st_dev == int(dev) and st.st_ino == int(ino)
    except (OSError, ValueError):
        return False


class KeyValueFormatter(logging.Formatter):
    def __init__(self, syslog_prefix: bool = False) -> None:
        super().__init__()
        self.syslog_prefix = syslog_prefix

    def format(self, record: logging.LogRecord) -> str:
        if self.syslog_prefix:
            # journald takes each line on its own: a traceback's lines carry the record's priority too
            prefix = f"<{syslog_priority(record.levelno)}>"
            return "\n".join(prefix + line for line in self._line(record).split("\n"))
        return self._line(record)

    def _line(self, record: logging.LogRecord) -> str:
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
    handler.setFormatter(KeyValueFormatter(syslog_prefix=stderr_is_journal(sys.stderr)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity >= 4 else logging.INFO)
    if verbosity < 6:
        for noisy in ("asyncio", "hpack", "h2"):  # DEBUG lines per frame and header from the CRI client's HTTP/2
            logging.getLogger(noisy).setLevel(logging.WARNING)

"""Log lines carry journald's `<N>` syslog priority when stderr is the journal stream systemd names."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from minikubelet.logs import KeyValueFormatter, stderr_is_journal, syslog_priority


def record(level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord("minikubelet.test", level, __file__, 1, msg, None, None)


def test_priorities() -> None:
    assert [syslog_priority(x) for x in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR,
                                         logging.CRITICAL, 5)] == [7, 6, 4, 3, 2, 7]


def test_prefix_on_every_line() -> None:
    plain = KeyValueFormatter().format(record(logging.WARNING, "disk is filling"))
    assert plain.split(" ", 1)[1].startswith("WARNING minikubelet.test 'disk is filling'")
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        rec = record(logging.ERROR, "failed")
        rec.exc_info = sys.exc_info()
    lines = KeyValueFormatter(syslog_prefix=True).format(rec).split("\n")
    assert len(lines) > 2 and all(line.startswith("<3>") for line in lines)
    assert lines[-1] == "<3>ValueError: boom"


def test_journal_stream_must_be_our_stderr(tmp_path: Path) -> None:
    with open(tmp_path / "stream", "w") as f, open(tmp_path / "other", "w") as g:
        st = os.fstat(f.fileno())
        assert stderr_is_journal(f, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not stderr_is_journal(g, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not stderr_is_journal(f, {})
        assert not stderr_is_journal(f, {"JOURNAL_STREAM": "garbage"})

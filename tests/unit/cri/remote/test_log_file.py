"""Reading the CRI log format a CRI runtime writes (cri.remote.log_file)."""

from __future__ import annotations

from pathlib import Path

from cri.remote.log_file import log_text, parse_record, read_log

LOG = (b"2016-10-06T00:17:09.669794202Z stdout F first\n"
       b"2016-10-06T00:17:09.669794203Z stderr P par\n"
       b"2016-10-06T00:17:09.669794204Z stderr F tial\n"
       b"garbage line\n"
       b"2016-10-06T00:17:10.000000000Z stdout F \n"
       b"2016-10-06T00:17:10.100000000Z stdout F last line\n")


def test_records() -> None:
    assert parse_record(b"2016-10-06T00:17:09.669794202Z stdout F a b c") == (b"a b c", True)
    assert parse_record(b"2016-10-06T00:17:09.669794202Z stderr P x") == (b"x", False)
    assert parse_record(b'{"log":"x\\n","stream":"stdout"}') is None


def test_text_joins_partials_and_tails_lines() -> None:
    assert log_text(LOG) == b"first\npartial\n\nlast line\n"
    assert log_text(LOG, tail=2) == b"\nlast line\n"
    assert log_text(LOG, tail=0) == b""
    assert log_text(b"2016-10-06T00:17:09.669794203Z stdout P unterminated") == b"unterminated"


def test_read_log(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(LOG)
    assert read_log(str(path), tail=1) == b"last line\n"
    assert read_log(str(tmp_path / "absent.log")) == b""
    assert read_log("") == b""
    # Past the limit the start is dropped at a record boundary.
    assert read_log(str(path), limit=60) == b"last line\n"

"""HTTP dates written and read as the stdlib's email.utils does (the reference here; the agent no longer imports
it), in the three forms Go's http.ParseTime accepts."""

from __future__ import annotations

import subprocess
import sys
from email.utils import formatdate, parsedate_to_datetime

import pytest

from minikubelet.base.http_date import format_http_date, parse_http_date


@pytest.mark.parametrize("ts", [0, 784111777, 951782400, 1700000000.9, 4102444799, 1234567890])
def test_written_as_email_utils_writes_it(ts: float) -> None:
    assert format_http_date(ts) == formatdate(int(ts), usegmt=True)


@pytest.mark.parametrize("text", [
    "Sun, 06 Nov 1994 08:49:37 GMT",  # IMF-fixdate
    "Sunday, 06-Nov-94 08:49:37 GMT",  # RFC 850
    "Sun Nov  6 08:49:37 1994",  # asctime
    "Tue, 29 Feb 2028 23:59:59 GMT",
    "Thu, 01 Jan 1970 00:00:00 GMT",
])
def test_read_as_email_utils_reads_it(text: str) -> None:
    assert parse_http_date(text) == int(parsedate_to_datetime(text).timestamp())


@pytest.mark.parametrize("text", ["", "yesterday", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
                                  "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 PST", "1994-11-06"])
def test_anything_else_is_none(text: str) -> None:
    assert parse_http_date(text) is None


def test_the_listener_and_node_logs_load_no_email_package() -> None:
    code = ("import sys, minikubelet.server.listener, minikubelet.server.node_logs; "
            "print(sorted(m for m in sys.modules if m == 'email' or m.startswith('email.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

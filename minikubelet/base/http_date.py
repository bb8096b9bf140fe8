"""HTTP dates (RFC 9110 section 5.6.7): written as IMF-fixdate, read in the three forms Go's http.ParseTime reads.

Here rather than with email.utils, whose import (the email package: +1.1 MiB) the agent has no other use for.
"""

from __future__ import annotations

import re
import time

from minikubelet.base.kubetime import timegm

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH = {name: i + 1 for i, name in enumerate(_MONTHS)}
_TIME = r"(\d\d):(\d\d):(\d\d)"
# IMF-fixdate, RFC 850 and asctime, as (pattern, day group, month group, year group, first time group)
_FORMATS = (
    (re.compile(rf"^[A-Z][a-z]{{2}}, (\d\d) ([A-Z][a-z]{{2}}) (\d{{4}}) {_TIME} GMT$"), 1, 2, 3, 4),
    (re.compile(rf"^[A-Z][a-z]+, (\d\d)-([A-Z][a-z]{{2}})-(\d\d) {_TIME} GMT$"), 1, 2, 3, 4),
    (re.compile(rf"^[A-Z][a-z]{{2}} ([A-Z][a-z]{{2}}) ([ \d]\d) {_TIME} (\d{{4}})$"), 2, 1, 6, 3),
)


def format_http_date(timestamp: float) -> str:
    """`Sun, 06 Nov 1994 08:49:37 GMT` for a Unix time (fractions dropped)."""
    t = time.gmtime(int(timestamp))
    return (f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


def parse_http_date(text: str) -> int | None:
    """The Unix time of an HTTP date in any of its three forms, or None when it is none of them."""
    text = text.strip()
    for pattern, day, month, year, clock in _FORMATS:
        m = pattern.match(text)
        if m is None or m.group(month) not in _MONTH:
            continue
        y = int(m.group(year))
        if y < 100:  # RFC 850's two-digit year, read as Go does: 69-99 are 19xx
            y += 1900 if y >= 69 else 2000
        fields = (y, _MONTH[m.group(month)], int(m.group(day)), int(m.group(clock)), int(m.group(clock + 1)),
                  int(m.group(clock + 2)))
        if not (1 <= fields[2] <= 31 and fields[3] < 24 and fields[4] < 60 and fields[5] < 61):
            return None
        return timegm(*fields)
    return None

"""The few fields of an X.509 certificate the running agent reads (validity, the subject's CN and O), decoded
from DER with the standard library.

Why not `cryptography`: importing it maps its Rust extension and ~60 modules, ~10 MiB resident for the life of
the process (docs/performance.md, "issue 31: memory"); the agent only creates keys, CSRs and self-signed
certificates when it has none, and does that in a child process (minikubelet/node/keygen.py)."""

from __future__ import annotations

import datetime
import re
import ssl

COMMON_NAME = "2.5.4.3"
ORGANIZATION_NAME = "2.5.4.10"

_SEQUENCE, _SET, _OID, _UTC_TIME, _GENERALIZED_TIME = 0x30, 0x31, 0x06, 0x17, 0x18
_VERSION = 0xA0
_STRINGS = {0x0C: "utf-8", 0x13: "ascii", 0x16: "ascii", 0x14: "latin-1", 0x1E: "utf-16-be", 0x1C: "utf-32-be"}
_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.*?-----END CERTIFICATE-----", re.S)


def _tlv(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the element at `pos`; ValueError when truncated."""
    if pos + 2 > len(der):
        raise ValueError("truncated DER")
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4 or pos + n > len(der):
            raise ValueError("bad DER length")
        length = int.from_bytes(der[pos:pos + n], "big")
        pos += n
    if pos + length > len(der):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    while start < end:
        tag, s, e = _tlv(der, start)
        out.append((tag, s, e))
        start = e
    return out


def _tbs(der: bytes) -> list[tuple[int, int, int]]:
    tag, s, e = _tlv(der, 0)
    if tag != _SEQUENCE:
        raise ValueError("not a certificate")
    tag, s, e = _tlv(der, s)
    if tag != _SEQUENCE:
        raise ValueError("not a certificate")
    fields = _children(der, s, e)
    if fields and fields[0][0] == _VERSION:
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject, ...
    if len(fields) < 5:
        raise ValueError("truncated certificate")
    return fields


def _oid(raw: bytes) -> str:
    if not raw:
        raise ValueError("empty OID")
    parts, value = [], 0
    for b in raw:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    first = min(parts[0] // 40, 2)
    return ".".join(str(p) for p in (first, parts[0] - 40 * first, *parts[1:]))


def _time(der: bytes, tlv: tuple[int, int, int]) -> float:
    tag, s, e = tlv
    text = der[s:e].decode("ascii")
    if tag == _UTC_TIME:
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != _GENERALIZED_TIME:
        raise ValueError("bad time")
    if not text.endswith("Z") or len(text) != 15:
        raise ValueError("bad time")
    when = datetime.datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=datetime.UTC)
    return when.timestamp()


def validity(der: bytes) -> tuple[float, float]:
    """notBefore and notAfter as POSIX seconds."""
    tag, s, e = _tbs(der)[3]
    times = _children(der, s, e)
    if tag != _SEQUENCE or len(times) != 2:
        raise ValueError("bad validity")
    return _time(der, times[0]), _time(der, times[1])


def subject(der: bytes) -> list[tuple[str, str]]:
    """The subject's attributes in order, as (dotted OID, text value)."""
    tag, s, e = _tbs(der)[4]
    if tag != _SEQUENCE:
        raise ValueError("bad subject")
    out = []
    for rdn_tag, rs, re_ in _children(der, s, e):
        if rdn_tag != _SET:
            raise ValueError("bad subject")
        for atv_tag, a_s, a_e in _children(der, rs, re_):
            parts = _children(der, a_s, a_e)
            if atv_tag != _SEQUENCE or len(parts) != 2 or parts[0][0] != _OID:
                raise ValueError("bad subject")
            codec = _STRINGS.get(parts[1][0])
            if codec is None:
                continue
            out.append((_oid(der[parts[0][1]:parts[0][2]]), der[parts[1][1]:parts[1][2]].decode(codec)))
    return out


def first_pem_certificate(data: bytes) -> bytes:
    """The DER of the first PEM certificate in `data`; ValueError when there is none."""
    m = _PEM_CERT.search(data)
    if m is None:
        raise ValueError("no PEM certificate")
    return ssl.PEM_cert_to_DER_cert(m.group().decode("ascii"))

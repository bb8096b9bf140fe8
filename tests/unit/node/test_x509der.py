"""The stdlib DER reader against `cryptography` on the certificates it builds: validity and subject."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from minikubelet.node import x509der
from minikubelet.node.certificates import CertificateError, parse_pair


def _cert(name: x509.Name, not_before: datetime.datetime, not_after: datetime.datetime) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
            .sign(key, hashes.SHA256()))


def test_subject_and_validity_match_cryptography() -> None:
    name = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "grüppe"),
        x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),  # a PrintableString
        x509.NameAttribute(NameOID.COMMON_NAME, "system:node:nöde-1"),
    ])
    # before 2050: UTCTime; from 2050: GeneralizedTime
    cert = _cert(name, datetime.datetime(1999, 12, 31, 23, 59, 58, tzinfo=datetime.UTC),
                 datetime.datetime(2051, 1, 2, 3, 4, 5, tzinfo=datetime.UTC))
    der = cert.public_bytes(serialization.Encoding.DER)
    assert x509der.validity(der) == (cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp())
    assert x509der.subject(der) == [(a.oid.dotted_string, str(a.value)) for a in cert.subject]
    assert [v for o, v in x509der.subject(der) if o == x509der.COMMON_NAME] == ["system:node:nöde-1"]


def test_parse_pair_keeps_the_certificate_as_cryptography_encodes_it() -> None:
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    cert = _cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "n")]), now, now + datetime.timedelta(days=1))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    key = b"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"
    pair = parse_pair(b"junk before\n" + pem.replace(b"\n", b"\r\n", 1) + key)
    assert pair.cert_pem == pem
    assert (pair.not_before, pair.not_after) == (now.timestamp(), (now + datetime.timedelta(days=1)).timestamp())
    assert pair.key_pem == key


@pytest.mark.parametrize("der", [b"", b"\x30", b"\x30\x03\x30\x01", b"\x04\x02ab", b"\x30\x84\xff\xff\xff\xff"])
def test_malformed_der_is_a_value_error(der: bytes) -> None:
    with pytest.raises(ValueError):
        x509der.validity(der)
    with pytest.raises(ValueError):
        x509der.subject(der)


def test_no_pem_certificate_is_a_certificate_error() -> None:
    with pytest.raises(CertificateError):
        parse_pair(b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\n")
    with pytest.raises(CertificateError):
        parse_pair(b"nothing here")

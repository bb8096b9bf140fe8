from __future__ import annotations

import hashlib
import subprocess

import pytest
from cryptography import x509

from minikubelet.install.ca_pin import PinError, check_any, parse_pins, spki_hash
from tests.apiserver.pki import CertificateAuthority


def test_spki_hash_is_what_openssl_prints() -> None:
    ca = CertificateAuthority()
    pubkey = subprocess.run(["openssl", "x509", "-pubkey", "-noout"], input=ca.cert_pem, capture_output=True,
                            check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pubkey, capture_output=True,
                         check=True).stdout
    assert spki_hash(x509.load_pem_x509_certificate(ca.cert_pem)) == "sha256:" + hashlib.sha256(der).hexdigest()


def test_check_any_accepts_the_pinned_ca_only() -> None:
    ca, other = CertificateAuthority(), CertificateAuthority()
    pin = spki_hash(x509.load_pem_x509_certificate(ca.cert_pem))
    check_any(ca.cert_pem, parse_pins([pin.upper().replace("SHA256", "sha256")]))
    check_any(other.cert_pem + ca.cert_pem, parse_pins([pin]))
    with pytest.raises(PinError, match=r"none of the public keys .* are pinned"):
        check_any(other.cert_pem, parse_pins([pin]))
    with pytest.raises(PinError, match="failed to parse cluster CA"):
        check_any(b"not a certificate", parse_pins([pin]))


@pytest.mark.parametrize(("value", "message"), [
    ("0123", 'expected "format:hex-value"'),
    ("md5:0123", 'unknown hash format "md5"'),
    ("sha256:zz", "invalid hash"),
    ("sha256:0123", "expected a 32 byte SHA-256 hash, found 2 bytes"),
])
def test_bad_pins_are_named(value: str, message: str) -> None:
    with pytest.raises(PinError, match=message):
        parse_pins([value])

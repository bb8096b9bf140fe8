"""`--discovery-token-ca-cert-hash sha256:<hex>`: a CA pinned by the SHA-256 of its SubjectPublicKeyInfo (DER),
the value `openssl x509 -pubkey | openssl pkey -pubin -outform der | sha256sum` prints, as kubeadm's pubkeypin."""

from __future__ import annotations

import hashlib

from cryptography import x509
from cryptography.hazmat.primitives import serialization


class PinError(ValueError):
    pass


def parse_pins(values: list[str]) -> set[str]:
    out: set[str] = set()
    for value in values:
        fmt, sep, digest = value.partition(":")
        if not sep:
            raise PinError(f'invalid hash "{value}", expected "format:hex-value". Known format(s) are: sha256')
        if fmt != "sha256":
            raise PinError(f'unknown hash format "{fmt}". Known format(s) are: sha256')
        try:
            raw = bytes.fromhex(digest)
        except ValueError as e:
            raise PinError(f'invalid hash "{value}", {e}') from None
        if len(raw) != hashlib.sha256().digest_size:
            raise PinError(f"expected a 32 byte SHA-256 hash, found {len(raw)} bytes")
        out.add(digest.lower())
    return out


def spki_hash(cert: x509.Certificate) -> str:
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def check_any(ca_pem: bytes, pins: set[str]) -> None:
    """Raises PinError unless one of the certificates in `ca_pem` has a pinned public key."""
    try:
        certs = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as e:
        raise PinError(f"failed to parse cluster CA from the cluster-info ConfigMap: {e}") from None
    hashes = [spki_hash(c) for c in certs]
    if not any(h.removeprefix("sha256:") in pins for h in hashes):
        raise PinError(f'cluster CA found in cluster-info ConfigMap is invalid: none of the public keys '
                       f'"{":".join(hashes)}" are pinned')

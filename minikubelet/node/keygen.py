"""Keys, CSRs and self-signed certificates, made by `cryptography` in a child process.

The agent needs them only when it has no certificate (first start, TLS bootstrap, rotation); importing
`cryptography` in the agent would keep its Rust extension and ~60 modules resident, ~10 MiB, for the life of the
process (docs/performance.md, "issue 31: memory"). The child is this module run with the agent's interpreter:
`python -m minikubelet.node.keygen OP` with the JSON arguments on stdin and the PEM on stdout."""

from __future__ import annotations

import datetime
import ipaddress
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

# (kind, value): ("DNS", name) or ("IP", address), the subjectAltNames of a CSR
San = tuple[str, str]


# upstream's self-signed kubelet.crt lives a year
SELF_SIGNED_VALIDITY = datetime.timedelta(days=365)


class KeygenError(ValueError):
    pass


def _child(op: str, **args: Any) -> bytes:
    try:
        done = subprocess.run([sys.executable, "-m", "minikubelet.node.keygen", op], input=json.dumps(args).encode(),
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise KeygenError(f"{op}: {e}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise KeygenError(f"{op}: {lines[-1] if lines else f'exit status {done.returncode}'}")
    return done.stdout


def new_key_pem() -> bytes:
    """A P-256 private key, PEM (`EC PRIVATE KEY`)."""
    return _child("key")


def csr_pem(node_name: str, key_pem: bytes, sans: list[San]) -> bytes:
    """The node's CSR (`O=system:nodes, CN=system:node:<node>`) signed by `key_pem`, with `sans` if any."""
    return _child("csr", node=node_name, key=key_pem.decode(), sans=sans)


def write_self_signed(cert_path: str, key_path: str, host: str, ips: list[str]) -> None:
    """A self-signed serving certificate for `host`, localhost and `ips`, written to the two paths."""
    _child("self-signed", cert=cert_path, key=key_path, host=host, ips=ips)


def _key() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())


def _general_names(sans: list[San]) -> list[Any]:
    from cryptography import x509

    return [x509.DNSName(v) if k == "DNS" else x509.IPAddress(ipaddress.ip_address(v)) for k, v in sans]


def _csr(node: str, key: str, sans: list[San]) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = serialization.load_pem_private_key(key.encode(), None)
    if not isinstance(private, ec.EllipticCurvePrivateKey):
        raise KeygenError("the private key is not an ECDSA key")
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                         x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}")])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(_general_names(sans)), critical=False)
    return builder.sign(private, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _self_signed(cert: str, key: str, host: str, ips: list[str]) -> bytes:
    import os

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(now.timestamp())}")])
    sans: list[San] = [("DNS", host), ("DNS", "localhost")]
    sans += [("IP", ip) for ip in {*ips, "127.0.0.1"} if ip]
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + SELF_SIGNED_VALIDITY)
        .add_extension(x509.SubjectAlternativeName(_general_names(sans)), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(private, hashes.SHA256())
    )
    os.makedirs(os.path.dirname(cert), mode=0o700, exist_ok=True)
    key_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    fd = os.open(key + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem)
    with open(cert + ".tmp", "wb") as f:
        f.write(certificate.public_bytes(serialization.Encoding.PEM))
    os.replace(key + ".tmp", key)
    os.replace(cert + ".tmp", cert)
    return b""


def main(argv: list[str]) -> int:
    args = json.loads(sys.stdin.buffer.read() or b"{}")
    ops: dict[str, Callable[..., bytes]] = {"key": _key, "csr": _csr, "self-signed": _self_signed}
    if len(argv) != 1 or argv[0] not in ops:
        print(f"usage: python -m minikubelet.node.keygen {'|'.join(ops)}", file=sys.stderr)
        return 2
    try:
        out = ops[argv[0]](**args)
    except (KeygenError, ValueError, OSError) as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The harness's certificate authority: server and client certificates, CSR signing, TLS contexts.

One CA plays both of the cluster's roles (client CA and the kubelet signers' CA), as a kubeadm
cluster with a single `ca.crt` does.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_USAGE_TO_EKU = {"client auth": ExtendedKeyUsageOID.CLIENT_AUTH, "server auth": ExtendedKeyUsageOID.SERVER_AUTH}


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return cert, key


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CertificateAuthority:
    def __init__(self, common_name: str = "kubernetes") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def _sign(
        self,
        subject: x509.Name,
        public_key: ec.EllipticCurvePublicKey | object,
        ekus: list[x509.ObjectIdentifier],
        *,
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        days: int = 30,
    ) -> x509.Certificate:
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
            )
            .add_extension(x509.ExtendedKeyUsage(ekus), critical=False)
        )
        if dns or ips:
            names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
            names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(self._key, hashes.SHA256())

    def issue(
        self,
        cn: str,
        orgs: tuple[str, ...] = (),
        *,
        server: bool = False,
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        ekus = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
        cert = self._sign(_name(cn, orgs), key.public_key(), ekus, dns=dns, ips=ips)
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem)

    def sign_csr(self, csr_pem: bytes, usages: list[str], *, days: int = 30) -> bytes:
        """Sign a PEM CSR as the controller-manager's csrsigning controller does: subject and SANs kept."""
        csr = x509.load_pem_x509_csr(csr_pem)
        ekus = [_USAGE_TO_EKU[u] for u in usages if u in _USAGE_TO_EKU]
        dns: tuple[str, ...] = ()
        ips: tuple[str, ...] = ()
        try:
            san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            dns = tuple(san.get_values_for_type(x509.DNSName))
            ips = tuple(str(i) for i in san.get_values_for_type(x509.IPAddress))
        except x509.ExtensionNotFound:
            pass
        cert = self._sign(csr.subject, csr.public_key(), ekus, dns=dns, ips=ips, days=days)
        return cert.public_bytes(serialization.Encoding.PEM)


def csr_subject(csr_pem: bytes) -> tuple[str, list[str]]:
    """(CN, [O...]) of a PEM certificate request."""
    name = x509.load_pem_x509_csr(csr_pem).subject
    cns = [str(a.value) for a in name.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [str(a.value) for a in name.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return (cns[0] if cns else ""), orgs


def csr_sans(csr_pem: bytes) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) of a PEM certificate request."""
    try:
        san = x509.load_pem_x509_csr(csr_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return [], []
    return list(san.value.get_values_for_type(x509.DNSName)), [
        str(i) for i in san.value.get_values_for_type(x509.IPAddress)
    ]


def make_csr(cn: str, orgs: tuple[str, ...], *, dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> KeyPair:
    """A fresh key and a PEM CSR for it, as a kubelet makes (KeyPair.cert_pem holds the CSR)."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(_name(cn, orgs))
    if dns or ips:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    csr = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return KeyPair(csr.public_bytes(serialization.Encoding.PEM), key_pem)


def server_ssl_context(ca: CertificateAuthority, serving: KeyPair, workdir: Path) -> ssl.SSLContext:
    cert, key = serving.write(workdir, "apiserver")
    ca_file = workdir / "ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(ca_file)
    # Optional: bearer-token and anonymous clients come without a certificate.
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def client_ssl_context(ca_pem: bytes, pair: KeyPair | None, workdir: Path, stem: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    if pair is not None:
        cert, key = pair.write(workdir, stem)
        ctx.load_cert_chain(cert, key)
    return ctx

"""The kubelet's client certificate: TLS bootstrap and rotation (upstream kubelet/certificate/bootstrap and
client-go's util/certificate manager and file store).

Bootstrap: when the kubeconfig holds no valid client certificate, the bootstrap kubeconfig's credentials
(a bootstrap token) send a CSR for signer `kubernetes.io/kube-apiserver-client-kubelet` with subject
`O=system:nodes, CN=system:node:<node>` and usages `digital signature, client auth` (an ECDSA P-256 key,
as upstream); the agent watches the CSR until it is approved and issued, stores the pair as
`<certDir>/kubelet-client-<time>.pem` behind the link `kubelet-client-current.pem` (0600) and writes a
kubeconfig naming that file. Rotation (`rotateCertificates`) sends a new CSR with the current
certificate at a jittered 70-90 % of its lifetime and switches to the new pair.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import os
import random
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.kubeconfig import (
    ClientConfig,
    KubeconfigError,
    atomic_write,
    load_kubeconfig,
    write_kubeconfig,
)
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError
from minikubelet.kubeapi.watch import LIST, ListWatch
from minikubelet.metrics_node import certificate_metrics
from minikubelet.node import keygen, x509der

log = logging.getLogger("minikubelet.node.certificates")

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
CLIENT_USAGES = ("digital signature", "client auth")
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
PAIR_NAME = "kubelet-client"
CSR_TIMEOUT = 3600.0  # upstream waits an hour for the approval
TMP_KEY = "kubelet-client.key.tmp"
ROTATION_RETRY_INITIAL = 2.0
ROTATION_RETRY_MAX = 300.0


class CertificateError(Exception):
    """The CSR was denied or failed, or the signed certificate is not usable."""


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes
    not_before: float
    not_after: float


def new_key_pem() -> bytes:
    try:
        return keygen.new_key_pem()
    except keygen.KeygenError as e:
        raise CertificateError(str(e)) from None


def client_csr_pem(node_name: str, key_pem: bytes, sans: list[keygen.San] | None = None) -> bytes:
    """The node's CSR (`O=system:nodes, CN=system:node:<node>`), with `sans` for a serving certificate."""
    try:
        return keygen.csr_pem(node_name, key_pem, sans or [])
    except keygen.KeygenError as e:
        raise CertificateError(str(e)) from None


def parse_pair(data: bytes, key_data: bytes | None = None) -> KeyPair:
    """A PEM bundle with the certificate (first) and, in it or in `key_data`, its private key."""
    try:
        der = x509der.first_pem_certificate(data)
        not_before, not_after = x509der.validity(der)
    except ValueError:
        raise CertificateError("no PEM certificate") from None
    key_source = key_data if key_data is not None else data
    key_pem = b""
    for marker in (b"EC PRIVATE KEY", b"PRIVATE KEY", b"RSA PRIVATE KEY"):
        begin = key_source.find(b"-----BEGIN " + marker + b"-----")
        if begin >= 0:
            end = key_source.find(b"-----END " + marker + b"-----", begin)
            key_pem = key_source[begin:end + len(marker) + 14] + b"\n"
            break
    if not key_pem:
        raise CertificateError("no PEM private key")
    return KeyPair(ssl.DER_cert_to_PEM_cert(der).encode(), key_pem, not_before, not_after)


def rotation_deadline(pair: KeyPair, jitter: float | None = None) -> float:
    """Upstream nextRotationDeadline: notBefore + lifetime x [0.7, 0.9)."""
    r = random.random() if jitter is None else jitter
    return pair.not_before + (pair.not_after - pair.not_before) * (0.7 + 0.2 * r)


class CertificateStore:
    """client-go's file store: `<dir>/<name>-<time>.pem` (cert + key) and the link `<name>-current.pem`."""

    def __init__(self, cert_dir: str, name: str = PAIR_NAME) -> None:
        self.dir = cert_dir
        self.name = name

    @property
    def current_path(self) -> str:
        return os.path.join(self.dir, f"{self.name}-current.pem")

    def current(self) -> KeyPair | None:
        try:
            with open(self.current_path, "rb") as f:
                return parse_pair(f.read(1 << 20))
        except (OSError, CertificateError):
            return None

    def update(self, cert_pem: bytes, key_pem: bytes, now: float) -> KeyPair:
        pair = parse_pair(cert_pem, key_pem)
        stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%d-%H-%M-%S")
        path = os.path.join(self.dir, f"{self.name}-{stamp}.pem")
        atomic_write(path, pair.cert_pem + pair.key_pem, 0o600)
        link_tmp = self.current_path + ".tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(link_tmp)
        os.symlink(os.path.basename(path), link_tmp)
        os.replace(link_tmp, self.current_path)
        return pair


def csr_outcome(csr: dict[str, object]) -> bytes | None:
    status = csr.get("status")
    status = status if isinstance(status, dict) else {}
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") in ("Denied", "Failed"):
            what = "denied" if c["type"] == "Denied" else "failed"
            raise CertificateError(
                f"certificate signing request is {what}, reason: {c.get('reason', '')}, message: {c.get('message', '')}")
    approved = any(isinstance(c, dict) and c.get("type") == "Approved" for c in status.get("conditions") or [])
    certificate = status.get("certificate")
    if approved and isinstance(certificate, str) and certificate:
        try:
            return base64.b64decode(certificate, validate=True)
        except ValueError:
            raise CertificateError("the issued certificate is not base64") from None
    return None


async def request_certificate(client: RestClient, csr_pem: bytes, clock: Clock, *,
                              timeout: float = CSR_TIMEOUT, signer: str = CLIENT_SIGNER,
                              usages: tuple[str, ...] = CLIENT_USAGES) -> bytes:
    """Create the CSR, then list+watch it (by name) until it is issued; the PEM certificate."""
    body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"generateName": "csr-"},
            "spec": {"request": base64.b64encode(csr_pem).decode(), "signerName": signer,
                     "usages": list(usages)}}
    created = await client.create(CSR_PATH, body)
    name, uid = created["metadata"]["name"], created["metadata"].get("uid")
    log.info("waiting for the certificate", extra={"kv": {"csr": name, "signer": signer}})
    watch = ListWatch(client, CSR_PATH, clock, field_selector=f"metadata.name={name}")
    async with asyncio.timeout(timeout):
        async for event in watch.events():
            for csr in event.items if event.type == LIST else (event.object,):
                if csr.get("metadata", {}).get("uid") != uid:
                    continue
                if (cert := csr_outcome(csr)) is not None:
                    log.info("certificate issued", extra={"kv": {"csr": name, "signer": signer}})
                    return cert
    raise CertificateError(f"certificate signing request {name} ended without a certificate")


def client_config_valid(kubeconfig_path: str, now: float) -> bool:
    """Upstream isClientConfigStillValid: the kubeconfig loads and its client certificate has not expired."""
    if not os.path.exists(kubeconfig_path):
        return False
    try:
        cfg = load_kubeconfig(kubeconfig_path)
    except KubeconfigError as e:
        log.warning("unable to read existing kubeconfig", extra={"kv": {"path": kubeconfig_path, "err": str(e)}})
        return False
    if not cfg.cert_pem:
        return False
    try:
        pair = parse_pair(cfg.cert_pem, cfg.key_pem)
    except CertificateError:
        return False
    return pair.not_after > now


ClientFactory = Callable[[ClientConfig], RestClient]


async def bootstrap_client_certificate(kubeconfig_path: str, bootstrap_path: str, cert_dir: str, node_name: str,
                                       clock: Clock, make_client: ClientFactory) -> None:
    """Upstream LoadClientCert: nothing to do if the kubeconfig's certificate is valid; else TLS bootstrap."""
    if client_config_valid(kubeconfig_path, clock.now()):
        log.info("kubeconfig exists and is valid, skipping bootstrap", extra={"kv": {"path": kubeconfig_path}})
        return
    bootstrap_cfg = load_kubeconfig(bootstrap_path)
    store = CertificateStore(cert_dir)
    os.makedirs(cert_dir, mode=0o700, exist_ok=True)
    tmp_key = os.path.join(cert_dir, TMP_KEY)
    # A key from an earlier attempt is reused, so a CSR approved while we were down still matches.
    try:
        with open(tmp_key, "rb") as f:
            key_pem = f.read(1 << 16)
        client_csr_pem(node_name, key_pem)
    except (OSError, ValueError, CertificateError):
        key_pem = new_key_pem()
        atomic_write(tmp_key, key_pem, 0o600)
    client = make_client(bootstrap_cfg)
    try:
        cert_pem = await request_certificate(client, client_csr_pem(node_name, key_pem), clock)
    finally:
        await client.close()
    store.update(cert_pem, key_pem, clock.now())
    with contextlib.suppress(OSError):
        os.unlink(tmp_key)
    write_kubeconfig(kubeconfig_path, bootstrap_cfg.server, bootstrap_cfg.ca_pem, store.current_path,
                     store.current_path)
    log.info("wrote the node's kubeconfig", extra={"kv": {"path": kubeconfig_path, "cert": store.current_path}})


def _not_after(pair: KeyPair | None, now: float) -> float | None:
    """The certificate in use's expiry; None (TTL +Inf) without one or once expired, as upstream's Current()."""
    return pair.not_after if pair is not None and pair.not_after > now else None


class CertificateRotator:
    """Renews the client certificate before it expires; `on_rotated` lets the clients reconnect."""

    def __init__(self, store: CertificateStore, node_name: str, clock: Clock, client: RestClient,
                 on_rotated: Callable[[], Awaitable[None]], bootstrap: ClientConfig | None = None,
                 make_client: ClientFactory | None = None) -> None:
        self.store = store
        self.node_name = node_name
        self.clock = clock
        self.client = client
        self.on_rotated = on_rotated
        self.bootstrap = bootstrap
        self.make_client = make_client
        self.rotations = 0
        self.metrics = certificate_metrics("client", lambda: _not_after(store.current(), clock.now()), clock.now)

    async def rotate(self) -> KeyPair:
        key_pem = new_key_pem()
        current = self.store.current()
        expired = current is None or current.not_after <= self.clock.now()
        client = self.client
        own = False
        if expired and self.bootstrap is not None and self.make_client is not None:
            client, own = self.make_client(self.bootstrap), True
        try:
            cert_pem = await request_certificate(client, client_csr_pem(self.node_name, key_pem), self.clock)
        finally:
            if own:
                await client.close()
        pair = self.store.update(cert_pem, key_pem, self.clock.now())
        self.rotations += 1
        log.info("rotated the client certificate", extra={"kv": {"notAfter": pair.not_after}})
        await self.on_rotated()
        return pair

    async def run(self) -> None:
        retry = ROTATION_RETRY_INITIAL
        while True:
            current = self.store.current()
            deadline = rotation_deadline(current) if current is not None else self.clock.now()
            await self.clock.sleep(max(0.0, deadline - self.clock.now()))
            try:
                await self.rotate()
                retry = ROTATION_RETRY_INITIAL
            except (ApiError, TransportError, CertificateError, TimeoutError, OSError) as e:
                if self.metrics is not None:
                    self.metrics.renew_errors.inc()
                log.warning("certificate rotation failed, will retry",
                            extra={"kv": {"err": str(e), "in": retry}})
                await self.clock.sleep(retry)
                retry = min(retry * 2, ROTATION_RETRY_MAX)

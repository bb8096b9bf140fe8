"""The kubelet's serving certificate by CSR (`serverTLSBootstrap`; upstream pkg/kubelet/certificate/kubelet.go
NewKubeletServerCertificateManager on client-go's certificate manager).

A CSR for signer `kubernetes.io/kubelet-serving`, subject `O=system:nodes, CN=system:node:<node>`, SANs from the
node's addresses (hostnames as DNS names, IP addresses as IPs, sorted, as addressesToHostnamesAndIPs), usages
`digital signature, server auth` (an ECDSA key: no key encipherment). Nobody approves these in a stock cluster;
the manager waits (upstream waits an hour per CSR, then tries again). The pair is kept as
`<certDir>/kubelet-server-<time>.pem` behind `kubelet-server-current.pem`, reused after a restart while valid,
and renewed at a jittered 70-90 % of its lifetime; `on_issued` hands each new pair to the TLS listener.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError
from minikubelet.metrics_node import certificate_metrics
from minikubelet.node.certificates import (
    ROTATION_RETRY_INITIAL,
    ROTATION_RETRY_MAX,
    CertificateError,
    CertificateStore,
    KeyPair,
    client_csr_pem,
    new_key_pem,
    request_certificate,
    rotation_deadline,
)
from minikubelet.node.keygen import San

log = logging.getLogger("minikubelet.node.certificates")

SERVING_SIGNER = "kubernetes.io/kubelet-serving"
SERVING_USAGES = ("digital signature", "server auth")
SERVING_PAIR_NAME = "kubelet-server"


def serving_sans(addresses: list[tuple[str, str]]) -> list[San]:
    """SANs from (type, address) node addresses: DNS names sorted, then IPs sorted by their text."""
    dns: set[str] = set()
    ips: set[str] = set()
    for kind, address in addresses:
        if not address:
            continue
        try:
            ip: str | None = str(ipaddress.ip_address(address))
        except ValueError:
            ip = None
        if kind == "Hostname":
            (ips if ip else dns).add(ip or address)
        elif kind in ("InternalIP", "ExternalIP") and ip:
            ips.add(ip)
        elif kind in ("InternalDNS", "ExternalDNS"):
            dns.add(address)
    return [*(("DNS", d) for d in sorted(dns)), *(("IP", i) for i in sorted(ips))]


def _not_after(pair: KeyPair | None) -> float | None:
    return pair.not_after if pair is not None else None


class ServingCertificateManager:
    def __init__(self, cert_dir: str, node_name: str, addresses: Callable[[], list[tuple[str, str]]],
                 clock: Clock, client: RestClient, on_issued: Callable[[str], None]) -> None:
        self.store = CertificateStore(cert_dir, SERVING_PAIR_NAME)
        self.node_name = node_name
        self.addresses = addresses
        self.clock = clock
        self.client = client
        self.on_issued = on_issued  # called with the path of the PEM bundle (certificate + key)
        self.issued = 0
        self.metrics = certificate_metrics("server", lambda: _not_after(self.current()), clock.now)

    def current(self) -> KeyPair | None:
        """The stored pair if it has not expired (then it is served at once after a restart)."""
        pair = self.store.current()
        return pair if pair is not None and pair.not_after > self.clock.now() else None

    async def request(self) -> KeyPair:
        key_pem = new_key_pem()
        sans = serving_sans(self.addresses())
        if not sans:
            raise CertificateError("no node address to put in the serving certificate")
        os.makedirs(self.store.dir, mode=0o700, exist_ok=True)
        cert_pem = await request_certificate(self.client, client_csr_pem(self.node_name, key_pem, sans), self.clock,
                                             signer=SERVING_SIGNER, usages=SERVING_USAGES)
        previous = self.store.current()
        pair = self.store.update(cert_pem, key_pem, self.clock.now())
        self.issued += 1
        if self.metrics is not None:
            self.metrics.rotated(previous.not_before if previous is not None else None)
        log.info("serving certificate issued", extra={"kv": {"notAfter": pair.not_after}})
        self.on_issued(self.store.current_path)
        return pair

    async def run(self) -> None:
        retry = ROTATION_RETRY_INITIAL
        while True:
            current = self.current()
            if current is not None:
                await self.clock.sleep(max(0.0, rotation_deadline(current) - self.clock.now()))
            try:
                await self.request()
                retry = ROTATION_RETRY_INITIAL
            except (ApiError, TransportError, CertificateError, TimeoutError, OSError) as e:
                if self.metrics is not None:
                    self.metrics.renew_errors.inc()
                log.warning("serving certificate request failed, will retry", extra={"kv": {"err": str(e), "in": retry}})
                await self.clock.sleep(retry)
                retry = min(retry * 2, ROTATION_RETRY_MAX)

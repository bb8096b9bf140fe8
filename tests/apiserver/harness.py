"""ApiServer: the test double's state and its HTTPS listener on loopback.

    async with ApiServer(tmp_path) as api:
        admin = api.admin()                       # system:masters client
        node = api.node_client("node-1")          # system:node:node-1 client certificate
        kubeconfig = api.write_kubeconfig(path, api.node_identity("node-1"))

Stopping keeps the storage (an etcd outlives its API server); start() serves it again on the same port.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from pathlib import Path
from types import TracebackType

from aiohttp import web

from tests.apiserver import auth, pki
from tests.apiserver.authz import Authorizer
from tests.apiserver.bootstrap_signer import BootstrapSigner
from tests.apiserver.client import Client, Identity
from tests.apiserver.controllers import CsrController
from tests.apiserver.proxy import KubeletProxy
from tests.apiserver.registry import Registry, Violation
from tests.apiserver.server import Faults, Handler
from tests.apiserver.store import Store
from tests.apiserver.watch import WatchStreams
from tests.apiserver.workloads import Workloads


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ApiServer:
    def __init__(self, workdir: Path, *, host: str = "127.0.0.1", port: int = 0, history: int = 1000,
                 max_watch_seconds: float = 60.0, approve_serving_csrs: bool = True,
                 workloads: bool = False) -> None:
        self.workdir = workdir
        self.host = host
        self.port = port or _free_port(host)
        self.max_watch_seconds = max_watch_seconds
        self.ca = pki.CertificateAuthority()
        self.store = Store(history=history)
        self.tokens = auth.TokenAuthority(self.store)
        self.authorizer = Authorizer(self.store)
        self.registry = Registry(self.store, self.ca.cert_pem)
        self.faults = Faults()
        self.watches = WatchStreams()
        self.handler = Handler(self)
        self.csr_controller = CsrController(self.store, self.ca, approve_serving=approve_serving_csrs)
        # the scheduler and the workload controllers; off by default so tests can bind pods themselves
        self.workloads = Workloads(self.store, self.registry) if workloads else None
        serving = self.ca.issue("kube-apiserver", server=True, dns=("localhost", "kubernetes", "kubernetes.default"),
                                ips=(host, "127.0.0.1"))
        self._ssl = pki.server_ssl_context(self.ca, serving, workdir / "pki")
        self._runner: web.AppRunner | None = None
        self.kubelet_proxy = KubeletProxy(self)
        self.bootstrap_signer = BootstrapSigner(self.store)
        self.bootstrap_signer.publish(self.url, self.ca.cert_pem)

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    @property
    def violations(self) -> list[Violation]:
        return self.registry.violations

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handler.handle)
        # handler_cancellation: a client that goes away ends its watch at once.
        runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True,
                               shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self._ssl, reuse_address=True)
        await site.start()
        self._runner = runner
        self.csr_controller.start()
        if self.workloads is not None:
            self.workloads.start()

    async def stop(self) -> None:
        """Stop serving: open connections (watches too) are cut; storage stays."""
        if self._runner is None:
            return
        await self.csr_controller.stop()
        if self.workloads is not None:
            await self.workloads.stop()
        self.watches.drop()
        runner, self._runner = self._runner, None
        await runner.cleanup()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    # identities ----------------------------------------------------------------------------------
    def identity(self, cn: str, orgs: tuple[str, ...] = ()) -> Identity:
        pair = self.ca.issue(cn, orgs)
        cert, key = pair.write(self.workdir / "clients", cn.replace(":", "_"))
        return Identity(cn, cert_file=cert, key_file=key)

    def admin_identity(self) -> Identity:
        return self.identity("kubernetes-admin", ("system:masters",))

    def node_identity(self, node: str) -> Identity:
        return self.identity(f"system:node:{node}", ("system:nodes",))

    def add_bootstrap_token(self, token_id: str = "abcdef", secret: str = "0123456789abcdef",
                            extra_groups: str = "system:bootstrappers:kubeadm:default-node-token") -> Identity:
        self.store.create("secrets", auth.bootstrap_token_secret(token_id, secret, extra_groups))
        self.bootstrap_signer.sync()
        return Identity(f"system:bootstrap:{token_id}", token=f"{token_id}.{secret}")

    def client(self, identity: Identity | None) -> Client:
        return Client(self.url, self.ca.cert_pem, identity)

    def admin(self) -> Client:
        return self.client(self.admin_identity())

    def node_client(self, node: str) -> Client:
        return self.client(self.node_identity(node))

    def client_ssl(self, identity: Identity | None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        if identity is not None and identity.cert_file is not None and identity.key_file is not None:
            ctx.load_cert_chain(identity.cert_file, identity.key_file)
        return ctx

    def write_kubeconfig(self, path: Path, identity: Identity) -> Path:
        user: dict[str, str] = {}
        if identity.cert_file is not None and identity.key_file is not None:
            user = {"client-certificate": str(identity.cert_file), "client-key": str(identity.key_file)}
        if identity.token:
            user = {"token": identity.token}
        lines = [
            "apiVersion: v1", "kind: Config",
            "clusters:", "- name: harness", "  cluster:",
            f"    server: {self.url}", f"    certificate-authority: {self.ca_file}",
            "users:", "- name: user", "  user:", *[f"    {k}: {v}" for k, v in user.items()],
            "contexts:", "- name: harness", "  context:", "    cluster: harness", "    user: user",
            "current-context: harness", "",
        ]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines))
        with contextlib.suppress(OSError):
            path.chmod(0o600)
        return path

"""The authenticated kubelet API on `port` (10250): upstream `pkg/kubelet/server/server.go`'s secure server.

Every request is authenticated and authorized first (see `auth.py`); then /healthz, /pods, /metrics as on the
read-only port, /containerLogs and /exec. Paths with `.`/`..` segments are refused (404) before anything else:
Go's mux would redirect them to the cleaned path, and nothing here serves files, but a route must never see them.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.streaming import ExecSession, StreamingRuntime
from cri.types import LABEL_CONTAINER_NAME, LABEL_POD_NAME, LABEL_POD_NAMESPACE, ContainerState, ContainerStatus
from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.server.app import KubeletServer
from minikubelet.server.auth import Authenticator, Authorizer, authorize, forbidden_message, request_attributes
from minikubelet.server.exec import ExecOptions, exec_options, serve_spdy_exec, serve_websocket_exec
from minikubelet.server.logs import LogOptionsError, LogReader, parse_log_options
from minikubelet.server.serving import BoundedHandler, Handler, bounded_app
from minikubelet.server.streaming import channel_codec, negotiation
from minikubelet.server.streaming.channels import ChannelWebSocket
from minikubelet.server.streaming.connection import SpdyConnection

log = logging.getLogger("minikubelet.server.kubelet_api")

MAX_WS_MESSAGE = 1024 * 1024
_ANNOTATION_RESTART = "io.kubernetes.container.restartCount"


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/plain", charset="utf-8")


class KubeletAPI:
    def __init__(self, base: KubeletServer, node: str, pods: Callable[[], Iterable[Pod]], runtime: Runtime,
                 streaming: StreamingRuntime | None, authn: Authenticator, authz: Authorizer) -> None:
        self.base = base
        self.node = node
        self._pods = pods
        self.runtime = runtime
        self.streaming = streaming
        self.authn = authn
        self.authz = authz

    def app(self) -> web.Application:
        app = bounded_app(self.base.limits)
        app.middlewares.append(self._guard)
        app.router.add_get("/healthz", self.base.healthz)
        app.router.add_get("/pods", self.base.pods)
        app.router.add_get("/pods/", self.base.pods)
        app.router.add_get("/metrics", self.base.metrics)
        if self.base.stats is not None:
            self.base.stats.add_routes(app)
        app.router.add_get("/containerLogs/{ns}/{pod}/{container}", self.container_logs)
        for method in ("GET", "POST"):
            app.router.add_route(method, "/exec/{ns}/{pod}/{container}", self.exec)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        segments = request.raw_path.split("?", 1)[0].split("/")[1:]
        if any(s.lower() in (".", "..", "%2e", "%2e%2e", ".%2e", "%2e.") or "%2f" in s.lower() for s in segments):
            return _text(404, "404 page not found\n")
        der: bytes | None = None
        ssl_obj = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
        if isinstance(ssl_obj, ssl.SSLObject):
            der = ssl_obj.getpeercert(binary_form=True)
        try:
            user = await self.authn.authenticate(der, request.headers.get("Authorization", ""))
        except Exception as exc:
            log.warning("authentication failed", extra={"kv": {"err": str(exc)[:200]}})
            user = None
        if user is None:
            return _text(401, "Unauthorized")
        attrs = request_attributes(user, request.method, request.path, self.node)
        try:
            ok = await authorize(self.authz, attrs)
        except Exception as exc:
            log.warning("authorization failed", extra={"kv": {"err": str(exc)[:200]}})
            return _text(500, f"Authorization error (user={user.name}, verb={attrs[0].verb}, resource=nodes, "
                              f"subresource(s)=[{' '.join(a.subresource for a in attrs)}])\n")
        if not ok:
            return _text(403, forbidden_message(attrs))
        return await handler(request)

    def _pod(self, ns: str, name: str) -> Pod | None:
        return next((p for p in self._pods() if podview.namespace(p) == ns and podview.name(p) == name), None)

    async def _containers(self, ns: str, pod: str, container: str) -> list[ContainerStatus]:
        found = await self.runtime.list_containers({LABEL_POD_NAMESPACE: ns, LABEL_POD_NAME: pod,
                                                    LABEL_CONTAINER_NAME: container})
        return sorted(found, key=lambda c: (int(c.annotations.get(_ANNOTATION_RESTART, "0") or 0), c.created_at),
                      reverse=True)

    async def container_logs(self, request: web.Request) -> web.StreamResponse:
        ns, name, container = (request.match_info[k] for k in ("ns", "pod", "container"))
        try:
            opts = parse_log_options({k: request.query.getall(k) for k in request.query}, time.time_ns())
        except LogOptionsError as exc:
            return _text(exc.status, str(exc))
        pod = self._pod(ns, name)
        if pod is None:
            return _text(404, f'pod "{name}" does not exist\n')
        if podview.PodView.of(pod).find(container) is None:
            return _text(404, f'container "{container}" not found in pod "{name}"\n')
        candidates = await self._containers(ns, name, container)
        index = 1 if opts.previous else 0
        if len(candidates) <= index:
            which = "previous terminated" if opts.previous else ""
            return _text(400, f'{which} container "{container}" in pod "{name}" is not available'.strip() + "\n")
        status = candidates[index]
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if not status.log_path:
            await resp.write(f"unable to retrieve container logs for {status.id}".encode())
            return resp

        async def running() -> bool:
            try:
                return (await self.runtime.container_status(status.id)).state is ContainerState.RUNNING
            except RuntimeError_:
                return False

        try:
            await LogReader(status.log_path, opts, resp.write, running).copy()
        except FileNotFoundError:
            await resp.write(f"unable to retrieve container logs for {status.id}".encode())
        await resp.write_eof()
        return resp

    async def exec(self, request: web.Request) -> web.StreamResponse:
        ns, name, container = (request.match_info[k] for k in ("ns", "pod", "container"))
        parsed = exec_options({k: request.query.getall(k) for k in request.query})
        if isinstance(parsed, str):
            return _text(400, parsed + "\n")
        opts: ExecOptions = parsed
        pod = self._pod(ns, name)
        if pod is None:
            return _text(404, "pod does not exist\n")
        if podview.PodView.of(pod).find(container) is None:
            return _text(404, f'container "{container}" not found in pod "{name}"\n')
        streaming = self.streaming
        if streaming is None:
            return _text(501, "exec is not supported by this container runtime\n")
        running = [c for c in await self._containers(ns, name, container) if c.state is ContainerState.RUNNING]
        if not running:
            return _text(400, f'container "{container}" in pod "{name}" is not running\n')
        cid = running[0].id

        async def start() -> ExecSession:
            return await streaming.exec_stream(cid, list(opts.command), stdin=opts.stdin, stdout=opts.stdout,
                                               stderr=opts.stderr, tty=opts.tty)

        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._exec_websocket(request, opts, start)
        if not negotiation.is_spdy_upgrade(request.headers.get("Connection", ""), request.headers.get("Upgrade", "")):
            return _text(500, "Upgrade request required\n")
        return await self._exec_spdy(request, opts, start)

    async def _exec_websocket(self, request: web.Request, opts: ExecOptions,
                              start: Callable[[], Awaitable[ExecSession]]) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=channel_codec.REMOTECOMMAND_PROTOCOLS, max_msg_size=MAX_WS_MESSAGE,
                                   heartbeat=None, autoping=True)
        await ws.prepare(request)
        protocol = ws.ws_protocol or ""
        await serve_websocket_exec(ChannelWebSocket(ws, protocol, len(channel_codec.Channel)), opts, start)
        return ws

    async def _exec_spdy(self, request: web.Request, opts: ExecOptions,
                         start: Callable[[], Awaitable[ExecSession]]) -> web.StreamResponse:
        headers = {k.lower(): request.headers.getall(k) for k in request.headers}
        result = negotiation.handshake(headers, negotiation.REMOTECOMMAND_SPDY_PROTOCOLS)
        if isinstance(result, negotiation.Rejected):
            resp = _text(result.status, result.message + "\n")
            for k, v in result.headers:
                resp.headers.add(k, v)
            return resp
        protocol = request.protocol
        transport = request.transport
        if not isinstance(protocol, BoundedHandler) or transport is None:
            return _text(500, "cannot take the connection over\n")
        reader = protocol.hijack()
        transport.write(result.response())
        writer = _TransportWriter(protocol, transport)
        await serve_spdy_exec(SpdyConnection(reader, writer), result.protocol, opts, start)
        transport.close()
        # aiohttp still finishes "the response": on a closed transport that writes nothing.
        resp = web.Response(status=101)
        resp.force_close()
        return resp


class _TransportWriter:
    """The hijacked connection's write side for SpdyConnection (the protocol's own drain paces it)."""

    def __init__(self, protocol: BoundedHandler, transport: object) -> None:
        self._protocol = protocol
        self._transport = transport

    def write(self, data: bytes) -> None:
        transport = self._protocol.transport
        if transport is None or transport.is_closing():
            raise ConnectionError("connection closed")
        transport.write(data)

    async def drain(self) -> None:
        await self._protocol._drain_helper()

    def close(self) -> None:
        transport = self._protocol.transport
        if transport is not None:
            transport.close()

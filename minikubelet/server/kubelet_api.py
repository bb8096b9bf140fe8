"""The authenticated kubelet API on `port` (10250): upstream `pkg/kubelet/server/server.go`'s secure server.

Every request is authenticated and authorized first (see `auth.py`); then /healthz (+ /healthz/ping, log,
syncloop), /pods, /runningpods/, /configz, /metrics and /metrics/probes (nodes/metrics), /stats/summary and
/metrics/resource|cadvisor, /logs/ (the node's /var/log), /containerLogs, /exec, /attach, /portForward and /checkpoint (answered as a runtime without
checkpoint support answers). No /debug/pprof. Before anything else, a path with literal `.`/`..` or empty segments
is redirected (307) to its cleaned form, as Go's ServeMux does before the kubelet's auth filter runs; encoded ones
(`%2e%2e`, `%2f`) are 404.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.streaming import AttachingRuntime, ExecSession, PortForwardRuntime, StreamingRuntime, StreamSession
from cri.types import (
    LABEL_CONTAINER_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    ContainerState,
    ContainerStatus,
    SandboxState,
)
from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.node.serving_certificate import ServingCertificateManager
from minikubelet.server.aiohttp_routes import add_routes, aiohttp_handler
from minikubelet.server.app import HealthCheck, KubeletServer
from minikubelet.server.auth import Authenticator, Authorizer, authorize, forbidden_message, request_attributes
from minikubelet.server.exec import (
    ExecOptions,
    Remote,
    S,
    attach_remote,
    exec_options,
    exec_remote,
    serve_spdy_exec,
    serve_websocket_exec,
)
from minikubelet.server.logs import LogOptionsError, LogReader, parse_log_options
from minikubelet.server.node_logs import NodeLogs
from minikubelet.server.port_forward import (
    Target,
    serve_spdy_port_forward,
    serve_websocket_port_forward,
    stream_rejection,
)
from minikubelet.server.request_metrics import observed
from minikubelet.server.serving import BoundedHandler, Handler, bounded_app
from minikubelet.server.streaming import channel_codec, negotiation
from minikubelet.server.streaming.channels import ChannelWebSocket, WebSocketTunnel
from minikubelet.server.streaming.connection import ConnectionOptions, SpdyConnection
from minikubelet.server.streaming.idle import IdleClosingWebSocket

log = logging.getLogger("minikubelet.server.kubelet_api")

MAX_WS_MESSAGE = 1024 * 1024
PORT_FORWARD_MAX_STREAMS = 256
MAX_CHANNEL_PORTS = 127  # two channels per port, and a channel number is one byte (0xFF is the close signal)
CHECKPOINT_UNIMPLEMENTED = "rpc error: code = Unimplemented desc = method CheckpointContainer not implemented"
Json = dict[str, Any]
_ANNOTATION_RESTART = "io.kubernetes.container.restartCount"


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/plain", charset="utf-8")


def _plain(status: int, text: str) -> web.Response:
    resp = _text(status, text)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def clean_path(path: str) -> str:
    """Go's ServeMux cleanPath: path.Clean rooted at `/`, keeping a trailing slash."""
    out: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if out:
                out.pop()
            continue
        out.append(seg)
    cleaned = "/" + "/".join(out)
    if path.endswith("/") and cleaned != "/":
        cleaned += "/"
    return cleaned


def _redirect_307(location: str) -> web.Response:
    resp = web.Response(status=307, text=f'<a href="{html.escape(location)}">Temporary Redirect</a>.\n\n',
                        content_type="text/html", charset="utf-8")
    resp.headers["Location"] = location
    return resp


@dataclass(frozen=True)
class SurfaceOptions:
    """What the rest of the surface needs from the agent."""

    config: Json = field(default_factory=dict)  # the /configz body
    health: HealthCheck | None = None  # (name, error) checks; "ping" and "syncloop" are served
    node_logs: NodeLogs = field(default_factory=NodeLogs)


class KubeletAPI:
    def __init__(self, base: KubeletServer, node: str, pods: Callable[[], Iterable[Pod]], runtime: Runtime,
                 streaming: StreamingRuntime | None, authn: Authenticator, authz: Authorizer,
                 surface: SurfaceOptions | None = None,
                 idle_timeout: float = ConnectionOptions().idle_timeout) -> None:
        self.base = base
        self.node = node
        self._pods = pods
        self.runtime = runtime
        self.streaming = streaming
        self.authn = authn
        self.authz = authz
        self.surface = surface or SurfaceOptions()
        self.idle_timeout = idle_timeout  # streamingConnectionIdleTimeout
        self.background: list[asyncio.Task[None]] = []  # e.g. the serving certificate's renewal
        self.serving_certificates: ServingCertificateManager | None = None

    def app(self) -> web.Application:
        app = bounded_app(self.base.limits)
        if self.base.http is not None:
            app.middlewares.insert(0, self._count)  # every request, the refused ones too (upstream ServeHTTP)
        app.middlewares.append(self._guard)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/healthz/{check}", self.healthz_check)
        app.router.add_get("/pods", aiohttp_handler(self.base.pods))
        app.router.add_get("/pods/", aiohttp_handler(self.base.pods))
        app.router.add_get("/runningpods/", self.running_pods)
        app.router.add_get("/configz", self.configz)
        app.router.add_get("/metrics", aiohttp_handler(self.base.metrics))
        app.router.add_get("/metrics/probes", aiohttp_handler(self.base.metrics_probes))
        if self.base.stats is not None:
            add_routes(app, self.base.stats.routes())
        app.router.add_get("/logs", self.logs_root)
        app.router.add_get("/logs/{tail:.*}", self.surface.node_logs.serve)
        app.router.add_get("/containerLogs/{ns}/{pod}/{container}", self.container_logs)
        app.router.add_post("/checkpoint/{ns}/{pod}/{container}", self.checkpoint)
        for method in ("GET", "POST"):
            app.router.add_route(method, "/exec/{ns}/{pod}/{container}", self.exec)
            app.router.add_route(method, "/attach/{ns}/{pod}/{container}", self.attach)
            app.router.add_route(method, "/portForward/{ns}/{pod}", self.port_forward)
            app.router.add_route(method, "/portForward/{ns}/{pod}/{uid}", self.port_forward)
        return app

    @web.middleware
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        assert self.base.http is not None
        with observed(self.base.http, request.method, request.path, "readwrite"):
            return await handler(request)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        raw = request.raw_path.split("?", 1)[0]
        segments = raw.split("/")[1:]
        if any(s.lower() in ("%2e", "%2e%2e", ".%2e", "%2e.") or "%2f" in s.lower() for s in segments):
            return _text(404, "404 page not found\n")
        if (cleaned := clean_path(raw)) != raw:
            query = request.raw_path[len(raw):]
            return _redirect_307(cleaned + query)
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
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return _plain(404, "404 page not found\n")  # no such route: Go's mux's answer

    async def _checks(self) -> list[tuple[str, str | None]]:
        """Upstream's checkers in its order: ping, log, syncloop."""
        found = dict(await self.surface.health()) if self.surface.health is not None else {}
        return [("ping", None), ("log", None), ("syncloop", found.get("syncloop"))]

    async def healthz(self, request: web.Request) -> web.Response:
        excluded = set(request.query.getall("exclude", []))
        checks = [(n, e) for n, e in await self._checks() if n not in excluded]
        failed = any(e for _, e in checks)
        if not failed and "verbose" not in request.query:
            return _plain(200, "ok")
        body = "".join(f"[+]{n} ok\n" if not e else f"[-]{n} failed: reason withheld\n" for n, e in checks)
        body += "healthz check failed\n" if failed else "healthz check passed\n"
        return _plain(500 if failed else 200, body)

    async def healthz_check(self, request: web.Request) -> web.Response:
        checks = dict(await self._checks())
        name = request.match_info["check"]
        if name not in checks:
            return _text(404, "404 page not found\n")
        if (err := checks[name]) is not None:
            return _plain(500, f"internal server error: {err}\n")
        return _plain(200, "ok")

    async def configz(self, _request: web.Request) -> web.Response:
        resp = web.Response(body=json.dumps(self.surface.config, separators=(",", ":")).encode(),
                            content_type="application/json")
        resp.headers["X-Content-Type-Options"] = "nosniff"
        return resp

    async def logs_root(self, _request: web.Request) -> web.Response:
        return web.Response(status=301, headers={"Location": "/logs/"})

    async def running_pods(self, _request: web.Request) -> web.Response:
        """Upstream getRunningPods: the runtime's running pods as bare v1 Pods (ToAPIPod)."""
        pods: dict[str, Json] = {}

        def entry(uid: str, name: str, ns: str) -> Json:
            return pods.setdefault(uid, {"metadata": {"name": name, "namespace": ns, "uid": uid},
                                         "spec": {"containers": None}, "status": {}})

        try:
            sandboxes = await self.runtime.list_pod_sandboxes()
            containers = await self.runtime.list_containers()
        except RuntimeError_ as exc:
            return _text(500, f"{exc}\n")
        for sb in sandboxes:
            if sb.state is SandboxState.READY:
                entry(sb.metadata.uid, sb.metadata.name, sb.metadata.namespace)
        for c in containers:
            if c.state is not ContainerState.RUNNING:
                continue
            uid = c.labels.get(LABEL_POD_UID, "")
            pod = entry(uid, c.labels.get(LABEL_POD_NAME, ""), c.labels.get(LABEL_POD_NAMESPACE, ""))
            pod["spec"]["containers"] = [*(pod["spec"]["containers"] or []),
                                         {"name": c.metadata.name, "image": c.image, "resources": {}}]
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                "items": sorted(pods.values(), key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))}
        return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), content_type="application/json")

    async def checkpoint(self, request: web.Request) -> web.Response:
        """ContainerCheckpoint is on in 1.36; neither runtime here implements CheckpointContainer, so a request
        that names an existing container gets the runtime's Unimplemented answer wrapped as upstream does."""
        ns, name, container = (request.match_info[k] for k in ("ns", "pod", "container"))
        pod = self._pod(ns, name)
        if pod is None:
            return _plain(404, "pod does not exist")
        if podview.PodView.of(pod).find(container) is None:
            return _plain(404, f"container {container} does not exist")
        timeouts = request.query.getall("timeout", [])
        if timeouts and not timeouts[-1].lstrip("-").isdigit():
            return _plain(404, "cannot parse value of timeout parameter")
        return _plain(500, f"checkpointing of {ns}/{name}/{container} failed "
                           f"({CHECKPOINT_UNIMPLEMENTED})")

    def _pod(self, ns: str, name: str) -> Pod | None:
        return next((p for p in self._pods() if podview.namespace(p) == ns and podview.name(p) == name), None)

    async def _containers(self, pod: Pod, container: str) -> list[ContainerStatus]:
        """The pod's containers of that name, newest first. By the pod's uid, as upstream looks them up: a pod
        deleted and created again under the same name must not see its predecessor's containers."""
        found = await self.runtime.list_containers({LABEL_POD_UID: podview.uid(pod),
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
        candidates = await self._containers(pod, container)
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
            return _text(400, parsed)
        opts: ExecOptions = parsed
        pod = self._pod(ns, name)
        if pod is None:
            return _text(404, "pod does not exist")
        streaming = self.streaming
        if streaming is None:
            return _text(501, "exec is not supported by this container runtime\n")
        running = [c for c in await self._containers(pod, container) if c.state is ContainerState.RUNNING]
        if podview.PodView.of(pod).find(container) is None or not running:
            return _text(500, f'container not found ("{container}")')  # upstream GetExec's running-pod lookup
        cid = running[0].id

        async def start() -> ExecSession:
            return await streaming.exec_stream(cid, list(opts.command), stdin=opts.stdin, stdout=opts.stdout,
                                               stderr=opts.stderr, tty=opts.tty)

        return await self._stream(request, opts, exec_remote(start))

    async def attach(self, request: web.Request) -> web.StreamResponse:
        """Upstream `getAttach` + `GetAttach`: the tty is the container's own (it cannot change after start);
        stdin reaches the container only if it was created with `stdin: true` (else it is read and dropped,
        as containerd does); a container that is not running is not found, as the kubelet's running-pod lookup
        has it (500, the lookup's error text as the body)."""
        ns, name, container = (request.match_info[k] for k in ("ns", "pod", "container"))
        parsed = exec_options({k: request.query.getall(k) for k in request.query}, command_required=False)
        if isinstance(parsed, str):
            return _text(400, parsed)
        opts: ExecOptions = parsed
        pod = self._pod(ns, name)
        if pod is None:
            return _text(404, "pod does not exist")
        attaching = self.streaming
        if not isinstance(attaching, AttachingRuntime):
            return _text(501, "attach is not supported by this container runtime\n")
        spec = podview.PodView.of(pod).find(container)
        running = [c for c in await self._containers(pod, container) if c.state is ContainerState.RUNNING]
        if spec is None or not running:
            return _text(500, f"container {container} not found in pod {name}_{ns}")
        cid = running[0].id
        tty, stdin = bool(spec.raw.get("tty")), bool(spec.raw.get("stdin"))

        async def start() -> StreamSession:
            return await attaching.attach_stream(cid, stdin=opts.stdin and stdin, stdout=opts.stdout,
                                                 stderr=opts.stderr, tty=tty)

        return await self._stream(request, opts, attach_remote(start))

    async def _stream(self, request: web.Request, opts: ExecOptions, remote: Remote[S]) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            offered = {p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")}
            if "v5.channel.k8s.io" in offered and self.base.http is not None:
                # upstream counts the v5 (stream close) websockets it translates (ExtendWebSocketsToKubelet)
                self.base.http.websocket_streaming.labels(request.path.lstrip("/").split("/", 1)[0]).inc()
            return await self._stream_websocket(request, opts, remote)
        if not negotiation.is_spdy_upgrade(request.headers.get("Connection", ""), request.headers.get("Upgrade", "")):
            refused = _text(500, "Upgrade request required\n")  # Go's http.Error, as recorded
            refused.headers["X-Content-Type-Options"] = "nosniff"
            return refused
        return await self._stream_spdy(request, opts, remote)

    async def _stream_websocket(self, request: web.Request, opts: ExecOptions,
                                remote: Remote[S]) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=channel_codec.REMOTECOMMAND_PROTOCOLS, max_msg_size=MAX_WS_MESSAGE,
                                   heartbeat=None, autoping=True)
        await ws.prepare(request)
        protocol = ws.ws_protocol or ""
        idle = IdleClosingWebSocket(ws, self.idle_timeout)
        try:
            await serve_websocket_exec(ChannelWebSocket(idle, protocol, len(channel_codec.Channel)), opts, remote)
        finally:
            await idle.stop()
        return ws

    async def _stream_spdy(self, request: web.Request, opts: ExecOptions, remote: Remote[S]) -> web.StreamResponse:
        async def serve(reader: asyncio.StreamReader, writer: _TransportWriter, protocol: str) -> None:
            conn = SpdyConnection(reader, writer, ConnectionOptions(idle_timeout=self.idle_timeout))
            await serve_spdy_exec(conn, protocol, opts, remote)

        return await _spdy_takeover(request, negotiation.REMOTECOMMAND_SPDY_PROTOCOLS, serve)

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        ns, name, uid = request.match_info["ns"], request.match_info["pod"], request.match_info.get("uid", "")
        websocket = request.headers.get("Upgrade", "").lower() == "websocket"
        offered = negotiation.offered_protocols(request.headers.getall("Sec-WebSocket-Protocol", []))
        tunnel = websocket and any(channel_codec.is_tunnel(p) for p in offered)
        ports: tuple[int, ...] = ()
        if tunnel and self.base.http is not None:
            self.base.http.websocket_streaming.labels("portforward").inc()
        if websocket and not tunnel:
            try:
                ports = channel_codec.parse_ports(request.query.getall("port", []))
            except channel_codec.ChannelError as exc:
                return _text(400, str(exc))
            if len(ports) > MAX_CHANNEL_PORTS:
                return _text(400, f"at most {MAX_CHANNEL_PORTS} ports can be forwarded on one WebSocket")
        pod = self._pod(ns, name)
        if pod is None:
            return _text(404, "pod does not exist")
        if uid and podview.uid(pod) != uid:
            return _text(404, "pod not found")
        runtime = self.streaming
        if not isinstance(runtime, PortForwardRuntime):
            return _text(501, "port-forward is not supported by this container runtime\n")
        sandboxes = [s for s in await self.runtime.list_pod_sandboxes({LABEL_POD_UID: podview.uid(pod)})
                     if s.state is SandboxState.READY]
        if not sandboxes:
            return _text(500, f'pod not found ("{name}_{ns}")')
        sandbox = max(sandboxes, key=lambda s: s.created_at).id

        async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await runtime.port_forward(sandbox, port)

        target = Target(connect, sandbox)
        # Two streams per forwarded connection, and a finished one may linger for the half-close grace.
        options = ConnectionOptions(idle_timeout=self.idle_timeout, max_streams=PORT_FORWARD_MAX_STREAMS)
        if tunnel:
            ws = web.WebSocketResponse(protocols=(channel_codec.PORTFORWARD_TUNNEL,), max_msg_size=MAX_WS_MESSAGE,
                                       heartbeat=None, autoping=True)
            await ws.prepare(request)
            if ws.ws_protocol != channel_codec.PORTFORWARD_TUNNEL:
                await ws.close()
                return ws
            tunnel = WebSocketTunnel(ws)
            conn = SpdyConnection(tunnel, tunnel, options, reject=stream_rejection)
            await serve_spdy_port_forward(conn, target)
            await ws.close()
            return ws
        if websocket:
            ws = web.WebSocketResponse(protocols=channel_codec.PORTFORWARD_PROTOCOLS[1:], max_msg_size=MAX_WS_MESSAGE,
                                       heartbeat=None, autoping=True)
            await ws.prepare(request)
            layout = channel_codec.PortForwardLayout(ports)
            await serve_websocket_port_forward(ChannelWebSocket(ws, ws.ws_protocol or "", layout.channels), ports,
                                               target)
            return ws
        if not negotiation.is_spdy_upgrade(request.headers.get("Connection", ""), request.headers.get("Upgrade", "")):
            return _text(500, "Upgrade request required\n")

        async def serve(reader: asyncio.StreamReader, writer: _TransportWriter, _protocol: str) -> None:
            await serve_spdy_port_forward(SpdyConnection(reader, writer, options, reject=stream_rejection), target)

        return await _spdy_takeover(request, negotiation.PORTFORWARD_SPDY_PROTOCOLS, serve)


async def _spdy_takeover(request: web.Request, supported: tuple[str, ...],
                         serve: Callable[[asyncio.StreamReader, _TransportWriter, str], Awaitable[None]]
                         ) -> web.StreamResponse:
    """Negotiate the SPDY/3.1 upgrade, answer our own 101 and take the connection over (aiohttp only treats
    WebSocket as an upgrade), serve it, then close it."""
    headers = {k.lower(): request.headers.getall(k) for k in request.headers}
    result = negotiation.handshake(headers, supported)
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
    await serve(reader, _TransportWriter(protocol, transport), result.protocol)
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

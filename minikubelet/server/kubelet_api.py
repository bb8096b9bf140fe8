"""The authenticated kubelet API on `port` (10250): upstream `pkg/kubelet/server/server.go`'s secure server.

Every request is authenticated and authorized first (see `auth.py`); then /healthz (+ /healthz/ping, log,
syncloop), /pods, /runningpods/, /configz, /metrics and /metrics/probes (nodes/metrics), /stats/summary and
/metrics/resource|cadvisor, /logs/ (the node's /var/log), /containerLogs, /exec, /attach, /portForward and /checkpoint (answered as a runtime without
checkpoint support answers). No /debug/pprof. Before anything else, a path with literal `.`/`..` or empty segments
is redirected (307) to its cleaned form, as Go's ServeMux does before the kubelet's auth filter runs; encoded ones
(`%2e%2e`, `%2f`) are 404. Served by the h11 listener over TLS (`listener.py`); the streams take the connection over
after a 101: SPDY/3.1 (`streaming/connection.py`) or WebSocket (`streaming/websocket.py`, wsproto).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

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
from minikubelet.base.html_text import escape
from minikubelet.base.podview import Pod
from minikubelet.server.app import EXPLAIN_PATH, HealthCheck, KubeletServer
from minikubelet.server.auth import Authenticator, Authorizer, authorize, forbidden_message, request_attributes
from minikubelet.server.logs import LogOptionsError, LogReader, parse_log_options
from minikubelet.server.node_logs import NodeLogs
from minikubelet.server.request_metrics import observed_answer
from minikubelet.server.routes import (
    Answer,
    ByteReader,
    ByteWriter,
    Request,
    Response,
    Routes,
    Streamed,
    Upgrade,
    Write,
)
from minikubelet.server.streaming import channel_codec, negotiation, websocket
from minikubelet.server.streaming.channels import ChannelWebSocket, WebSocketTunnel
from minikubelet.server.streaming.idle import IdleClosingWebSocket

if TYPE_CHECKING:
    from minikubelet.node.serving_certificate import ServingCertificateManager  # its API client: not ours to load
    from minikubelet.server.exec import ExecOptions, Remote, S
    from minikubelet.server.streaming.server_websocket import ServerWebSocket  # wsproto: by the first WebSocket

# The SPDY/3.1 framing, exec and port-forward modules (`exec`, `port_forward`, `streaming.connection`, cri.spdy:
# +0.5 MiB) and wsproto are imported by the first exec, attach or port-forward request, not by every agent.

log = logging.getLogger("minikubelet.server.kubelet_api")

MAX_WS_MESSAGE = 1024 * 1024
STREAMING_IDLE_TIMEOUT = 4 * 3600.0  # kubelet streamingConnectionIdleTimeout default (as ConnectionOptions')
PORT_FORWARD_MAX_STREAMS = 256
MAX_CHANNEL_PORTS = 127  # two channels per port, and a channel number is one byte (0xFF is the close signal)
CHECKPOINT_UNIMPLEMENTED = "rpc error: code = Unimplemented desc = method CheckpointContainer not implemented"
Json = dict[str, Any]
_ANNOTATION_RESTART = "io.kubernetes.container.restartCount"


def _text(status: int, text: str) -> Response:
    return Response(status, text.encode(), "text/plain; charset=utf-8")


def _plain(status: int, text: str) -> Response:
    return Response(status, text.encode(), "text/plain; charset=utf-8", {"X-Content-Type-Options": "nosniff"})


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


def _redirect_307(location: str) -> Response:
    return Response(307, f'<a href="{escape(location)}">Temporary Redirect</a>.\n\n'.encode(),
                    "text/html; charset=utf-8", {"Location": location})


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
                 idle_timeout: float = STREAMING_IDLE_TIMEOUT) -> None:
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

    def routes(self) -> Routes:
        """The API's routes, every request counted (refused ones too, as upstream's ServeHTTP), then guarded."""
        routes = _GuardedRoutes(self)
        routes.get("/healthz", self.healthz)
        routes.get("/healthz/{check}", self.healthz_check)
        routes.get("/pods", self.base.pods)
        routes.get("/pods/", self.base.pods)
        routes.get("/runningpods/", self.running_pods)
        routes.get("/configz", self.configz)
        routes.get(EXPLAIN_PATH, self.base.explain_pod)  # authorised as nodes/proxy, as every /debug/ path
        routes.get("/metrics", self.base.metrics)
        routes.get("/metrics/probes", self.base.metrics_probes)
        if self.base.stats is not None:
            routes.extend(self.base.stats.routes())
        routes.get("/logs", self.logs_root)
        routes.add(("GET", "HEAD"), "/logs/", self.surface.node_logs.serve, prefix=True)
        routes.get("/containerLogs/{ns}/{pod}/{container}", self.container_logs)
        routes.add(("POST",), "/checkpoint/{ns}/{pod}/{container}", self.checkpoint)
        methods = ("GET", "POST")
        routes.add(methods, "/exec/{ns}/{pod}/{container}", self.exec)
        routes.add(methods, "/attach/{ns}/{pod}/{container}", self.attach)
        routes.add(methods, "/portForward/{ns}/{pod}", self.port_forward)
        routes.add(methods, "/portForward/{ns}/{pod}/{uid}", self.port_forward)
        return routes

    async def guard(self, request: Request, routes: Routes) -> Answer:
        raw = request.raw_path.split("?", 1)[0] or request.path
        segments = raw.split("/")[1:]
        if any(s.lower() in ("%2e", "%2e%2e", ".%2e", "%2e.") or "%2f" in s.lower() for s in segments):
            return _text(404, "404 page not found\n")
        if (cleaned := clean_path(raw)) != raw:
            query = request.raw_path[len(raw):]
            return _redirect_307(cleaned + query)
        try:
            user = await self.authn.authenticate(request.peer_certificate, request.headers.get("Authorization") or "")
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
        found = routes.lookup(request.method, request.path)
        if isinstance(found, Response):
            return _plain(404, "404 page not found\n") if found.status == 404 else found  # Go's mux's answer
        handler, params = found
        return await handler(replace(request, params=params))

    async def _checks(self) -> list[tuple[str, str | None]]:
        """Upstream's checkers in its order: ping, log, syncloop."""
        found = dict(await self.surface.health()) if self.surface.health is not None else {}
        return [("ping", None), ("log", None), ("syncloop", found.get("syncloop"))]

    async def healthz(self, request: Request) -> Response:
        excluded = set(request.query.getall("exclude"))
        checks = [(n, e) for n, e in await self._checks() if n not in excluded]
        failed = any(e for _, e in checks)
        if not failed and "verbose" not in request.query:
            return _plain(200, "ok")
        body = "".join(f"[+]{n} ok\n" if not e else f"[-]{n} failed: reason withheld\n" for n, e in checks)
        body += "healthz check failed\n" if failed else "healthz check passed\n"
        return _plain(500 if failed else 200, body)

    async def healthz_check(self, request: Request) -> Response:
        checks = dict(await self._checks())
        name = request.params["check"]
        if name not in checks:
            return _text(404, "404 page not found\n")
        if (err := checks[name]) is not None:
            return _plain(500, f"internal server error: {err}\n")
        return _plain(200, "ok")

    async def configz(self, _request: Request) -> Response:
        return Response(200, json.dumps(self.surface.config, separators=(",", ":")).encode(), "application/json",
                        {"X-Content-Type-Options": "nosniff"})

    async def logs_root(self, _request: Request) -> Response:
        return Response(301, headers={"Location": "/logs/"})

    async def running_pods(self, _request: Request) -> Response:
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
        return Response(200, json.dumps(body, separators=(",", ":")).encode(), "application/json")

    async def checkpoint(self, request: Request) -> Response:
        """ContainerCheckpoint is on in 1.36; neither runtime here implements CheckpointContainer, so a request
        that names an existing container gets the runtime's Unimplemented answer wrapped as upstream does."""
        ns, name, container = (request.params[k] for k in ("ns", "pod", "container"))
        pod = self._pod(ns, name)
        if pod is None:
            return _plain(404, "pod does not exist")
        if podview.PodView.of(pod).find(container) is None:
            return _plain(404, f"container {container} does not exist")
        timeouts = request.query.getall("timeout")
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

    async def container_logs(self, request: Request) -> Answer:
        ns, name, container = (request.params[k] for k in ("ns", "pod", "container"))
        try:
            opts = parse_log_options(request.query.lists(), time.time_ns())
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

        async def running() -> bool:
            try:
                return (await self.runtime.container_status(status.id)).state is ContainerState.RUNNING
            except RuntimeError_:
                return False

        async def produce(write: Write) -> None:
            unavailable = f"unable to retrieve container logs for {status.id}".encode()
            if not status.log_path:
                await write(unavailable)
                return
            try:
                await LogReader(status.log_path, opts, write, running).copy()
            except FileNotFoundError:
                await write(unavailable)

        return Streamed(produce, 200, "application/octet-stream")

    async def exec(self, request: Request) -> Answer:
        from minikubelet.server.exec import exec_options, exec_remote

        ns, name, container = (request.params[k] for k in ("ns", "pod", "container"))
        parsed = exec_options(request.query.lists())
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

    async def attach(self, request: Request) -> Answer:
        """Upstream `getAttach` + `GetAttach`: the tty is the container's own (it cannot change after start);
        stdin reaches the container only if it was created with `stdin: true` (else it is read and dropped,
        as containerd does); a container that is not running is not found, as the kubelet's running-pod lookup
        has it (500, the lookup's error text as the body)."""
        from minikubelet.server.exec import attach_remote, exec_options

        ns, name, container = (request.params[k] for k in ("ns", "pod", "container"))
        parsed = exec_options(request.query.lists(), command_required=False)
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

    async def _stream(self, request: Request, opts: ExecOptions, remote: Remote[S]) -> Answer:
        if websocket.is_upgrade(request.headers):
            offered = {p.strip() for p in (request.headers.get("Sec-WebSocket-Protocol") or "").split(",")}
            if "v5.channel.k8s.io" in offered and self.base.http is not None:
                # upstream counts the v5 (stream close) websockets it translates (ExtendWebSocketsToKubelet)
                self.base.http.websocket_streaming.labels(request.path.lstrip("/").split("/", 1)[0]).inc()
            return self._stream_websocket(request, opts, remote)
        if not negotiation.is_spdy_upgrade(request.headers.get("Connection") or "",
                                           request.headers.get("Upgrade") or ""):
            return _plain(500, "Upgrade request required\n")  # Go's http.Error, as recorded
        return self._stream_spdy(request, opts, remote)

    def _stream_websocket(self, request: Request, opts: ExecOptions, remote: Remote[S]) -> Answer:
        from minikubelet.server.exec import serve_websocket_exec

        async def serve(ws: ServerWebSocket) -> None:
            idle = IdleClosingWebSocket(ws, self.idle_timeout)
            try:
                await serve_websocket_exec(ChannelWebSocket(idle, ws.protocol, len(channel_codec.Channel)), opts,
                                           remote)
            finally:
                await idle.stop()

        return websocket.upgrade(request, channel_codec.REMOTECOMMAND_PROTOCOLS, serve, MAX_WS_MESSAGE)

    def _stream_spdy(self, request: Request, opts: ExecOptions, remote: Remote[S]) -> Answer:
        from minikubelet.server.exec import serve_spdy_exec
        from minikubelet.server.streaming.connection import ConnectionOptions, SpdyConnection

        async def serve(reader: ByteReader, writer: ByteWriter, protocol: str) -> None:
            conn = SpdyConnection(reader, writer, ConnectionOptions(idle_timeout=self.idle_timeout))
            await serve_spdy_exec(conn, protocol, opts, remote)

        return _spdy_upgrade(request, negotiation.REMOTECOMMAND_SPDY_PROTOCOLS, serve)

    async def port_forward(self, request: Request) -> Answer:
        from minikubelet.server.port_forward import (
            Target,
            serve_spdy_port_forward,
            serve_websocket_port_forward,
            stream_rejection,
        )
        from minikubelet.server.streaming.connection import ConnectionOptions, SpdyConnection

        ns, name, uid = request.params["ns"], request.params["pod"], request.params.get("uid", "")
        upgrade = websocket.is_upgrade(request.headers)
        offered = negotiation.offered_protocols(request.headers.getall("Sec-WebSocket-Protocol"))
        tunnel = upgrade and any(channel_codec.is_tunnel(p) for p in offered)
        ports: tuple[int, ...] = ()
        if tunnel and self.base.http is not None:
            self.base.http.websocket_streaming.labels("portforward").inc()
        if upgrade and not tunnel:
            try:
                ports = channel_codec.parse_ports(request.query.getall("port"))
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
            async def serve_tunnel(ws: ServerWebSocket) -> None:
                if ws.protocol != channel_codec.PORTFORWARD_TUNNEL:
                    return
                tunnel = WebSocketTunnel(ws)
                conn = SpdyConnection(tunnel, tunnel, options, reject=stream_rejection)
                await serve_spdy_port_forward(conn, target)

            return websocket.upgrade(request, (channel_codec.PORTFORWARD_TUNNEL,), serve_tunnel, MAX_WS_MESSAGE)
        if upgrade:
            async def serve_channels(ws: ServerWebSocket) -> None:
                layout = channel_codec.PortForwardLayout(ports)
                await serve_websocket_port_forward(ChannelWebSocket(ws, ws.protocol, layout.channels), ports, target)

            return websocket.upgrade(request, channel_codec.PORTFORWARD_PROTOCOLS[1:], serve_channels,
                                     MAX_WS_MESSAGE)
        if not negotiation.is_spdy_upgrade(request.headers.get("Connection") or "",
                                           request.headers.get("Upgrade") or ""):
            return _text(500, "Upgrade request required\n")

        async def serve(reader: ByteReader, writer: ByteWriter, _protocol: str) -> None:
            await serve_spdy_port_forward(SpdyConnection(reader, writer, options, reject=stream_rejection), target)

        return _spdy_upgrade(request, negotiation.PORTFORWARD_SPDY_PROTOCOLS, serve)


class _GuardedRoutes(Routes):
    def __init__(self, api: KubeletAPI) -> None:
        super().__init__()
        self._api = api

    async def dispatch(self, request: Request) -> Answer:
        http = self._api.base.http
        if http is None:
            return await self._guarded(request)
        return await observed_answer(http, request, "readwrite", self._guarded)

    async def _guarded(self, request: Request) -> Answer:
        return await self._api.guard(request, self)


def _spdy_upgrade(request: Request, supported: tuple[str, ...],
                  serve: Callable[[ByteReader, ByteWriter, str], Awaitable[None]]) -> Answer:
    """Negotiate the SPDY/3.1 upgrade (upstream `httpstream.Handshake`): the refusal, or our 101 and the
    connection for `serve`."""
    result = negotiation.handshake(request.headers.lists(), supported)
    if isinstance(result, negotiation.Rejected):
        return Response(result.status, (result.message + "\n").encode(), "text/plain; charset=utf-8",
                        repeated=result.headers)
    protocol = result.protocol

    async def take_over(reader: ByteReader, writer: ByteWriter) -> None:
        await serve(reader, writer, protocol)

    return Upgrade(take_over, result.headers())

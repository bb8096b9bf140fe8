"""The API server's kubelet-facing subresources, as kube-apiserver v1.36 drives a kubelet (kubelet-api recordings).

* `nodes/{name}/proxy/{path}` (verb from the method on `nodes/proxy`): the request, its query and the client's
  headers (minus hop-by-hop and Authorization) go to `https://<InternalIP>:<daemonEndpoints.kubeletEndpoint.Port>`
  with `X-Forwarded-For` and `X-Forwarded-Uri` added; the answer streams back as it comes.
* `pods/{name}/log` (`get pods/log`): the API server's own `GET /containerLogs/{ns}/{pod}/{container}` with the
  PodLogOptions mapped (`User-Agent: Go-http-client/1.1`, `Accept-Encoding: gzip`), streamed back as text/plain.
* `pods/{name}/exec|attach|portforward` (`create`, also for a WebSocket GET as AuthorizePodWebsocketUpgrade...):
  a WebSocket from the client is passed through to a node that declares `ExtendWebSocketsToKubelet` in
  `status.declaredFeatures` (the kubelet chooses the sub-protocol; messages are relayed as they come); for
  any other node exec and attach are translated to SPDY/3.1 (`spdy_translator.py`). Port-forward is not
  translated: 400 saying so.

Every connection to a kubelet presents the API server's kubelet client certificate
(`CN=kube-apiserver-kubelet-client, O=system:masters`) and does not verify the kubelet's serving certificate
unless `kubelet_ca` is set (as without `--kubelet-certificate-authority`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.parse
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from minikubelet.server.streaming.channel_codec import SPDY_TUNNEL_PREFIX
from tests.apiserver import errors, spdy_translator, stream_tunnel
from tests.apiserver.auth import User
from tests.apiserver.authz import Attributes
from tests.apiserver.resources import resource

if TYPE_CHECKING:
    from tests.apiserver.harness import ApiServer

Json = dict[str, Any]
EXTEND_WEBSOCKETS = "ExtendWebSocketsToKubelet"
KUBELET_TIMEOUT = 5.0  # --kubelet-timeout, for requests that do not stream
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
               "transfer-encoding", "upgrade", "authorization", "host", "content-length"}
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_LOG_BOOLS = ("follow", "previous", "timestamps", "insecureSkipTLSVerifyBackend")
_LOG_INTS = ("sinceSeconds", "tailLines", "limitBytes")
STREAM_SUBRESOURCES = ("exec", "attach", "portforward")
_KUBELET_PATHS = {"exec": "exec", "attach": "attach", "portforward": "portForward"}


class KubeletProxy:
    def __init__(self, api: ApiServer, kubelet_ca: bytes | None = None) -> None:
        self.api = api
        self.identity = api.identity("kube-apiserver-kubelet-client", ("system:masters",))
        ctx = ssl.create_default_context(cadata=kubelet_ca.decode()) if kubelet_ca else ssl.create_default_context()
        if kubelet_ca is None:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        assert self.identity.cert_file is not None and self.identity.key_file is not None
        ctx.load_cert_chain(self.identity.cert_file, self.identity.key_file)
        self.ssl = ctx
        self.requests: list[tuple[str, str]] = []  # (method, path_qs) sent to kubelets, for tests

    # -- where a node's kubelet is ------------------------------------------------------------
    def kubelet_url(self, node_name: str) -> tuple[str, Json]:
        node = self.api.store.get("nodes", "", node_name)
        if node is None:
            raise errors.not_found(resource("nodes"), node_name)
        status = node.get("status") or {}
        port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 0
        by_type: dict[str, str] = {}
        for a in status.get("addresses") or []:
            by_type.setdefault(a.get("type", ""), a.get("address", ""))
        # --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname
        host = next((by_type[t] for t in ("InternalIP", "ExternalIP", "Hostname") if by_type.get(t)), "")
        if not host or not port:
            raise errors.ApiError(errors.status(503, "ServiceUnavailable", f'no preferred addresses found; known '
                                                f'addresses: {status.get("addresses") or []}'))
        host = f"[{host}]" if ":" in host else host
        return f"https://{host}:{port}", node

    def _pod_node(self, ns: str, name: str) -> tuple[Json, str]:
        pod = self.api.store.get("pods", ns, name)
        if pod is None:
            raise errors.not_found(resource("pods"), name)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if not node:
            raise errors.bad_request(f"pod {name} does not have a host assigned")
        return pod, node

    # -- nodes/{name}/proxy/{path} ------------------------------------------------------------
    async def node_proxy(self, request: web.Request, user: User, node: str, rest: str,
                         authorize: Any) -> web.StreamResponse:
        try:
            return await self._node_proxy(request, user, node, rest, authorize)
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            raise _unreachable(exc) from None

    async def _node_proxy(self, request: web.Request, user: User, node: str, rest: str,
                          authorize: Any) -> web.StreamResponse:
        verb = _VERBS.get(request.method, "get")
        authorize(Attributes(user, verb, request.path, "nodes", "proxy", "", "", node))
        base, _ = self.kubelet_url(node)
        query = request.raw_path.partition("?")[2]
        target = (rest or "/") + (f"?{query}" if query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["Host"] = request.host
        headers["X-Forwarded-For"] = request.remote or ""
        headers["X-Forwarded-Uri"] = request.path
        self.requests.append((request.method, target))
        body = await request.read()
        async with aiohttp.ClientSession(auto_decompress=False) as session, session.request(
                request.method, base + target, headers=headers, data=body or None, ssl=self.ssl,
                allow_redirects=False) as upstream:
            return await _relay(request, upstream)

    # -- pods/{name}/log ----------------------------------------------------------------------
    async def pod_log(self, request: web.Request, user: User, ns: str, name: str,
                      authorize: Any) -> web.StreamResponse:
        try:
            return await self._pod_log(request, user, ns, name, authorize)
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            raise _unreachable(exc) from None

    async def _pod_log(self, request: web.Request, user: User, ns: str, name: str,
                       authorize: Any) -> web.StreamResponse:
        authorize(Attributes(user, "get", request.path, "pods", "log", "", ns, name))
        pod, node = self._pod_node(ns, name)
        q = request.query
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        container = q.get("container", "")
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                         f"[{' '.join(containers)}]")
            container = containers[0]
        params: list[tuple[str, str]] = []
        for key in _LOG_BOOLS[:3]:
            if q.get(key, "") in ("true", "1"):
                params.append((key, "true"))
        for key in _LOG_INTS:
            if key in q:
                params.append((key, q[key]))
        if "sinceTime" in q:
            params.append(("sinceTime", q["sinceTime"]))
        if "stream" in q:
            params.append(("stream", q["stream"]))
        params.sort(key=lambda kv: kv[0])  # url.Values.Encode
        base, _ = self.kubelet_url(node)
        target = f"/containerLogs/{_seg(ns)}/{_seg(name)}/{_seg(container)}"
        if params:
            target += "?" + urllib.parse.urlencode(params)
        self.requests.append(("GET", target))
        headers = {"User-Agent": "Go-http-client/1.1", "Accept-Encoding": "gzip"}
        async with aiohttp.ClientSession() as session, session.get(base + target, headers=headers,
                                                                    ssl=self.ssl) as upstream:
            if upstream.status != 200:
                text = (await upstream.read())[:4096].decode(errors="replace")
                raise errors.ApiError(errors.status(upstream.status, _reason(upstream.status), text.strip()))
            resp = web.StreamResponse(headers={"Content-Type": "text/plain",
                                               "Cache-Control": "no-cache, private"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    # -- pods/{name}/exec|attach|portforward -------------------------------------------------
    async def pod_stream(self, request: web.Request, user: User, ns: str, name: str, sub: str,
                         authorize: Any) -> web.StreamResponse:
        authorize(Attributes(user, "create", request.path, "pods", sub, "", ns, name))
        pod, node_name = self._pod_node(ns, name)
        base, node = self.kubelet_url(node_name)
        if request.headers.get("Upgrade", "").lower() != "websocket":
            raise errors.bad_request("Upgrade request required")
        passthrough = EXTEND_WEBSOCKETS in ((node.get("status") or {}).get("declaredFeatures") or [])
        protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        # a WebSocket without a tunneling protocol goes to the kubelet as it is (TranslatingHandler)
        tunnel = stream_tunnel.spdy_protocols(protocols) if sub == "portforward" and not passthrough else []
        path = f"/{_KUBELET_PATHS[sub]}/{_seg(ns)}/{_seg(name)}"
        if sub != "portforward":
            container = request.query.get("container", "")
            if not container:
                containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
                if len(containers) != 1:
                    raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                             f"[{' '.join(containers)}]")
                container = containers[0]
            path += f"/{_seg(container)}"
        query = _portforward_query(request.query) if sub == "portforward" else _stream_query(request.query)
        target = path + (f"?{query}" if query else "")
        translated = not passthrough and (sub != "portforward" or bool(tunnel))
        self.requests.append(("POST" if translated else "GET", target))
        if tunnel:
            return await self._tunnel(request, base, target, tunnel)
        if translated:
            return await self._translate(request, base, target, protocols)
        session = aiohttp.ClientSession()
        try:
            try:
                upstream = await session.ws_connect(base + target, protocols=protocols, ssl=self.ssl,
                                                    autoping=True, heartbeat=None, max_msg_size=0,
                                                    headers={"X-Forwarded-For": request.remote or ""})
            except aiohttp.WSServerHandshakeError as exc:
                raise errors.ApiError(errors.status(exc.status, _reason(exc.status), exc.message)) from None
            except (aiohttp.ClientConnectionError, TimeoutError) as exc:
                raise _unreachable(exc) from None
            client = web.WebSocketResponse(protocols=[upstream.protocol] if upstream.protocol else (),
                                           autoping=True, heartbeat=None, max_msg_size=0)
            await client.prepare(request)
            await _splice(client, upstream)
            return client
        finally:
            await session.close()


    async def _translate(self, request: web.Request, base: str, target: str,
                         protocols: list[str]) -> web.StreamResponse:
        """kubectl's v5 WebSocket to the kubelet's SPDY/3.1 (the StreamTranslator of a v1.36 API server)."""
        if spdy_translator.OFFERED[0] not in protocols:
            raise errors.bad_request(f"the WebSocket must offer {spdy_translator.OFFERED[0]} to be translated")
        where = urllib.parse.urlsplit(base)
        assert where.hostname is not None and where.port is not None
        try:
            client = await spdy_translator.connect(where.hostname, where.port, self.ssl, target)
        except spdy_translator.UpgradeRefused as exc:
            raise errors.ApiError(errors.status(exc.status, _reason(exc.status), exc.body)) from None
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise _unreachable(exc) from None
        ws = web.WebSocketResponse(protocols=(spdy_translator.OFFERED[0],), autoping=True, heartbeat=None,
                                   max_msg_size=0)
        await ws.prepare(request)
        q = request.query
        flags = {k: q.get(k, "") in ("true", "1") for k in ("stdin", "stdout", "stderr", "tty")}
        await spdy_translator.translate(ws, client, **flags)
        return ws


    async def _tunnel(self, request: web.Request, base: str, target: str,
                      protocols: list[str]) -> web.StreamResponse:
        """kubectl's port-forward tunnel unwrapped onto SPDY/3.1 (the TunnelingHandler of a v1.36 API server)."""
        where = urllib.parse.urlsplit(base)
        assert where.hostname is not None and where.port is not None
        try:
            kubelet = await spdy_translator.connect(where.hostname, where.port, self.ssl, target,
                                                    stream_tunnel.upgrade_headers(request, protocols))
        except spdy_translator.UpgradeRefused as exc:
            return web.Response(status=exc.status, text=exc.body)
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise _unreachable(exc) from None
        chosen = [SPDY_TUNNEL_PREFIX + kubelet.protocol] if kubelet.protocol else []
        ws = web.WebSocketResponse(protocols=chosen, autoping=True, heartbeat=None, max_msg_size=0)
        await ws.prepare(request)
        await stream_tunnel.splice(ws, kubelet.reader, kubelet.writer)
        return ws


async def _splice(client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> None:
    async def pump(src: Any, dst: Any) -> None:
        async for msg in src:
            if msg.type == aiohttp.WSMsgType.BINARY:
                await dst.send_bytes(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                await dst.send_str(msg.data)
            else:
                break
        if not dst.closed:
            code = src.close_code or aiohttp.WSCloseCode.OK
            await dst.close(code=code)

    tasks = [asyncio.create_task(pump(upstream, client)), asyncio.create_task(pump(client, upstream))]
    _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    # the other direction gets a moment to deliver the close, then stops
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 2.0)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    resp = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for k, v in upstream.headers.items():
        if k.lower() not in _HOP_BY_HOP:
            resp.headers.add(k, v)
    if upstream.headers.get("Content-Length") is None:
        resp.enable_chunked_encoding()
    else:
        resp.content_length = int(upstream.headers["Content-Length"])
    await resp.prepare(request)
    async for chunk in upstream.content.iter_any():
        await resp.write(chunk)
    await resp.write_eof()
    return resp


def _stream_query(query: Any) -> str:
    """PodExecOptions/PodAttachOptions as the API server sends them on (url.Values.Encode: keys sorted)."""
    params: dict[str, list[str]] = {}
    if query.getall("command", []):
        params["command"] = list(query.getall("command"))
    for ours, theirs in (("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty")):
        if query.get(ours, "") in ("true", "1"):
            params[theirs] = ["1"]
    return urllib.parse.urlencode([(k, v) for k in sorted(params) for v in params[k]])


def _portforward_query(query: Any) -> str:
    """PodPortForwardOptions: each of `ports` becomes a `port` (the form the kubelet reads)."""
    return urllib.parse.urlencode([("port", p) for p in query.getall("ports", [])])


def _seg(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _unreachable(exc: BaseException) -> errors.ApiError:
    return errors.ApiError(errors.status(503, "ServiceUnavailable", f"error trying to reach service: {exc}"))


def _reason(code: int) -> str:
    return {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound"}.get(code, "InternalError")

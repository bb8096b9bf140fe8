"""httpGet probes and httpGet lifecycle hooks: upstream's pkg/probe/http client, on h11 (minikubelet.base.http1).

As upstream: the request carries the spec's headers (names canonical as Go's http.Header), User-Agent
kube-probe/1.36 (kube-lifecycle/1.36 for hooks) and Accept */* unless given (an empty Accept sends none), a
Host header overrides the request's Host; HTTPS without certificate verification; redirects followed on the
same host name up to 10 requests, a redirect to another host answered as the last response (a probe: success
with a warning); at most 10 KiB of the body read; 200 <= status < 400 is success. A probe opens one connection
per request, sends `Connection: close` and closes with SO_LINGER 1 s (upstream's DisableKeepAlives and probe
dialer); a hook's client asks for gzip as Go's default transport does and reads the body only to drain it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

import h11

from minikubelet.base.http1 import URL, Connection, connect, header, insecure_tls, is_ip
from probes.addresses import join_host_port
from probes.result import MAX_OUTPUT_BYTES, ProbeOutcome, Result
from probes.tcp import describe_os_error

VERSION = "1.36"
USER_AGENT = f"kube-probe/{VERSION}"
HOOK_USER_AGENT = f"kube-lifecycle/{VERSION}"
MAX_REQUESTS = 10  # Go's client gives up when asked to follow the redirect after its 10th request.
_FOLLOWED_STATUSES = frozenset({301, 302, 303, 307, 308})
# Go writes these from the request's own fields, never from its Header map.
_NOT_FROM_HEADERS = frozenset({"host", "user-agent", "content-length", "transfer-encoding", "trailer"})
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# upstream's probe dialer: SO_LINGER {on, 1 s}, so frequent probes leave no TIME_WAIT sockets for 60 s.
_LINGER_1S = struct.pack("ii", 1, 1)
_MISMATCH_CHECK_TIMEOUT = 2.0  # the second look at a failed TLS handshake (within the caller's deadline too)


def canonical_name(name: str) -> str:
    """Go's textproto.CanonicalMIMEHeaderKey: "x-custom-header" -> "X-Custom-Header"; a name that is not a
    token stays as written."""
    if not name or any(c not in _TOKEN for c in name):
        return name
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


@dataclass(frozen=True)
class Headers:
    """A request's headers as Go's http.Header after NewRequestForHTTPGetAction: canonical names, values in
    order."""

    items: tuple[tuple[str, str], ...] = ()

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.items)

    def get(self, name: str) -> str:
        """The first value ("" when absent), as Header.Get."""
        return next((value for key, value in self.items if key == name), "")

    def without(self, name: str) -> Headers:
        return Headers(tuple(item for item in self.items if item[0] != name))

    def set(self, name: str, value: str) -> Headers:
        return Headers((*self.without(name).items, (name, value)))


def probe_url(scheme: str, host: str, port: int, path: str) -> URL:
    """Upstream's formatURL; raises ValueError for a path no URL can carry."""
    if path and not path.startswith("/"):
        path = "/" + path
    return URL.parse(f"{scheme.lower()}://{join_host_port(host, port)}{path or '/'}")


def probe_headers(http_headers: Iterable[tuple[str, str]], user_agent: str = USER_AGENT) -> Headers:
    """The spec's own (name, value) pairs, then the User-Agent and Accept upstream adds unless given."""
    headers = Headers(tuple((canonical_name(name), value) for name, value in http_headers))
    if not headers.has("User-Agent"):
        headers = headers.set("User-Agent", user_agent)
    if not headers.has("Accept"):
        headers = headers.set("Accept", "*/*")
    elif not headers.get("Accept"):
        headers = headers.without("Accept")  # An Accept set to "" means "send none", as upstream.
    return headers


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


class RequestError(Exception):
    """The request failed: the message is Go's url.Error text, `Get "<url>": <why>`."""


class SchemeMismatch(RequestError):
    """An https URL's server answered the TLS hello in plain HTTP (Go's http.ErrSchemeMismatch)."""


@dataclass
class Client:
    """One GET with upstream's RedirectChecker(false): a probe's client (`keep_alive` off) or a hook's."""

    keep_alive: bool = False
    connect_timeout: float | None = None  # None: the caller's overall deadline bounds connecting
    via: list[URL] = field(default_factory=list)  # the URLs requested so far (Go's `reqs`)

    async def get(self, url: URL, headers: Headers) -> Answer:
        """The final answer (at most MAX_OUTPUT_BYTES of its body); RequestError when the request fails."""
        custom_host = headers.get("Host")
        host = custom_host
        referer = ""
        current = url
        while True:
            self.via.append(current)
            status, location, body = await self._exchange(current, host, headers, referer)
            if status not in _FOLLOWED_STATUSES or not location:
                return Answer(status, body)
            try:
                target = current.join(location)
            except ValueError as err:
                raise RequestError(f"Get {_quote(current.text)}: failed to parse Location header "
                                   f"{_quote(location)}: {err}") from None
            # A custom Host survives a relative redirect only (Go's client, issue 22233).
            host = custom_host if custom_host != url.authority and not _is_absolute(location) else ""
            # Go's client sends the previous URL as Referer, unless the user set one or TLS is left.
            referer = headers.get("Referer") or ("" if current.tls and not target.tls else _without_user(current))
            if target.host != url.host:
                return Answer(status, body)  # Go's ErrUseLastResponse: this reply is judged.
            if len(self.via) >= MAX_REQUESTS:
                raise RequestError(f"Get {_quote(location)}: stopped after 10 redirects")
            current = target

    async def _exchange(self, url: URL, host: str, headers: Headers, referer: str) -> tuple[int, str, bytes]:
        try:
            async with asyncio.timeout(self.connect_timeout):
                conn = await connect(url, insecure_tls())
        except TimeoutError:
            raise RequestError(f"Get {_quote(url.text)}: dial tcp {join_host_port(url.host, url.port)}: "
                               "i/o timeout") from None
        except socket.gaierror as err:
            why = "no such host" if err.errno in (socket.EAI_NONAME, socket.EAI_NODATA) else err.strerror
            raise RequestError(f"Get {_quote(url.text)}: dial tcp: lookup {url.host}: {why}") from None
        except ssl.SSLError as err:
            if await _answers_plain_http(url):
                raise SchemeMismatch(f"Get {_quote(url.text)}: http: server gave HTTP response to HTTPS client") from None
            raise RequestError(f"Get {_quote(url.text)}: {err.strerror or err}") from None
        except OSError as err:
            raise RequestError(f"Get {_quote(url.text)}: dial tcp {join_host_port(url.host, url.port)}: connect: "
                               f"{describe_os_error(err)}") from None
        if not self.keep_alive:
            sock = conn.writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_1S)
        try:
            try:
                request = h11.Request(method="GET", target=url.target, headers=self._fields(url, host, headers, referer))
            except h11.LocalProtocolError as err:
                raise RequestError(f"Get {_quote(url.text)}: net/http: invalid header: {err}") from None
            try:
                await conn.send(request, h11.EndOfMessage())
                response = await conn.response()
                body = await _read_at_most(conn, MAX_OUTPUT_BYTES)
            except (h11.RemoteProtocolError, OSError) as err:
                raise RequestError(f"Get {_quote(url.text)}: {_describe(err)}") from None
            return response.status_code, header(response, b"location"), body
        finally:
            conn.close()

    def _fields(self, url: URL, host: str, headers: Headers, referer: str) -> list[tuple[str, str]]:
        fields = [("Host", host or url.authority)]
        if agent := headers.get("User-Agent"):
            fields.append(("User-Agent", agent))  # an empty User-Agent sends none, as Go
        if url.username is not None and not headers.has("Authorization"):
            token = base64.b64encode(f"{url.username}:{url.password}".encode()).decode()
            fields.append(("Authorization", f"Basic {token}"))
        names = sorted({name for name, _ in headers.items if name.lower() not in _NOT_FROM_HEADERS})
        if referer:
            names = sorted({*names, "Referer"})
        for name in names:
            if name == "Referer" and referer:
                fields.append((name, referer))
                continue
            fields.extend((name, value) for key, value in headers.items if key == name)
        if self.keep_alive:
            if not headers.has("Accept-Encoding"):
                fields.append(("Accept-Encoding", "gzip"))  # Go's transport asks for gzip unless told not to
        else:
            fields.append(("Connection", "close"))
        return fields


async def probe_http(url: URL, headers: Headers, timeout_s: float) -> ProbeOutcome:
    client = Client()
    try:
        async with asyncio.timeout(timeout_s):
            answer = await client.get(url, headers)
    except TimeoutError:
        current = client.via[-1] if client.via else url
        return ProbeOutcome(
            Result.FAILURE,
            f"Get {_quote(current.text)}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        )
    except RequestError as err:
        return ProbeOutcome(Result.FAILURE, str(err))
    return _judge(answer.status, answer.body)


def _judge(status: int, body: bytes) -> ProbeOutcome:
    text = body.decode("utf-8", errors="replace")
    if 200 <= status < 300:
        return ProbeOutcome(Result.SUCCESS, text)
    if 300 <= status < 400:
        return ProbeOutcome(Result.SUCCESS, f"Probe terminated redirects, Response body: {text}", warning=True)
    # Upstream keeps the body out of this user-visible message on purpose.
    return ProbeOutcome(Result.FAILURE, f"HTTP probe failed with statuscode: {status}")


async def _read_at_most(conn: Connection, limit: int) -> bytes:
    """Upstream's ReadAtMost: past the limit the rest is left unread (the connection is closed after)."""
    data = bytearray()
    while len(data) < limit:
        chunk = await conn.chunk()
        if not chunk:
            break
        data += chunk
    return bytes(data[:limit])


async def _answers_plain_http(url: URL) -> bool:
    """Go's rule for ErrSchemeMismatch: the server's reply to the TLS hello starts with "HTTP/". Python's TLS
    layer does not show those bytes, so on a failed handshake a second connection sends the same hello and
    reads them (only on this failure path)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = insecure_tls().wrap_bio(incoming, outgoing, server_hostname=None if is_ip(url.host) else url.host)
    try:
        hello.do_handshake()
    except ssl.SSLWantReadError:
        pass
    try:
        async with asyncio.timeout(_MISMATCH_CHECK_TIMEOUT):
            reader, writer = await asyncio.open_connection(url.host, url.port)
            try:
                writer.write(outgoing.read())
                return await reader.readexactly(5) == b"HTTP/"
            finally:
                writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False


def _is_absolute(location: str) -> bool:
    """Go's url.URL.IsAbs: the reference has a scheme."""
    scheme, colon, _ = location.partition(":")
    return bool(colon) and bool(scheme) and scheme[0].isalpha() and all(c.isalnum() or c in "+-." for c in scheme)


def _without_user(url: URL) -> str:
    if url.username is None:
        return url.text
    scheme, _, rest = url.text.partition("://")
    return f"{scheme}://{rest.partition('@')[2]}"


def _describe(err: Exception) -> str:
    if isinstance(err, OSError) and err.errno:
        return f"read: {describe_os_error(err)}"
    return str(err) or type(err).__name__


def _quote(text: str) -> str:
    return json.dumps(text)

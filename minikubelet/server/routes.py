"""Framework-neutral HTTP handlers: a `Request` (method, path, query, headers, body) in, a `Response` out.

Every port (read-only, healthz and the 10250 API) serves them with the h11 listener (`listener.py`). A handler
may also answer with a `Streamed` body (chunked, or of a known length) or take the connection over after a 101
(`Upgrade`: SPDY/3.1 and WebSocket streams). No HTTP library here.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl


class Headers:
    """Case-insensitive request headers; `get` returns the first value, as aiohttp's and Go's Header.Get."""

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, list[str]] = {}
        for name, value in items:
            self._items.setdefault(name.lower(), []).append(value)

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._items.get(name.lower())
        return values[0] if values else default

    def getall(self, name: str) -> list[str]:
        return list(self._items.get(name.lower(), []))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def lists(self) -> dict[str, list[str]]:
        """Lowercase name -> every value, in order."""
        return {k: list(v) for k, v in self._items.items()}


class Query:
    """The parsed query string: repeated keys kept in order, `?flag` present with the value ""."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self._pairs = list(pairs)

    @classmethod
    def parse(cls, query: str) -> Query:
        return cls(parse_qsl(query, keep_blank_values=True))

    def get(self, key: str, default: str | None = None) -> str | None:
        return next((v for k, v in self._pairs if k == key), default)

    def getall(self, key: str) -> list[str]:
        return [v for k, v in self._pairs if k == key]

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self._pairs)

    def lists(self) -> dict[str, list[str]]:
        """Each key (in first-seen order) -> its values."""
        out: dict[str, list[str]] = {}
        for k, v in self._pairs:
            out.setdefault(k, []).append(v)
        return out


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # percent-decoded, without the query
    query: Query = field(default_factory=Query)
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""
    params: Mapping[str, str] = field(default_factory=dict)  # the route pattern's `{name}` segments
    raw_path: str = ""  # the request target as sent, query included ("" : the path)
    peer_certificate: bytes | None = None  # the TLS client certificate (DER), if one was presented

    def form(self) -> Query:
        """The query and, for a urlencoded POST body, its fields (Go's ParseForm reads both)."""
        pairs = list(self.query._pairs)
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if self.method == "POST" and ctype == "application/x-www-form-urlencoded":
            pairs += parse_qsl(self.body.decode("latin-1"), keep_blank_values=True)
        return Query(pairs)


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str | None = None  # None: no Content-Type header
    headers: Mapping[str, str] = field(default_factory=dict)
    repeated: tuple[tuple[str, str], ...] = ()  # headers sent after `headers`, a name may repeat

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode(), "text/plain; charset=utf-8")

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(data).encode(), "application/json; charset=utf-8")

    @classmethod
    def error(cls, status: int) -> Response:
        return cls.text(f"{status}: {HTTPStatus(status).phrase}", status)

    def gzipped(self) -> Response:
        return Response(self.status, gzip_body(self.body), self.content_type,
                        {**self.headers, "Content-Encoding": "gzip"}, self.repeated)


def gzip_body(body: bytes) -> bytes:
    # Level 6 and no timestamp: aiohttp's default level, and the same bytes for the same body.
    return gzip.compress(body, compresslevel=6, mtime=0)


def accepts_gzip(request: Request) -> bool:
    return "gzip" in (request.headers.get("Accept-Encoding") or "")


Write = Callable[[bytes], Awaitable[None]]


@dataclass(frozen=True)
class Streamed:
    """A response whose body `produce` writes as it goes: chunked, or with `length` its Content-Length. Writes
    raise ConnectionError once the client is gone; `finish` runs when the response ended, however it did."""

    produce: Callable[[Write], Awaitable[None]]
    status: int = 200
    content_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    length: int | None = None
    finish: Callable[[], None] | None = None


class ByteReader:
    """The read side of a connection taken over after a 101 (what the client sent after its request first)."""

    async def read(self, n: int) -> bytes:
        raise NotImplementedError


class ByteWriter:
    """The write side: `drain` waits while the client does not read (bounded by the listener's write deadline)."""

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    async def drain(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Upgrade:
    """Switch protocols: the listener answers 101 with `headers`, then `serve` has the connection until it returns
    (the listener closes it then); `finish` runs when it ended, however it did."""

    serve: Callable[[ByteReader, ByteWriter], Awaitable[None]]
    headers: tuple[tuple[str, str], ...] = ()
    finish: Callable[[], None] | None = None


Answer = Response | Streamed | Upgrade
Handler = Callable[[Request], Awaitable[Answer]]


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]  # empty: any method
    path: str  # a `{name}` segment matches one non-empty segment
    handler: Handler
    prefix: bool = False  # `path` is a prefix (as aiohttp's "/stats/{rest:.*}")

    def match(self, path: str) -> dict[str, str] | None:
        if self.prefix:
            return {} if path.startswith(self.path) else None
        if "{" not in self.path:
            return {} if path == self.path else None
        want, got = self.path.split("/"), path.split("/")
        if len(want) != len(got):
            return None
        params: dict[str, str] = {}
        for w, g in zip(want, got, strict=True):
            if w.startswith("{") and w.endswith("}"):
                if not g:
                    return None
                params[w[1:-1]] = g
            elif w != g:
                return None
        return params

    def matches_path(self, path: str) -> bool:
        return self.match(path) is not None

    def allows(self, method: str) -> bool:
        return not self.methods or method in self.methods


class Routes:
    """An ordered route table: the first route matching path and method answers; a path matched only with
    other methods gets 405 with Allow, an unknown path 404 (as aiohttp's router, which served these before)."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def get(self, path: str, handler: Handler) -> None:
        # GET routes answer HEAD too, without the body (aiohttp's add_get, Go's ServeMux).
        self.routes.append(Route(frozenset({"GET", "HEAD"}), path, handler))

    def add(self, methods: Iterable[str], path: str, handler: Handler, *, prefix: bool = False) -> None:
        self.routes.append(Route(frozenset(methods), path, handler, prefix))

    def extend(self, other: Routes) -> None:
        self.routes.extend(other.routes)

    def resolve(self, method: str, path: str) -> Handler | Response:
        found = self.lookup(method, path)
        return found if isinstance(found, Response) else found[0]

    def lookup(self, method: str, path: str) -> tuple[Handler, dict[str, str]] | Response:
        """The handler and the pattern's parameters, or the 404/405 answer."""
        allowed: set[str] = set()
        for route in self.routes:
            params = route.match(path)
            if params is None:
                continue
            if route.allows(method):
                return route.handler, params
            allowed |= route.methods
        if allowed:
            return Response(405, b"405: Method Not Allowed", "text/plain; charset=utf-8",
                            {"Allow": ",".join(sorted(allowed))})
        return Response.error(404)

    async def dispatch(self, request: Request) -> Answer:
        found = self.lookup(request.method, request.path)
        if isinstance(found, Response):
            return found
        handler, params = found
        return await handler(replace(request, params=params) if params else request)

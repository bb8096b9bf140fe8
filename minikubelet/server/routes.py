"""Framework-neutral HTTP handlers: a `Request` (method, path, query, headers, body) in, a `Response` out.

The read-only and healthz ports serve them with the h11 listener (`listener.py`); the 10250 API, which stays
on aiohttp for its streams, serves the same handlers through `aiohttp_routes.py`. No HTTP library here.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # percent-decoded, without the query
    query: Query = field(default_factory=Query)
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""

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
                        {**self.headers, "Content-Encoding": "gzip"})


def gzip_body(body: bytes) -> bytes:
    # Level 6 and no timestamp: aiohttp's default level, and the same bytes for the same body.
    return gzip.compress(body, compresslevel=6, mtime=0)


def accepts_gzip(request: Request) -> bool:
    return "gzip" in (request.headers.get("Accept-Encoding") or "")


Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]  # empty: any method
    path: str
    handler: Handler
    prefix: bool = False  # `path` is a prefix (as aiohttp's "/stats/{rest:.*}")

    def matches_path(self, path: str) -> bool:
        return path.startswith(self.path) if self.prefix else path == self.path

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
        allowed: set[str] = set()
        for route in self.routes:
            if not route.matches_path(path):
                continue
            if route.allows(method):
                return route.handler
            allowed |= route.methods
        if allowed:
            return Response(405, b"405: Method Not Allowed", "text/plain; charset=utf-8",
                            {"Allow": ",".join(sorted(allowed))})
        return Response.error(404)

    async def dispatch(self, request: Request) -> Response:
        found = self.resolve(request.method, request.path)
        if isinstance(found, Response):
            return found
        return await found(request)

"""The Docker Engine API client: JSON requests, streamed responses and hijacked stdio over HTTP/1.1
(h11) on the Engine's socket, speaking in `cri.errors`.

Paths are pinned to the Engine's own API version (`/v1.xx/...`, read once from `GET /version`), so
answers have the shape of the daemon actually running.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import urlencode

import h11

from cri.docker import connection
from cri.docker.connection import READ_SIZE, Connection, Endpoint
from cri.docker.connection_pool import ConnectFailed, ConnectionPool
from cri.docker.hijack import RawStream
from cri.errors import NotFoundError, RuntimeError_, RuntimeUnavailableError
from minikubelet.base.http1 import header

Params = Mapping[str, str | int | bool]
# A progress or event line longer than this is not Docker talking.
MAX_LINE = 1024 * 1024


class DockerAPIError(RuntimeError_):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@contextmanager
def translate_errors(kind: type[RuntimeError_] = DockerAPIError) -> Iterator[None]:
    """404 -> NotFoundError, unreachable daemon -> RuntimeUnavailableError, else `kind`."""
    try:
        yield
    except DockerAPIError as exc:
        if exc.status == 404:
            raise NotFoundError(exc.message) from exc
        if kind is DockerAPIError:
            raise
        raise kind(exc.message) from exc
    except ConnectFailed as exc:
        raise RuntimeUnavailableError(str(exc)) from exc
    except (ConnectionError, FileNotFoundError, asyncio.IncompleteReadError) as exc:
        raise RuntimeUnavailableError(f"Docker Engine unreachable: {exc}") from exc
    except h11.ProtocolError as exc:
        raise RuntimeUnavailableError(f"Docker Engine connection broke: {exc}") from exc


def label_filters(labels: Mapping[str, str], must_have: tuple[str, ...] = ()) -> str:
    return json.dumps({"label": [*must_have, *(f"{key}={value}" for key, value in labels.items())]})


def _query(params: Params | None) -> str:
    if not params:
        return ""
    # As the Docker CLI: booleans as 1/0, numbers in decimal.
    values = {k: ("1" if v else "0") if isinstance(v, bool) else str(v) for k, v in params.items()}
    return "?" + urlencode(values)


def _encode(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def _error(status: int, content_type: str, body: bytes) -> DockerAPIError:
    text = body.decode("utf-8", "replace")
    if content_type.startswith("application/json"):
        try:
            message = json.loads(text).get("message", text)
        except (ValueError, AttributeError):
            message = text
        return DockerAPIError(status, str(message))
    return DockerAPIError(status, text.strip())


def _decode(content_type: str, body: bytes) -> Any:
    if not body:
        return ""
    if "json" in content_type:
        return json.loads(body)
    return body.decode("utf-8", "replace")


class Body:
    """A streamed response body, read as the caller goes (chunks, JSON lines, or all of it)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.complete = False

    async def chunk(self) -> bytes:
        """The next piece of the body (at most one socket read); b"" at its end."""
        if self.complete:
            return b""
        data = await self._conn.chunk()
        self.complete = not data  # EndOfMessage (or the Engine closed a read-until-close body)
        return data

    async def iter_chunked(self, size: int = READ_SIZE) -> AsyncIterator[bytes]:
        while chunk := await self.chunk():
            for start in range(0, len(chunk), size):
                yield chunk[start : start + size]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """Lines, newline included; a last line without one is still given."""
        pending = bytearray()
        while chunk := await self.chunk():
            pending.extend(chunk)
            start = 0
            while (end := pending.find(b"\n", start)) >= 0:
                yield bytes(pending[start : end + 1])
                start = end + 1
            del pending[:start]
            if len(pending) > MAX_LINE:
                raise ValueError(f"Docker Engine sent a line longer than {MAX_LINE} bytes")
        if pending:
            yield bytes(pending)


class StreamResponse:
    def __init__(self, status: int, headers: Mapping[str, str], conn: Connection) -> None:
        self.status = status
        self.headers = headers
        self.content = Body(conn)

    async def read(self) -> bytes:
        data = bytearray()
        async for chunk in self.content.iter_chunked():
            data.extend(chunk)
        return bytes(data)


class DockerClient:
    def __init__(self, endpoint: str, connect_timeout: float = 10.0) -> None:
        """`endpoint`: unix:///path/to/docker.sock, or tcp://host:port (plain HTTP).
        No total timeout: waits, pulls, event and exec streams are legitimately long."""
        self.pool = ConnectionPool(Endpoint.parse(endpoint), connect_timeout)
        self._prefix = ""
        self._version_lock = asyncio.Lock()
        self.requests = 0  # bounded requests sent over the client's life (tests and profiles read it)

    async def close(self) -> None:
        self.pool.close()

    async def _api_prefix(self) -> str:
        if not self._prefix:
            async with self._version_lock:
                if not self._prefix:
                    version = await self._exchange("GET", "/version", b"", {})
                    self._prefix = f"/v{version['ApiVersion']}/"
        return self._prefix

    async def _target(self, path: str, params: Params | None) -> str:
        return await self._api_prefix() + path.lstrip("/") + _query(params)

    @staticmethod
    def _request(method: str, target: str, body: bytes, headers: Mapping[str, str]) -> h11.Request:
        all_headers = {"Host": "docker", "Content-Type": "application/json", **headers}
        if body or method in ("POST", "PUT"):
            all_headers["Content-Length"] = str(len(body))
        return h11.Request(method=method, target=target, headers=list(all_headers.items()))

    async def _exchange_raw(self, method: str, target: str, body: bytes, headers: Mapping[str, str]) -> tuple[str, bytes]:
        """(content type, body) of a successful answer; an error answer raises."""
        self.requests += 1
        async with self.pool.request_slot() as conn:
            await conn.send(self._request(method, target, body, headers), h11.Data(data=body), h11.EndOfMessage())
            response = await conn.next_event()
            if not isinstance(response, h11.Response):
                raise h11.RemoteProtocolError(f"unexpected {type(response).__name__} from the Engine")
            data = await conn.body(connection.MAX_BODY)
        content_type = header(response, b"content-type")
        if response.status_code >= 400:
            raise _error(response.status_code, content_type, data)
        return content_type, data

    async def _exchange(self, method: str, target: str, body: bytes, headers: Mapping[str, str]) -> Any:
        return _decode(*await self._exchange_raw(method, target, body, headers))

    async def request(
        self, method: str, path: str, body: Any = None, params: Params | None = None,
        headers: Mapping[str, str] | None = None, kind: type[RuntimeError_] = DockerAPIError,
    ) -> Any:
        """One request with a bounded answer, decoded (JSON, text, or "" when empty)."""
        with translate_errors(kind):
            return await self._exchange(method, await self._target(path, params), _encode(body), headers or {})

    async def get(self, path: str, params: Params | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def get_bytes(self, path: str, params: Params | None = None) -> bytes:
        """The undecoded body, for a caller that can tell from the bytes whether it needs decoding at all."""
        with translate_errors():
            _, data = await self._exchange_raw("GET", await self._target(path, params), b"", {})
            return data

    async def post(
        self,
        path: str,
        body: Any = None,
        params: Params | None = None,
        kind: type[RuntimeError_] = DockerAPIError,
    ) -> Any:
        return await self.request("POST", path, body, params, kind=kind)

    async def delete(self, path: str, params: Params | None = None) -> Any:
        return await self.request("DELETE", path, params=params)

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        method: str = "GET",
        params: Params | None = None,
        headers: Mapping[str, str] | None = None,
        kind: type[RuntimeError_] = DockerAPIError,
        body: bytes = b"",
    ) -> AsyncIterator[StreamResponse]:
        """A response whose body is read as it comes (events, pull progress, logs, archives); errors
        (status >= 400) are raised before the body is handed out."""
        with translate_errors(kind):
            target = await self._target(path, params)
            conn = await self.pool.take()
            try:
                await conn.send(self._request(method, target, body, headers or {}), h11.Data(data=body),
                                h11.EndOfMessage())
                response = await conn.next_event()
                if not isinstance(response, h11.Response):
                    raise h11.RemoteProtocolError(f"unexpected {type(response).__name__} from the Engine")
                content_type = header(response, b"content-type")
                if response.status_code >= 400:
                    raise _error(response.status_code, content_type, await conn.body(connection.MAX_BODY))
            except BaseException:
                conn.close()
                raise
        result = StreamResponse(response.status_code, {"content-type": content_type}, conn)
        try:
            with translate_errors(kind):
                yield result
        except BaseException:
            conn.close()
            raise
        # Read to its end, the connection can serve the next request; cut short, it cannot.
        if result.content.complete:
            self.pool.give_back(conn)
        else:
            conn.close()

    async def hijack(self, path: str, body: Any = None, params: Params | None = None, *, tty: bool) -> RawStream:
        """POST with `Upgrade: tcp`: the Engine answers 101 (or 200 from old daemons) and the connection
        becomes the process's stdio. The socket is the caller's from then on."""
        with translate_errors():
            target = await self._target(path, params)
            data = _encode(body)
            conn = await self.pool.connect()
            try:
                request = self._request("POST", target, data, {"Connection": "Upgrade", "Upgrade": "tcp"})
                await conn.send(request, h11.Data(data=data), h11.EndOfMessage())
                response = await conn.next_event()
                if isinstance(response, h11.InformationalResponse) and response.status_code == 101:
                    head, _ = conn.http.trailing_data
                elif isinstance(response, h11.Response) and response.status_code >= 400:
                    body = await conn.body(connection.MAX_BODY)
                    raise _error(response.status_code, header(response, b"content-type"), body)
                elif isinstance(response, h11.Response):
                    head = _buffered_body(conn)
                else:
                    raise h11.RemoteProtocolError(f"unexpected {type(response).__name__} to a hijack")
            except BaseException:
                conn.close()
                raise
        return RawStream(conn.reader, conn.writer, tty, bytes(head))


def _buffered_body(conn: Connection) -> bytes:
    """What h11 already holds past a 200 answer's head (the body runs until close: raw stdio)."""
    data = bytearray()
    while isinstance(event := conn.http.next_event(), h11.Data):
        data.extend(event.data)
    return bytes(data)

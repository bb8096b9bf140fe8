"""A thin JSON client for the API server (client-go's rest.Client, for what a kubelet sends), on HTTP/1.1
through h11 (kubeapi.transport): no aiohttp in the agent's process.

Objects stay JSON dicts, so fields this agent does not know survive a read-modify-write. Every answer
is bounded: the body size (`max_body`), a watch line (`max_line`), and the time of each request.
Requests pass a token bucket first (client-go's flowcontrol: `kubeAPIQPS`/`kubeAPIBurst`); 429 and
5xx answers are retried with backoff, honouring Retry-After (capped, so a server cannot park us).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import h11

from minikubelet.base.clock import Clock
from minikubelet.base.http1 import ConnectFailed
from minikubelet.kubeapi import client_metrics
from minikubelet.kubeapi.kubeconfig import ClientConfig, ExecPlugin, KubeconfigError, ssl_context
from minikubelet.kubeapi.transport import Response, Transport

log = logging.getLogger("minikubelet.kubeapi")
Json = dict[str, Any]

DEFAULT_MAX_BODY = 32 << 20
DEFAULT_MAX_LINE = 16 << 20
MAX_RETRY_AFTER = 30.0
MAX_TOKEN_FILE = 64 << 10
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class ApiError(Exception):
    """A non-2xx answer; `status` is the Status body when the server sent one (metav1.Status)."""

    def __init__(self, code: int, status: Json | None = None, retry_after: float | None = None) -> None:
        self.code = code
        self.status = status or {}
        self.retry_after = retry_after
        super().__init__(f"{code} {self.reason}: {self.message}")

    @property
    def reason(self) -> str:
        return str(self.status.get("reason") or "")

    @property
    def message(self) -> str:
        return str(self.status.get("message") or "")

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def conflict(self) -> bool:
        return self.code == 409 and self.reason != "AlreadyExists"

    @property
    def forbidden(self) -> bool:
        return self.code == 403

    @property
    def gone(self) -> bool:
        return self.code == 410


class TransportError(Exception):
    """No usable answer: connection refused or cut, a timeout, an answer larger than allowed, not JSON."""


class ConnectError(TransportError):
    """No connection at all (refused, unreachable): not retried in place, as client-go retries a GET only after a
    connection reset or an EOF; the caller's own loop (lease backoff, status period, reflector) tries again."""


class TokenBucket:
    """client-go's token bucket rate limiter: `burst` tokens, refilled at `qps` per second; starts full."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.clock = clock
        self._tokens = float(self.burst)
        self._last = clock.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self.clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            self._refill()
            self._tokens -= 1.0
            if self._tokens >= 0.0:
                return
            # Reserved (as x/time/rate): the token is this caller's once the shortfall has refilled, without a
            # check after the wait, which float rounding can fail by a hair at every wake while no time passes.
            try:
                await self.clock.sleep(-self._tokens / self.qps)
            except asyncio.CancelledError:
                self._tokens += 1.0  # not taken: the reservation is given back
                raise


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base: float = 0.5
    cap: float = 10.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return float(min(max(retry_after, 0.0), MAX_RETRY_AFTER))
        return min(self.cap, self.base * 2.0**attempt) * (0.5 + random.random() / 2)


def user_agent(version: str) -> str:
    machine = os.uname().machine
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return f"minikubelet/{version} (linux/{arch})"


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(int(value))
    except ValueError:
        return None


def _parse_status(raw: bytes) -> Json | None:
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == "Status" else None


class RestClient:
    def __init__(self, config: ClientConfig, clock: Clock, *, qps: float = 50, burst: int = 100,
                 agent: str = "minikubelet", timeout: float = 30.0, max_body: int = DEFAULT_MAX_BODY,
                 max_line: int = DEFAULT_MAX_LINE, retry: RetryPolicy | None = None) -> None:
        self.config = config
        self.clock = clock
        self.limiter = TokenBucket(qps, burst, clock)
        self.agent = agent
        self.timeout = timeout
        self.max_body = max_body
        self.max_line = max_line
        self.retry = retry or RetryPolicy()
        self._exec = ExecPlugin(config.exec, clock) if config.exec is not None else None
        self._transport: Transport | None = None
        self._token_cache: tuple[float, str] = (-1.0, "")

    # ---------------------------------------------------------------- transport
    async def _ssl(self) -> ssl.SSLContext | None:
        if not self.config.server.startswith("https://"):
            return None
        if self._exec is not None and not self.config.has_client_certificate:
            cred = await self._exec.credential()
            if cred.cert_pem:
                return ssl_context(self.config, cred.cert_pem, cred.key_pem)
        return ssl_context(self.config)

    async def _get_transport(self) -> Transport:
        if self._transport is None:
            ctx = await self._ssl()
            try:
                self._transport = Transport(self.config.server, ctx, tls_server_name=self.config.tls_server_name,
                                            connect_timeout=self.timeout)
            except ValueError as e:
                raise TransportError(str(e)) from None
        return self._transport

    async def reload(self) -> None:
        """Forget the connections: the next request uses the client certificate on disk now (rotation).
        Open watches are cut too, so they reconnect with it (client-go closes every connection on rotation)."""
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    async def close(self) -> None:
        await self.reload()

    def _bearer_token(self) -> str:
        if self.config.token:
            return self.config.token
        if self.config.token_file:
            try:
                mtime = os.stat(self.config.token_file).st_mtime
                if mtime != self._token_cache[0]:
                    with open(self.config.token_file, "rb") as f:
                        self._token_cache = (mtime, f.read(MAX_TOKEN_FILE).decode().strip())
            except OSError as e:
                raise TransportError(f"cannot read tokenFile {self.config.token_file}: {e}") from None
            return self._token_cache[1]
        return ""

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip", "User-Agent": self.agent}
        if content_type:
            headers["Content-Type"] = content_type
        token = self._bearer_token()
        if not token and self._exec is not None and not self.config.has_client_certificate:
            try:
                token = (await self._exec.credential()).token
            except (KubeconfigError, OSError) as e:
                raise TransportError(str(e)) from None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        return self.config.server + path + (f"?{urlencode(query)}" if query else "")

    @staticmethod
    def _retried(method: str, url: str, code: str) -> None:
        if (m := client_metrics.recorder()) is not None:
            m.retries.labels(code, method, client_metrics.host_of(url)).inc()

    async def _throttle(self, method: str, url: str) -> None:
        t0 = time.monotonic()
        await self.limiter.acquire()
        if (m := client_metrics.recorder()) is not None:
            m.rate_limiter.labels(method, client_metrics.host_of(url)).observe(time.monotonic() - t0)

    async def _once(self, method: str, url: str, data: bytes | None, content_type: str | None,
                    timeout: float) -> tuple[int, bytes, float | None]:
        t0 = time.monotonic()
        try:
            code, raw, retry_after = await self._attempt(method, url, data, content_type, timeout)
        except TransportError:
            self._record(method, url, client_metrics.ERROR_CODE, t0, data, None)
            raise
        self._record(method, url, str(code), t0, data, len(raw))
        return code, raw, retry_after

    @staticmethod
    def _record(method: str, url: str, code: str, t0: float, data: bytes | None, received: int | None) -> None:
        if (m := client_metrics.recorder()) is not None:
            m.request(method, client_metrics.host_of(url), code, time.monotonic() - t0, len(data or b""), received)

    async def _attempt(self, method: str, url: str, data: bytes | None, content_type: str | None,
                       timeout: float) -> tuple[int, bytes, float | None]:
        transport = await self._get_transport()
        headers = await self._headers(content_type if data is not None else None)
        try:
            async with asyncio.timeout(timeout):
                response, raw = await transport.request(method, self._target(url), headers, data, self.max_body)
            return response.status, raw, _retry_after(response.header("Retry-After"))
        except ConnectFailed as e:
            raise ConnectError(f"{method} {url}: {e}") from None
        except TimeoutError:
            raise TransportError(f"{method} {url}: no answer within {timeout:g}s") from None
        except (h11.ProtocolError, ssl.SSLError, OSError) as e:
            raise TransportError(f"{method} {url}: {_describe(e)}") from None

    def _target(self, url: str) -> str:
        return url[len(self.config.server):]

    async def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                      body: object = None, content_type: str = "application/json",
                      timeout: float | None = None) -> Json:
        """One API call; the decoded answer, or ApiError / TransportError after the retries."""
        return (await self.request_with_code(method, path, query=query, body=body, content_type=content_type,
                                             timeout=timeout))[1]

    async def request_with_code(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                                body: object = None, content_type: str = "application/json",
                                timeout: float | None = None) -> tuple[int, Json]:
        """request(), with the answer's status code."""
        url = self.url(path, query)
        data = json.dumps(body).encode() if body is not None else None
        attempt = 0
        reauthenticated = False
        while True:
            await self._throttle(method, url)
            try:
                code, raw, retry_after = await self._once(method, url, data, content_type, timeout or self.timeout)
            except TransportError as e:
                # Only reads are repeated after a cut connection: a write may have happened.
                if method != "GET" or isinstance(e, ConnectError) or attempt + 1 >= self.retry.attempts:
                    raise
                self._retried(method, url, client_metrics.ERROR_CODE)
                await self.clock.sleep(self.retry.delay(attempt, None))
                attempt += 1
                continue
            if 200 <= code < 300:
                try:
                    doc = json.loads(raw) if raw else {}
                except ValueError:
                    raise TransportError(f"{method} {path}: answer is not JSON") from None
                if not isinstance(doc, dict):
                    raise TransportError(f"{method} {path}: answer is not a JSON object")
                return code, doc
            if code == 401 and self._exec is not None and not reauthenticated:
                self._exec.invalidate()
                await self.reload()
                reauthenticated = True
                continue
            error = ApiError(code, _parse_status(raw), retry_after)
            if code not in _RETRY_STATUS or attempt + 1 >= self.retry.attempts:
                raise error
            delay = self.retry.delay(attempt, retry_after)
            log.info("API server asked to retry", extra={"kv": {"method": method, "path": path, "code": code,
                                                                  "delay": round(delay, 3)}})
            self._retried(method, url, str(code))
            await self.clock.sleep(delay)
            attempt += 1

    # ---------------------------------------------------------------- verbs
    async def get(self, path: str, query: Mapping[str, str] | None = None, timeout: float | None = None) -> Json:
        return await self.request("GET", path, query=query, timeout=timeout)

    async def create(self, path: str, body: Json, timeout: float | None = None) -> Json:
        return await self.request("POST", path, body=body, timeout=timeout)

    async def update(self, path: str, body: Json, timeout: float | None = None) -> Json:
        return await self.request("PUT", path, body=body, timeout=timeout)

    async def patch(self, path: str, body: Json, *, strategic: bool = True, timeout: float | None = None) -> Json:
        ctype = "application/strategic-merge-patch+json" if strategic else "application/merge-patch+json"
        return await self.request("PATCH", path, body=body, content_type=ctype, timeout=timeout)

    async def delete(self, path: str, body: Json | None = None, timeout: float | None = None) -> Json:
        return await self.request("DELETE", path, body=body, timeout=timeout)

    # ---------------------------------------------------------------- streams
    @contextlib.asynccontextmanager
    async def stream_lines(self, path: str, query: Mapping[str, str], idle_timeout: float) -> AsyncIterator[
            AsyncIterator[bytes]]:
        """A watch: the answer's lines (each at most `max_line` bytes), ended by the server or `idle_timeout`
        without a byte. A non-200 answer raises ApiError, like a request."""
        url = self.url(path, query)
        await self._throttle("GET", url)
        recorder, host = client_metrics.recorder(), client_metrics.host_of(url)
        transport = await self._get_transport()
        headers = await self._headers(None)
        try:
            async with transport.stream(self._target(url), headers, idle_timeout) as resp:
                if recorder is not None:
                    recorder.requests.labels(str(resp.status), "GET", host).inc()
                if resp.status != 200:
                    async with asyncio.timeout(self.timeout):
                        raw = await resp.read(self.max_body)
                    raise ApiError(resp.status, _parse_status(raw), _retry_after(resp.header("Retry-After")))
                yield self._lines(resp, idle_timeout)
        except ConnectFailed as e:
            if recorder is not None:
                recorder.requests.labels(client_metrics.ERROR_CODE, "GET", host).inc()
            raise TransportError(f"watch {path}: {e}") from None
        except TimeoutError:
            raise TransportError(f"watch {path}: silent for {idle_timeout:g}s") from None
        except (h11.ProtocolError, ssl.SSLError, OSError) as e:
            raise TransportError(f"watch {path}: {_describe(e)}") from None

    async def _lines(self, resp: Response, idle_timeout: float) -> AsyncIterator[bytes]:
        buffer = bytearray()
        async for chunk in resp.pieces(idle_timeout):
            buffer += chunk
            while (nl := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:nl])
                del buffer[:nl + 1]
                if len(line) > self.max_line:
                    break
                if line.strip():
                    yield line
            else:
                if len(buffer) <= self.max_line:
                    continue
            raise TransportError(f"watch line longer than {self.max_line} bytes")
        if buffer.strip():
            yield bytes(buffer)


def _describe(e: BaseException) -> str:
    return str(e) or type(e).__name__

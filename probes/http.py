"""httpGet probes, as upstream pkg/probe/http: 200 <= status < 400, same-host redirects only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from multidict import CIMultiDict
from yarl import URL

from probes.addresses import join_host_port
from probes.result import MAX_OUTPUT_BYTES, ProbeOutcome, Result
from probes.tcp import describe_os_error

if TYPE_CHECKING:
    import aiohttp

USER_AGENT = "kube-probe/1.36"
MAX_REQUESTS = 10  # Go's client gives up when asked to follow the redirect after its 10th request.
_FOLLOWED_STATUSES = frozenset({301, 302, 303, 307, 308})


def probe_url(scheme: str, host: str, port: int, path: str) -> URL:
    if path and not path.startswith("/"):
        path = "/" + path
    return URL(f"{scheme.lower()}://{join_host_port(host, port)}{path or '/'}")


def probe_headers(http_headers: Iterable[tuple[str, str]]) -> CIMultiDict[str]:
    """The request headers: the spec's own (name, value) pairs, then kube-probe's User-Agent and Accept unless given."""
    headers: CIMultiDict[str] = CIMultiDict()
    for name, value in http_headers:
        headers.add(name, value)
    if "User-Agent" not in headers:
        headers["User-Agent"] = USER_AGENT
    if "Accept" not in headers:
        headers["Accept"] = "*/*"
    elif not headers.get("Accept"):
        del headers["Accept"]  # An Accept set to "" means "send none", as upstream.
    return headers


async def probe_http(url: URL, headers: CIMultiDict[str], timeout_s: float) -> ProbeOutcome:
    try:
        async with asyncio.timeout(timeout_s):
            return await _get_following_redirects(url, headers)
    except TimeoutError:
        return ProbeOutcome(
            Result.FAILURE,
            f"Get {_quote(url)}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        )


async def _get_following_redirects(url: URL, headers: CIMultiDict[str]) -> ProbeOutcome:
    # Upstream disables transparent compression and sends Accept only as probe_headers decided.
    import aiohttp  # only a pod with an httpGet probe needs the HTTP client

    skip = ["Accept-Encoding", "Accept"]
    if not headers.get("User-Agent"):
        headers = headers.copy()
        headers.popall("User-Agent", None)
        skip.append("User-Agent")
    connector = aiohttp.TCPConnector(ssl=False, force_close=True)
    async with aiohttp.ClientSession(
        connector=connector, auto_decompress=False, skip_auto_headers=skip, trust_env=False
    ) as session:
        current = url
        request_headers = headers
        for requests_made in range(1, MAX_REQUESTS + 1):
            try:
                async with session.get(current, headers=request_headers, allow_redirects=False) as resp:
                    body = await _read_at_most(resp.content, MAX_OUTPUT_BYTES)
                    location = resp.headers.get("Location")
                    status = resp.status
            except aiohttp.ClientConnectorError as err:
                reason = describe_os_error(err.os_error)
                return ProbeOutcome(
                    Result.FAILURE, f"Get {_quote(current)}: dial tcp {err.host}:{err.port}: connect: {reason}"
                )
            except (aiohttp.ClientError, OSError) as err:
                return ProbeOutcome(Result.FAILURE, f"Get {_quote(current)}: {err or type(err).__name__}")
            if status in _FOLLOWED_STATUSES and location:
                target = current.join(URL(location))
                if target.host != url.host:
                    return _judge(status, body)  # Upstream stops at another host and judges this reply.
                if requests_made == MAX_REQUESTS:
                    return ProbeOutcome(Result.FAILURE, f"Get {_quote_text(location)}: stopped after 10 redirects")
                if not URL(location).is_absolute():
                    request_headers = headers  # A relative redirect keeps a custom Host header.
                else:
                    request_headers = headers.copy()
                    request_headers.popall("Host", None)
                current = target
                continue
            return _judge(status, body)
    raise AssertionError("unreachable: the loop returns on its last request")


def _judge(status: int, body: bytes) -> ProbeOutcome:
    text = body.decode("utf-8", errors="replace")
    if 200 <= status < 300:
        return ProbeOutcome(Result.SUCCESS, text)
    if 300 <= status < 400:
        return ProbeOutcome(Result.SUCCESS, f"Probe terminated redirects, Response body: {text}", warning=True)
    # Upstream keeps the body out of this user-visible message on purpose.
    return ProbeOutcome(Result.FAILURE, f"HTTP probe failed with statuscode: {status}")


async def _read_at_most(stream: aiohttp.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await stream.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _quote(url: URL) -> str:
    return _quote_text(str(url))


def _quote_text(text: str) -> str:
    return json.dumps(text)

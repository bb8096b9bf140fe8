"""Static pods from a manifest URL (staticPodURL): a Pod or a PodList, fetched every httpCheckFrequency.

As upstream's sourceURL (pkg/kubelet/config/http.go): a GET with the staticPodURLHeader headers, a 10 s
bound on the whole exchange, a body of at most 10 MiB, answers other than 200 are failures; an unchanged
body is not parsed again; a body that cannot be used (invalid, or one invalid item of a PodList) changes
nothing, and neither does a failed request: the pods last read stay. A 200 with an empty body empties
the set. Pod names get the node suffix and the UID hashes the pod and the URL (common.go applyDefaults).
Each failure, rejection and recovery is logged once per change.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from multidict import CIMultiDict
from yarl import URL

from minikubelet.base import podview
from minikubelet.base.bounded_reader import MAX_MANIFEST_BYTES
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.metrics import Metrics
from minikubelet.sources.file import _cut, _summary, release_memory
from minikubelet.sources.static_pod import CONFIG_SEEN_ANNOTATION, HTTP_SOURCE, ManifestError, StaticPod

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("minikubelet.static_pods")

SOURCE = HTTP_SOURCE
TOTAL_TIMEOUT = 10.0  # upstream's http.Client{Timeout: 10s}: connecting, redirects, headers and body
CONNECT_TIMEOUT = 5.0
MAX_REDIRECTS = 10  # Go's http.Client stops after 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Go's client drops these when a redirect leaves the host (and its subdomains).
_SENSITIVE = ("Authorization", "Www-Authenticate", "Cookie", "Cookie2")
_CHUNK = 64 << 10


class URLParser(Protocol):
    async def parse_url(self, data: bytes, url: str, node: str, seen: float | None) -> list[StaticPod]:
        """The pods of a body (a Pod or a PodList); raises ManifestError."""

    async def close(self) -> None: ...


class FetchError(Exception):
    def __init__(self, message: str, reason: str = "unreadable") -> None:
        super().__init__(message)
        self.reason = reason  # the metric label


def shown_url(url: str) -> str:
    """The URL for log lines: a password in it is hidden."""
    try:
        parsed = URL(url)
    except ValueError:
        return _cut(url)
    return _cut(str(parsed.with_password("redacted")) if parsed.password else url)


class URLPodSource:
    def __init__(self, url: str, headers: Mapping[str, Sequence[str]], node_name: str, clock: Clock,
                 metrics: Metrics, publish: Callable[[str, list[Pod]], None], parser: URLParser,
                 check_frequency: float = 20.0, timeout: float = TOTAL_TIMEOUT,
                 connect_timeout: float = CONNECT_TIMEOUT, tls: bool | ssl.SSLContext = True) -> None:
        self.url = url
        self.node_name = node_name
        self.check_frequency = check_frequency
        self.parser = parser
        # Upstream's client is http.Client with the default transport: system CAs, verification on.
        self._tls = tls
        self._headers = CIMultiDict((name, value) for name, values in headers.items() for value in values)
        self._clock = clock
        self._metrics = metrics
        self._publish = publish
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._digest = ""  # of the last body parsed, accepted or not
        self._body_error: tuple[str, str, str] | None = None  # why that body was refused
        self._published: dict[str, Pod] = {}  # uid -> pod, as last handed over
        self._problem: tuple[str, str, str] | None = None  # (message, error, reason) last logged
        self._announced = False
        self._lock = asyncio.Lock()
        self.seen = False  # a first answer was handed over (upstream marks the source seen then)

    async def sync(self) -> None:
        async with self._lock:
            if not self._announced:
                self._announced = True
                log.info("watching manifest URL", extra={"kv": {
                    "url": shown_url(self.url), "headers": ",".join(sorted(set(self._headers))) or "none",
                    "every": f"{self.check_frequency:g}s"}})
            try:
                body = await self._fetch()
            except FetchError as e:
                self._report(("cannot read pods from manifest URL", _cut(str(e), 960), e.reason))
                return
            if not body:
                # Upstream hands over an empty set (so the source counts as seen) and reports an error.
                # Unlike upstream, the next non-empty body is parsed even when it is the one before.
                self._digest, self._body_error = "", None
                self._hand_over([])
                self._report(("cannot read pods from manifest URL", "zero-length data received", "unreadable"))
                return
            digest = hashlib.sha256(body).hexdigest()
            if digest != self._digest:
                self._digest = digest
                self._body_error = await self._parse(body)
            self._report(self._body_error)

    async def run(self) -> None:
        """Fetches every check_frequency after the previous fetch ended (upstream's wait.Until)."""
        try:
            if not self._announced:
                await self.sync()
            while True:
                await self._clock.sleep(self.check_frequency)
                await self.sync()
        finally:
            await self.parser.close()

    async def _parse(self, body: bytes) -> tuple[str, str, str] | None:
        """Hands the body's pods over; or, when it cannot be used, the problem to report."""
        try:
            pods = await self.parser.parse_url(body, self.url, self.node_name, self._clock.now())
        except ManifestError as e:
            field = f" (field {e.errors[0].path})" if e.errors else ""
            return "rejected pods from manifest URL", _summary(e) + field, e.reason
        finally:
            if len(body) > (1 << 20):
                release_memory()
        for pod in pods:
            for warning in pod.warnings:
                log.warning("manifest URL pod", extra={"kv": {
                    "url": shown_url(self.url), "pod": _cut(podview.format_pod(pod)), "warning": warning}})
        self._hand_over(self._unique(pods))
        log.info("read pods from manifest URL", extra={"kv": {
            "url": shown_url(self.url), "pods": _cut(",".join(podview.full_name(p) for p in pods) or "none")}})
        return None

    def _unique(self, pods: list[StaticPod]) -> list[Pod]:
        """The first pod of each full name, as upstream's filterInvalidPods keeps."""
        kept: dict[str, Pod] = {}
        for pod in pods:
            name = podview.full_name(pod)
            if name in kept:
                self._metrics.static_pod_manifest_errors.labels("duplicate").inc()
                log.error("rejected pod from manifest URL", extra={"kv": {
                    "url": shown_url(self.url), "reason": "duplicate", "error": _cut(f"duplicate pod name {name}")}})
                continue
            kept[name] = pod
        return list(kept.values())

    def _hand_over(self, pods: list[Pod]) -> None:
        # The first time a pod was seen is kept, as upstream's merge does, so an unchanged item of a
        # changed list is not an update.
        for pod in pods:
            old = self._published.get(podview.uid(pod))
            seen = podview.meta(old).get("annotations", {}).get(CONFIG_SEEN_ANNOTATION) if old else None
            if seen is not None:
                pod["metadata"]["annotations"][CONFIG_SEEN_ANNOTATION] = seen
        self._published = {podview.uid(p): p for p in pods}
        self.seen = True
        self._publish(SOURCE, pods)

    def _report(self, problem: tuple[str, str, str] | None) -> None:
        if problem == self._problem:
            return
        if problem is None:
            log.info("read pods from manifest URL again", extra={"kv": {"url": shown_url(self.url)}})
        else:
            message, error, reason = problem
            self._metrics.static_pod_manifest_errors.labels(reason).inc()
            log.error(message, extra={"kv": {
                "url": shown_url(self.url), "reason": reason, "error": error,
                "keeping": f"{len(self._published)} pods" if self._published else "none"}})
        self._problem = problem

    async def _fetch(self) -> bytes:
        import aiohttp  # only an agent with a manifest URL needs the HTTP client

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout)
        connector = aiohttp.TCPConnector(ssl=self._tls)
        try:
            async with (asyncio.timeout(self._timeout),
                        aiohttp.ClientSession(timeout=timeout, connector=connector,
                                              cookie_jar=aiohttp.DummyCookieJar()) as session):
                return await self._get(session)
        except TimeoutError:
            raise FetchError(f"no complete answer within {self._timeout:g}s") from None
        except aiohttp.ClientError as e:
            raise FetchError(str(e) or type(e).__name__) from None
        except ValueError as e:  # yarl refuses the URL itself (e.g. an unclosed IPv6 bracket)
            raise FetchError(f"invalid URL: {e}") from None

    async def _get(self, session: aiohttp.ClientSession) -> bytes:
        start = url = URL(self.url, encoded=True)
        headers = CIMultiDict(self._headers)
        for _ in range(MAX_REDIRECTS + 1):
            async with session.get(url, headers=headers, allow_redirects=False) as resp:
                location = resp.headers.get("Location")
                if resp.status in _REDIRECTS and location:
                    url = _redirect_target(start, url, location, headers)
                    continue
                if resp.status != 200:
                    raise FetchError(f"{shown_url(str(url))}: {resp.status} {_cut(resp.reason or '', 80)}")
                return await _read_body(resp)
        raise FetchError(f"stopped after {MAX_REDIRECTS} redirects")


def _redirect_target(start: URL, current: URL, location: str, headers: CIMultiDict[str]) -> URL:
    try:
        target = current.join(URL(location))
    except ValueError:
        raise FetchError(f"redirect to an invalid location {_cut(location, 80)!r}") from None
    if target.scheme != start.scheme:
        raise FetchError(f"redirect from {start.scheme} to {_cut(target.scheme, 16) or 'no scheme'} refused")
    host, first = (target.host or "").lower(), (start.host or "").lower()
    if host != first and not host.endswith("." + first):
        for name in _SENSITIVE:
            headers.popall(name, None)
    return target


async def _read_body(resp: aiohttp.ClientResponse) -> bytes:
    too_large = FetchError(f"the body is larger than {MAX_MANIFEST_BYTES} bytes", "too_large")
    if resp.content_length is not None and resp.content_length > MAX_MANIFEST_BYTES:
        raise too_large
    body = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > MAX_MANIFEST_BYTES:
            raise too_large
    return bytes(body)

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
import base64
import hashlib
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol
from urllib.parse import urlsplit

import h11

from minikubelet.base import podview
from minikubelet.base.bounded_reader import MAX_MANIFEST_BYTES
from minikubelet.base.clock import Clock
from minikubelet.base.http1 import URL, BodyTooLarge, insecure_tls
from minikubelet.base.podview import Pod
from minikubelet.kubeapi.transport import Transport
from minikubelet.metrics import Metrics
from minikubelet.sources.file import _cut, _summary, release_memory
from minikubelet.sources.static_pod import CONFIG_SEEN_ANNOTATION, HTTP_SOURCE, ManifestError, StaticPod

log = logging.getLogger("minikubelet.static_pods")

SOURCE = HTTP_SOURCE
TOTAL_TIMEOUT = 10.0  # upstream's http.Client{Timeout: 10s}: connecting, redirects, headers and body
CONNECT_TIMEOUT = 5.0
MAX_REDIRECTS = 10  # Go's http.Client stops after 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Go's client drops these when a redirect leaves the host (and its subdomains).
_SENSITIVE = frozenset({"authorization", "www-authenticate", "cookie", "cookie2"})
GO_USER_AGENT = "Go-http-client/1.1"  # upstream's sourceURL sends Go's default


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
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return _cut(url)
    if not password:
        return _cut(url)
    user, _, host = parts.netloc.rpartition("@")
    return _cut(url.replace(parts.netloc, f"{user.partition(':')[0]}:redacted@{host}", 1))


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
        self._headers = [(name, value) for name, values in headers.items() for value in values]
        self._transports: dict[str, Transport] = {}
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
                    "url": shown_url(self.url), "headers": ",".join(sorted({name for name, _ in self._headers})) or "none",
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
            self._close_transports(keep="")
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
        try:
            async with asyncio.timeout(self._timeout):
                return await self._get()
        except TimeoutError:
            raise FetchError(f"no complete answer within {self._timeout:g}s") from None
        except BodyTooLarge:
            raise FetchError(f"the body is larger than {MAX_MANIFEST_BYTES} bytes", "too_large") from None
        except (h11.ProtocolError, OSError) as e:  # ConnectFailed (refused, TLS not trusted) included
            raise FetchError(str(e) or type(e).__name__) from None
        except ValueError as e:  # the URL itself (e.g. an unclosed IPv6 bracket)
            raise FetchError(f"invalid URL: {e}") from None
        finally:
            self._close_transports(keep=self.url)

    async def _get(self) -> bytes:
        start = url = URL.parse(self.url)
        headers = list(self._headers)
        for requests_made in range(1, MAX_REDIRECTS + 1):
            transport = self._transport(url)
            async with transport.stream(url.target, _fields(url, headers), self._timeout) as resp:
                location = resp.header("location")
                if resp.status in _REDIRECTS and location:
                    if requests_made == MAX_REDIRECTS:
                        break
                    url = _redirect_target(start, url, location, headers)
                    continue
                if resp.status != 200:
                    reason = resp.head.reason.decode("latin-1")
                    raise FetchError(f"{shown_url(url.text)}: {resp.status} {_cut(reason, 80)}")
                return await resp.read(MAX_MANIFEST_BYTES)
        raise FetchError(f"stopped after {MAX_REDIRECTS} redirects")

    def _transport(self, url: URL) -> Transport:
        """Connections kept per host between fetches, as Go's default transport keeps them (90 s idle)."""
        key = f"{url.scheme}://{url.authority}"
        transport = self._transports.get(key)
        if transport is None:
            tls: ssl.SSLContext | None = None
            if url.tls and isinstance(self._tls, ssl.SSLContext):
                tls = self._tls
            elif url.tls:
                tls = ssl.create_default_context() if self._tls else insecure_tls()
            transport = Transport(key, tls, connect_timeout=self._connect_timeout, name="manifest URL")
            self._transports[key] = transport
        return transport

    def _close_transports(self, keep: str) -> None:
        """Only the configured URL's host stays connected between fetches."""
        try:
            kept = URL.parse(keep)
        except ValueError:
            kept = None
        for key in list(self._transports):
            if kept is None or key != f"{kept.scheme}://{kept.authority}":
                self._transports.pop(key).close()


def _fields(url: URL, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The configured headers and what Go's client adds: its User-Agent, gzip, Basic credentials of the URL.
    A Host among the configured headers is not sent (Go writes Host from the URL only)."""
    names = {name.lower() for name, _ in headers}
    fields = [(name, value) for name, value in headers if name.lower() != "host"]
    if "user-agent" not in names:
        fields.append(("User-Agent", GO_USER_AGENT))
    if "accept-encoding" not in names:
        fields.append(("Accept-Encoding", "gzip"))
    if url.username is not None and "authorization" not in names:
        token = base64.b64encode(f"{url.username}:{url.password}".encode()).decode()
        fields.append(("Authorization", f"Basic {token}"))
    return fields


def _redirect_target(start: URL, current: URL, location: str, headers: list[tuple[str, str]]) -> URL:
    try:
        target = current.join(location)
    except ValueError:
        scheme = location.partition(":")[0] if ":" in location else ""
        if scheme and scheme.lower() not in ("http", "https") and scheme.isascii() and scheme.isalnum():
            raise FetchError(f"redirect from {start.scheme} to {_cut(scheme.lower(), 16)} refused") from None
        raise FetchError(f"redirect to an invalid location {_cut(location, 80)!r}") from None
    if target.scheme != start.scheme:
        raise FetchError(f"redirect from {start.scheme} to {_cut(target.scheme, 16) or 'no scheme'} refused")
    host, first = target.host.lower(), start.host.lower()
    if host != first and not host.endswith("." + first):
        headers[:] = [(name, value) for name, value in headers if name.lower() not in _SENSITIVE]
    return target

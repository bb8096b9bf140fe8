"""The manifest URL source against a local aiohttp server on loopback; FakeClock drives the polling."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from minikubelet.base.bounded_reader import MAX_MANIFEST_BYTES
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.metrics import Metrics
from minikubelet.sources.manifest_worker import InProcessParser, ProcessParser
from minikubelet.sources.static_pod import StaticPod, canonical_json
from minikubelet.sources.url import URLPodSource, shown_url

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def pod(name: str, image: str = "busybox", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
            "spec": {"containers": [{"name": "c", "image": image}]}}


def pod_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodList", "items": list(items)}


class Server:
    """Answers GET /pods with whatever `handler` says; records each request's headers."""

    def __init__(self) -> None:
        self.requests: list[dict[str, list[str]]] = []
        self.handler: Handler = self.body_of(pod("web"))
        self.runner: web.AppRunner | None = None
        self.port = 0
        self._in_flight: set[asyncio.Task[object]] = set()

    @staticmethod
    def body_of(obj: object, as_yaml: bool = False) -> Handler:
        text = yaml.safe_dump(obj) if as_yaml else json.dumps(obj)

        async def answer(_request: web.Request) -> web.Response:
            return web.Response(text=text)
        return answer

    def serve(self, obj: object, as_yaml: bool = False) -> None:
        self.handler = self.body_of(obj, as_yaml)

    def answer(self, status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        async def answer(_request: web.Request) -> web.Response:
            return web.Response(status=status, body=body, headers=headers)
        self.handler = answer

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        headers: dict[str, list[str]] = {}
        for k, v in request.headers.items():
            headers.setdefault(k.lower(), []).append(v)
        self.requests.append(headers)
        task = asyncio.current_task()
        if task is not None:
            self._in_flight.add(task)
        try:
            return await self.handler(request)
        finally:
            self._in_flight.discard(task)

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._dispatch)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=ssl_context)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        # a handler still answering (a late or slow answer) is ended first, so no connection task outlives
        # the server
        pending = list(self._in_flight)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        for _ in range(5):
            await asyncio.sleep(0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/pods"


class CountingParser(InProcessParser):
    def __init__(self) -> None:
        self.calls = 0

    async def parse_url(self, data: bytes, url: str, node: str, seen: float | None) -> list[StaticPod]:
        self.calls += 1
        return await super().parse_url(data, url, node, seen)


class Harness:
    def __init__(self, server: Server, url: str = "", headers: dict[str, list[str]] | None = None,
                 timeout: float = 2.0, **kw: Any) -> None:
        self.server = server
        self.clock = FakeClock()
        self.metrics = Metrics()
        self.parser = kw.pop("parser", None) or CountingParser()
        self.published: list[list[Pod]] = []
        self.handed_over = asyncio.Event()
        self.source = URLPodSource(url or server.url, headers or {}, "N1", self.clock, self.metrics,
                                   self._publish, self.parser, timeout=timeout, **kw)

    def _publish(self, _source: str, pods: list[Pod]) -> None:
        self.published.append(pods)
        self.handed_over.set()

    async def next_hand_over(self) -> list[Pod]:
        async with asyncio.timeout(5):
            await self.handed_over.wait()
        self.handed_over.clear()
        return self.published[-1]

    async def names(self) -> list[str]:
        await self.source.sync()
        return sorted(p["metadata"]["name"] for p in self.published[-1]) if self.published else []

    def errors(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value("minikubelet_static_pod_manifest_errors_total",
                                                       {"reason": reason})
        return value or 0.0


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    await s.start()
    yield s
    await s.stop()


@pytest.fixture(autouse=True)
def _info_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "minikubelet.static_pods")


def _lines(caplog: pytest.LogCaptureFixture, level: int = logging.ERROR) -> list[str]:
    return [f"{r.getMessage()} {getattr(r, 'kv', {})}" for r in caplog.records
            if r.name == "minikubelet.static_pods" and r.levelno >= level]


async def test_a_pod_is_named_for_the_node_with_the_upstream_url_identity(server: Server) -> None:
    h = Harness(server)
    assert await h.names() == ["web-n1"]
    got = h.published[-1][0]
    meta = got["metadata"]
    assert meta["annotations"]["kubernetes.io/config.source"] == "http"
    assert meta["annotations"]["kubernetes.io/config.hash"] == meta["uid"]
    assert meta["namespace"] == "default" and got["spec"]["nodeName"] == "N1"
    # upstream adds the NoExecute toleration only to file pods
    assert not got["spec"].get("tolerations")
    # the UID hashes the defaulted pod and "url:<url>", not the node
    other_node = URLPodSource(server.url, {}, "n2", h.clock, Metrics(), lambda _s, _p: None, h.parser)
    published: list[list[Pod]] = []
    other_node._publish = lambda _s, pods: published.append(pods)
    await other_node.sync()
    assert published[-1][0]["metadata"]["uid"] == meta["uid"]
    assert published[-1][0]["metadata"]["name"] == "web-n2"


def test_url_uid_is_md5_of_the_defaulted_pod_and_the_url() -> None:
    from minikubelet.api.defaults import apply_defaults
    from minikubelet.sources.static_pod import make_static_pod

    made = make_static_pod(pod("web"), "n1", "http://x/p", source="http")
    expected = hashlib.md5(canonical_json(apply_defaults(pod("web"))) + b"url:http://x/p",
                           usedforsecurity=False).hexdigest()
    assert made["metadata"]["uid"] == expected


async def test_headers_from_the_config_are_sent(server: Server) -> None:
    h = Harness(server, headers={"X-Token": ["a"], "Accept": ["application/json", "text/yaml"]})
    await h.names()
    sent = server.requests[-1]
    assert sent["x-token"] == ["a"]
    assert sent["accept"] == ["application/json", "text/yaml"]


async def test_the_request_is_gos_default_client(server: Server) -> None:
    """upstream's sourceURL is an http.Client on Go's default transport: its User-Agent, gzip asked for, the URL's
    user information as Basic credentials, a configured Host not sent (Go takes Host from the URL)."""
    h = Harness(server, url=f"http://u:p%40ss@127.0.0.1:{server.port}/pods", headers={"Host": ["elsewhere"]})
    assert await h.names() == ["web-n1"]
    sent = server.requests[-1]
    assert sent["user-agent"] == ["Go-http-client/1.1"]
    assert sent["accept-encoding"] == ["gzip"]
    assert sent["authorization"] == ["Basic dTpwQHNz"]  # u:p@ss
    assert sent["host"] == [f"127.0.0.1:{server.port}"]


async def test_the_connection_is_kept_between_fetches(server: Server) -> None:
    peers: list[object] = []

    async def answer(request: web.Request) -> web.Response:
        peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        return web.Response(text=json.dumps(pod("web")))
    server.handler = answer
    h = Harness(server)
    for _ in range(3):
        assert await h.names() == ["web-n1"]
    assert len(peers) == 3 and len(set(peers)) == 1  # one client socket, as Go's keep-alive transport


async def test_a_yaml_pod_list_gives_every_pod(server: Server) -> None:
    server.serve(pod_list(pod("a"), {"metadata": {"name": "b", "namespace": "x"},
                                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}), as_yaml=True)
    h = Harness(server)
    assert await h.names() == ["a-n1", "b-n1"]
    assert {p["metadata"]["namespace"] for p in h.published[-1]} == {"default", "x"}


async def test_one_invalid_item_rejects_the_whole_list_and_keeps_the_last_set(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    server.serve(pod_list(pod("a"), pod("b")))
    h = Harness(server)
    assert await h.names() == ["a-n1", "b-n1"]
    server.serve(pod_list(pod("a"), pod("c"), pod("Bad_Name")))
    for _ in range(3):
        assert await h.names() == ["a-n1", "b-n1"]
    assert h.parser.calls == 2  # an unchanged body is not parsed again
    (line,) = _lines(caplog)
    assert "rejected pods from manifest URL" in line and "items[2].metadata.name" in line
    assert h.errors("invalid") == 1


async def test_a_changed_body_replaces_the_pods_and_unchanged_items_keep_their_identity(server: Server) -> None:
    server.serve(pod_list(pod("a"), pod("b")))
    h = Harness(server)
    await h.names()
    first = {p["metadata"]["name"]: p for p in h.published[-1]}
    h.clock.advance(20)
    server.serve(pod_list(pod("a"), pod("b", image="busybox:1.36")))
    assert await h.names() == ["a-n1", "b-n1"]
    now = {p["metadata"]["name"]: p for p in h.published[-1]}
    assert now["a-n1"] == first["a-n1"]  # same uid, same first-seen time: not an update
    assert now["b-n1"]["metadata"]["uid"] != first["b-n1"]["metadata"]["uid"]


async def test_an_emptied_list_removes_the_pods(server: Server) -> None:
    h = Harness(server)
    assert await h.names() == ["web-n1"]
    server.serve(pod_list())
    assert await h.names() == []
    assert h.source.seen


async def test_a_zero_length_body_empties_the_set_as_upstream(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(server)
    assert await h.names() == ["web-n1"]
    server.answer(200, b"")
    assert await h.names() == []
    assert await h.names() == []
    assert len(_lines(caplog)) == 1 and "zero-length" in _lines(caplog)[0]
    server.serve(pod("web"))  # the same body as before the empty one is applied again
    assert await h.names() == ["web-n1"]


def _slow_body(pause: float) -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for ch in json.dumps(pod("slow")).encode():
            await resp.write(bytes([ch]))
            await asyncio.sleep(pause)
        return resp
    return answer


def _late(delay: float) -> Handler:
    async def answer(_request: web.Request) -> web.Response:
        await asyncio.sleep(delay)
        return web.Response(text=json.dumps(pod("late")))
    return answer


async def _endless(request: web.Request) -> web.StreamResponse:
    # No Content-Length and no end (1 GiB within the timeout): only a cap checked while reading stops it.
    resp = web.StreamResponse()
    await resp.prepare(request)
    block = b" " * (1 << 20)
    for _ in range(1024):
        await resp.write(block)
    return resp


FAILURES: dict[str, tuple[Callable[[Server], None], str, str]] = {
    "404": (lambda s: s.answer(404, b"nope"), "404 Not Found", "unreadable"),
    "500": (lambda s: s.answer(500, b"oops"), "500 Internal Server Error", "unreadable"),
    "garbage": (lambda s: s.answer(200, b"\x00\xff{{{ not yaml"), "not valid UTF-8", "invalid"),
    "not a pod": (lambda s: s.serve({"apiVersion": "v1", "kind": "Service"}), "Pod or PodList", "invalid"),
    "oversized": (lambda s: s.answer(200, b" " * (MAX_MANIFEST_BYTES + 1)), "the body is larger than", "too_large"),
    "endless body": (lambda s: setattr(s, "handler", _endless), "the body is larger than", "too_large"),
    "gzip bomb": (lambda s: s.answer(200, gzip.compress(b" " * (64 * MAX_MANIFEST_BYTES)),
                                     {"Content-Encoding": "gzip"}), "the body is larger than", "too_large"),
    "no answer in time": (lambda s: setattr(s, "handler", _late(5)), "no complete answer within 0.5s", "unreadable"),
    "slow-loris body": (lambda s: setattr(s, "handler", _slow_body(0.05)), "no complete answer", "unreadable"),
}


@pytest.mark.parametrize("case", list(FAILURES))
async def test_a_failure_keeps_the_last_set_and_is_logged_once(
        server: Server, case: str, caplog: pytest.LogCaptureFixture) -> None:
    fail, message, reason = FAILURES[case]
    h = Harness(server, timeout=0.5)
    assert await h.names() == ["web-n1"]
    fail(server)
    for _ in range(2):
        assert await h.names() == ["web-n1"]
    (line,) = _lines(caplog)
    assert message in line and "keeping" in line
    assert h.errors(reason) == 1
    server.serve(pod("web"))
    assert await h.names() == ["web-n1"]
    assert any("read pods from manifest URL again" in r for r in _lines(caplog, logging.INFO))


async def test_connection_refused_keeps_the_last_set(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(server)
    assert await h.names() == ["web-n1"]
    await server.stop()
    assert await h.names() == ["web-n1"]
    assert await h.names() == ["web-n1"]
    (line,) = _lines(caplog)
    assert "cannot read pods from manifest URL" in line and len(h.published) == 1
    await server.start()
    assert await h.names() == ["web-n1"]


async def test_a_server_down_at_start_is_not_seen(server: Server) -> None:
    await server.stop()
    h = Harness(server)
    assert await h.names() == [] and not h.published and not h.source.seen


async def test_duplicate_names_in_a_list_keep_the_first(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    server.serve(pod_list(pod("a"), pod("a", image="busybox:1.36")))
    h = Harness(server)
    assert await h.names() == ["a-n1"]
    assert h.published[-1][0]["spec"]["containers"][0]["image"] == "busybox"
    assert await h.names() == ["a-n1"]
    (line,) = _lines(caplog)
    assert "duplicate pod name a-n1_default" in line


async def test_polling_follows_the_check_frequency(server: Server) -> None:
    h = Harness(server, check_frequency=20.0)
    task = asyncio.create_task(h.source.run())
    try:
        assert (await h.next_hand_over())[0]["metadata"]["name"] == "web-n1"
        h.clock.advance(19.9)
        await asyncio.sleep(0.1)
        assert len(server.requests) == 1
        server.serve(pod("next"))
        h.clock.advance(0.1)
        assert (await h.next_hand_over())[0]["metadata"]["name"] == "next-n1"
        assert len(server.requests) == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _redirect(location: str) -> Handler:
    async def answer(request: web.Request) -> web.Response:
        if request.path == "/pods":
            raise web.HTTPFound(location)
        return web.Response(text=json.dumps(pod("moved")))
    return answer


async def test_redirects_on_the_same_host_keep_the_headers(server: Server) -> None:
    server.handler = _redirect("/moved")
    h = Harness(server, headers={"Authorization": ["Bearer t"]})
    assert await h.names() == ["moved-n1"]
    assert [r.get("authorization") for r in server.requests] == [["Bearer t"], ["Bearer t"]]


async def test_a_redirect_to_another_host_drops_credentials(server: Server) -> None:
    server.handler = _redirect(f"http://localhost:{server.port}/moved")
    h = Harness(server, headers={"Authorization": ["Bearer t"], "X-Other": ["kept"]})
    assert await h.names() == ["moved-n1"]
    assert "authorization" not in server.requests[-1] and server.requests[-1]["x-other"] == ["kept"]


@pytest.mark.parametrize("location", ["https://127.0.0.1:1/x", "file:///etc/passwd", "ftp://127.0.0.1/x"])
async def test_a_redirect_to_another_scheme_is_refused(
        server: Server, location: str, caplog: pytest.LogCaptureFixture) -> None:
    server.handler = _redirect(location)
    h = Harness(server)
    assert await h.names() == []
    assert len(server.requests) == 1
    (line,) = _lines(caplog)
    assert "refused" in line


async def test_redirect_loops_stop(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    server.handler = _redirect("/pods")
    h = Harness(server)
    assert await h.names() == []
    assert len(server.requests) == 10  # Go's client: the 10th redirect is not followed
    assert "stopped after 10 redirects" in _lines(caplog)[0]


async def test_an_unusable_url_is_a_logged_failure(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(server, url="http://[::1/pods")
    assert await h.names() == [] and not h.source.seen
    (line,) = _lines(caplog)
    assert "invalid URL" in line


def test_a_password_in_the_url_is_not_logged() -> None:
    assert shown_url("https://user:s3cret@host/p") == "https://user:redacted@host/p"
    assert shown_url("http://host/p?x=1") == "http://host/p?x=1"


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


async def test_tls_is_verified_as_upstream(self_signed: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    cert, key = self_signed
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    s = Server()
    await s.start(server_ctx)
    try:
        url = f"https://127.0.0.1:{s.port}/pods"
        untrusted = Harness(s, url=url)
        assert await untrusted.names() == []
        assert "certificate verify failed" in _lines(caplog)[0]
        trusted = Harness(s, url=url, tls=ssl.create_default_context(cafile=str(cert)))
        assert await trusted.names() == ["web-n1"]
    finally:
        await s.stop()


async def test_the_parser_process_reads_a_pod_list(server: Server) -> None:
    server.serve(pod_list(pod("a"), pod("b")), as_yaml=True)
    parser = ProcessParser()
    try:
        h = Harness(server, parser=parser)
        assert await h.names() == ["a-n1", "b-n1"]
        server.serve(pod_list(pod("a"), pod("b", image="")))
        assert await h.names() == ["a-n1", "b-n1"]
        assert parser.started == 1
    finally:
        await parser.close()

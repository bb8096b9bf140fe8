"""The rest of the kubelet API surface on aiohttp's test server: path cleaning, /healthz, /configz, /logs/,
/checkpoint, /debug/pprof, against the recorded kube-apiserver <-> kubelet v1.36 exchanges."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from cri.errors import RuntimeError_
from cri.fake import FakeRuntime
from cri.types import ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.metrics import Metrics
from minikubelet.server.app import KubeletServer
from minikubelet.server.auth import AlwaysAllow, Authenticator
from minikubelet.server.kubelet_api import KubeletAPI, SurfaceOptions, clean_path
from minikubelet.server.node_logs import NodeLogs, content_type, directory_listing, resolve
from tests.unit.server.api_client import ApiClient, serve_api

RECORDED = Path(__file__).parents[2] / "fixtures" / "kubernetes" / "kubelet-api"
Checks = list[tuple[str, str | None]]


def recorded_body(scenario: str, name: str = "s2c.bin") -> bytes:
    return (RECORDED / scenario / name).read_bytes().partition(b"\r\n\r\n")[2]


def test_clean_path_is_go_servemux_clean_path() -> None:
    assert clean_path("/logs/../../../../etc/os-release") == "/etc/os-release"
    assert clean_path("/logs/") == "/logs/"
    assert clean_path("/logs//a/./b/") == "/logs/a/b/"
    assert clean_path("/a/b/..") == "/a"
    assert clean_path("/..") == "/"
    assert clean_path("/pods") == "/pods"


def test_directory_listing_is_the_recorded_one() -> None:
    assert directory_listing([("pods", True), ("containers", True)]).encode() == recorded_body(
        "direct-path-traversal", "conn5-s2c.bin")
    assert directory_listing([("a b&<c>", False)]) == (
        '<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n'
        '<a href="a%20b%26%3Cc%3E">a b&amp;&lt;c&gt;</a>\n</pre>\n')


def test_content_type_by_extension_then_sniffed() -> None:
    assert content_type("/var/log/x.log", b"plain text\n") == "text/plain; charset=utf-8"
    assert content_type("/var/log/syslog", b"Nov 22 kernel: hello\n") == "text/plain; charset=utf-8"
    assert content_type("/var/log/wtmp", b"\x00\x01\x02") == "application/octet-stream"
    assert content_type("/var/log/a.json", b"{}") == "application/json"


def test_resolve_never_climbs_above_the_root() -> None:
    assert resolve("/var/log", "pods/a") == "/var/log/pods/a"
    assert resolve("/var/log", "") == "/var/log"
    assert resolve("/var/log", "../etc/passwd") is None
    assert resolve("/var/log", "a/./b") is None


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    clients: list[ApiClient] = []

    async def build(checks: Checks | None = None, anonymous: bool = True,
                    config: dict[str, Any] | None = None,
                    metrics: Metrics | None = None) -> ApiClient:
        async def health() -> Checks:
            return checks if checks is not None else [("ping", None), ("syncloop", None), ("runtime", None)]

        base = KubeletServer(lambda: [], health, metrics.registry if metrics else CollectorRegistry(),
                             lambda _uid: [], http=metrics.http if metrics else None)
        pod = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
               "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
        api = KubeletAPI(base, "node-1", lambda: [pod], FakeRuntime(), None, Authenticator(anonymous=anonymous),
                         AlwaysAllow(), SurfaceOptions(config=config or {}, health=health,
                                                       node_logs=NodeLogs(str(tmp_path / "log"))))
        client = await serve_api(api)
        clients.append(client)
        return client

    (tmp_path / "log" / "pods").mkdir(parents=True)
    (tmp_path / "log" / "containers").mkdir()
    (tmp_path / "log" / "syslog").write_text("hello\nworld\n")
    yield build
    for c in clients:
        await c.close()


async def test_healthz_as_recorded_and_its_checks(make: Callable[..., Any]) -> None:
    client = await make()
    r = await client.get("/healthz")
    assert (r.status, await r.read()) == (200, recorded_body("proxy-healthz"))
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8" and r.headers["X-Content-Type-Options"] == "nosniff"
    r = await client.get("/healthz?verbose")
    assert await r.text() == "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"
    for name in ("ping", "log", "syncloop"):
        r = await client.get(f"/healthz/{name}")
        assert (r.status, await r.text()) == (200, "ok")
    assert (await client.get("/healthz/runtime")).status == 404
    failing = await make([("ping", None), ("syncloop", "sync loop has not run for 12.0s")])
    r = await failing.get("/healthz")
    assert (r.status, await r.text()) == (
        500, "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n")
    r = await failing.get("/healthz?exclude=syncloop")
    assert (r.status, await r.text()) == (200, "ok")
    r = await failing.get("/healthz/syncloop")
    assert (r.status, await r.text()) == (500, "internal server error: sync loop has not run for 12.0s\n")


async def test_the_api_counts_each_request_as_readwrite_refused_ones_included(make: Callable[..., Any]) -> None:
    m = Metrics()
    client = await make(anonymous=False, metrics=m)
    assert (await client.get("/pods")).status == 401
    assert (await client.get("/no/such/thing")).status == 401
    refused = {"method": "GET", "path": "pods", "server_type": "readwrite", "long_running": "false"}
    assert m.registry.get_sample_value("kubelet_http_requests_total", refused) == 1
    assert m.registry.get_sample_value("kubelet_http_requests_duration_seconds_count", refused) == 1
    assert m.registry.get_sample_value("kubelet_http_inflight_requests", refused) == 0
    assert m.registry.get_sample_value("kubelet_http_requests_total", {**refused, "path": "other"}) == 1
    open_client = await make(metrics=m)
    assert (await open_client.post("/exec/ns/web/main")).status >= 400
    assert m.registry.get_sample_value("kubelet_http_requests_total", {
        "method": "POST", "path": "exec", "server_type": "readwrite", "long_running": "true"}) == 1


async def test_configz_serves_the_given_configuration(make: Callable[..., Any]) -> None:
    config = {"kubeletconfig": {"kind": "KubeletConfiguration", "port": 10250}}
    r = await (await make(config=config)).get("/configz")
    assert r.status == 200 and r.headers["Content-Type"] == "application/json"
    assert await r.json() == config


async def test_node_logs_like_go_file_server(make: Callable[..., Any], tmp_path: Path) -> None:
    client = await make()
    r = await client.get("/logs/")
    assert r.status == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert await r.text() == directory_listing([("containers", True), ("pods", True), ("syslog", False)])
    assert "Last-Modified" in r.headers
    r = await client.get("/logs/syslog")
    assert (r.status, await r.text()) == (200, "hello\nworld\n")
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    r = await client.get("/logs/syslog", headers={"Range": "bytes=6-"})
    assert (r.status, await r.text()) == (206, "world\n")
    r = await client.get("/logs/pods", allow_redirects=False)
    assert (r.status, r.headers["Location"]) == (301, "pods/")
    r = await client.get("/logs/syslog/", allow_redirects=False)
    assert (r.status, r.headers["Location"]) == (301, "../syslog")
    r = await client.get("/logs", allow_redirects=False)
    assert (r.status, r.headers["Location"]) == (301, "/logs/")
    r = await client.get("/logs/nothing")
    assert (r.status, await r.text()) == (404, "404 page not found\n")
    (tmp_path / "log" / "pods" / "index.html").write_text("<p>index</p>")
    assert await (await client.get("/logs/pods/")).text() == "<p>index</p>"
    if os.geteuid() != 0:
        return
    (tmp_path / "log" / "fifo").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "log" / "fifo")
    assert (await client.get("/logs/fifo")).status == 404  # never opened: it would block


async def _raw(client: ApiClient, target: str) -> tuple[bytes, bytes]:
    """(head, body) of one request sent byte for byte (aiohttp's client would clean the path first)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


async def test_path_cleaning_and_encoded_traversal(make: Callable[..., Any]) -> None:
    client = await make()
    head, body = await _raw(client, "/logs/../../../../etc/os-release")
    assert head.startswith(b"HTTP/1.1 307 Temporary Redirect\r\n") and b"\r\nLocation: /etc/os-release\r\n" in head
    assert body == recorded_body("direct-path-traversal")
    head, _ = await _raw(client, "/logs//pods/./?x=1")
    assert b"\r\nLocation: /logs/pods/?x=1\r\n" in head
    for target in ("/logs/%2e%2e/%2e%2e/%2e%2e/etc/os-release", "/logs/..%2f..%2f..%2fetc%2fos-release"):
        head, body = await _raw(client, target)
        assert head.startswith(b"HTTP/1.1 404 ") and body == recorded_body("direct-path-traversal", "conn2-s2c.bin")
    head, body = await _raw(client, "/containerLogs/ns/web/..%2f..%2f..%2f..%2fetc%2fos-release")
    assert head.startswith(b"HTTP/1.1 404 ") and body == b"404 page not found\n"


async def test_checkpoint_answers_as_upstream_without_runtime_support(make: Callable[..., Any]) -> None:
    client = await make()
    r = await client.post("/checkpoint/ns/web/main")
    assert (r.status, await r.text()) == (
        500, "checkpointing of ns/web/main failed (rpc error: code = Unimplemented desc = method "
             "CheckpointContainer not implemented)")
    r = await client.post("/checkpoint/ns/nobody/main")
    assert (r.status, await r.text()) == (404, "pod does not exist")
    r = await client.post("/checkpoint/ns/web/other")
    assert (r.status, await r.text()) == (404, "container other does not exist")
    r = await client.post("/checkpoint/ns/web/main?timeout=soon")
    assert (r.status, await r.text()) == (404, "cannot parse value of timeout parameter")
    assert (await client.get("/checkpoint/ns/web/main")).status == 405


async def test_no_pprof_and_anonymous_is_401(make: Callable[..., Any]) -> None:
    client = await make()
    for path in ("/debug/pprof/", "/debug/pprof/profile", "/debug/flags/v"):
        r = await client.get(path)
        assert (r.status, await r.text()) == (404, "404 page not found\n")
    closed = await make(anonymous=False)
    r = await closed.get("/pods")
    assert (r.status, await r.read()) == (401, recorded_body("direct-anonymous"))
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8" and "WWW-Authenticate" not in r.headers


async def test_running_pods_from_the_runtime(tmp_path: Path) -> None:
    runtime = FakeRuntime(images=["busybox"])
    sandbox = PodSandboxConfig(PodMeta("web", "ns", "u1"))
    sid = await runtime.run_pod_sandbox(sandbox)
    for name in ("main", "side"):
        cid = await runtime.create_container(sid, ContainerConfig(ContainerMeta(name), "busybox"), sandbox)
        if name == "main":
            await runtime.start_container(cid)
    idle = PodSandboxConfig(PodMeta("idle", "ns", "u2"))
    await runtime.run_pod_sandbox(idle)

    async def health() -> Checks:
        return []

    base = KubeletServer(lambda: [], health, CollectorRegistry(), lambda _uid: [])
    api = KubeletAPI(base, "node-1", lambda: [], runtime, None, Authenticator(anonymous=True), AlwaysAllow())
    client = await serve_api(api)
    try:
        r = await client.get("/runningpods/")
        # a sandbox without running containers is a pod with none; created-only containers are left out
        assert r.status == 200 and await r.json() == {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [
            {"metadata": {"name": "idle", "namespace": "ns", "uid": "u2"}, "spec": {"containers": None},
             "status": {}},
            {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
             "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {}}]}, "status": {}}]}
        runtime.fail("list_containers", RuntimeError_("Cannot connect to the Docker daemon"))
        r = await client.get("/runningpods/")
        assert (r.status, await r.text()) == (500, "Cannot connect to the Docker daemon\n")
    finally:
        await client.close()


async def test_logs_come_from_the_pods_own_containers_not_a_namesakes(tmp_path: Path) -> None:
    # a pod deleted and created again under the same name: its predecessor's container (newer here) is not it
    runtime = FakeRuntime(images=["busybox"])
    for uid in ("u1", "old"):
        logs = tmp_path / uid
        logs.mkdir()
        (logs / "main.log").write_text(f"2026-11-24T00:00:00.000000000Z stdout F from {uid}\n")
        sandbox = PodSandboxConfig(PodMeta("web", "ns", uid), log_directory=str(logs))
        sid = await runtime.run_pod_sandbox(sandbox)
        cid = await runtime.create_container(sid, ContainerConfig(ContainerMeta("main"), "busybox",
                                                                  log_path="main.log"), sandbox)
        await runtime.start_container(cid)

    async def health() -> Checks:
        return []

    pod = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    base = KubeletServer(lambda: [], health, CollectorRegistry(), lambda _uid: [])
    api = KubeletAPI(base, "node-1", lambda: [pod], runtime, None, Authenticator(anonymous=True), AlwaysAllow())
    client = await serve_api(api)
    try:
        r = await client.get("/containerLogs/ns/web/main")
        assert (r.status, await r.text()) == (200, "from u1\n")
    finally:
        await client.close()

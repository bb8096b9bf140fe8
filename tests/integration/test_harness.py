"""The test environment itself: the engine answers, the local images behave, pod-style networking works.

If these fail, every other integration test will too; look here first.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable

import aiodocker
import aiohttp
from aiodocker.containers import DockerContainer

from tests.images import ALL_IMAGES, BUILD_HASH_LABEL
from tests.integration.conftest import StartContainer


async def _eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def _running(container: DockerContainer) -> bool:
    state = (await container.show())["State"]
    return bool(state["Running"])


async def _exit_code(container: DockerContainer, timeout: float) -> int:
    result = await asyncio.wait_for(container.wait(), timeout)
    return int(result["StatusCode"])


async def _output(container: DockerContainer) -> str:
    return "".join(await container.log(stdout=True, stderr=True))


async def test_engine_answers_and_images_are_local(docker: aiodocker.Docker) -> None:
    version = await docker.version()
    assert version["ApiVersion"]
    info = await docker.system.info()
    assert info["Driver"] == "overlay2"
    for name in ALL_IMAGES:
        image = await docker.images.inspect(name)
        assert image["Config"]["Labels"][BUILD_HASH_LABEL], name


async def test_pause_exits_zero_on_sigterm_within_a_second(
    start_container: StartContainer, pause_image: str
) -> None:
    pause = await start_container({"Image": pause_image})
    await _eventually(lambda: _running(pause), 5, "pause to run")
    await asyncio.sleep(0.1)  # let it install its handlers (PID 1 ignores default-action signals)
    t0 = time.monotonic()
    await pause.kill(signal="SIGTERM")
    code = await _exit_code(pause, 1.0)
    elapsed = time.monotonic() - t0
    assert code == 0
    assert elapsed < 1.0
    assert await _output(pause) == ""  # PID 1: no "not running as PID 1" warning


async def test_pause_reaps_orphans_in_a_shared_pid_namespace(
    start_container: StartContainer, pause_image: str, busybox_image: str
) -> None:
    pause = await start_container({"Image": pause_image})
    # The subshell exits at once, so `sleep 0.2` is re-parented to PID 1 (pause); once it exits,
    # only pause's SIGCHLD handler can reap it. A zombie shows as state Z in /proc/<pid>/stat.
    script = "(sleep 0.2 &); sleep 1; cat /proc/[0-9]*/stat"
    probe = await start_container(
        {
            "Image": busybox_image,
            "Cmd": ["sh", "-c", script],
            "HostConfig": {"PidMode": f"container:{pause.id}"},
        }
    )
    assert await _exit_code(probe, 10) == 0
    stats = await _output(probe)
    assert "(pause)" in stats
    assert ") Z " not in stats, stats


async def test_busybox_image_basics(start_container: StartContainer, busybox_image: str) -> None:
    script = r"""
set -e
echo hi
id nobody
mkdir -p /www && echo page > /www/index.html
httpd -p 8080 -h /www
for i in $(seq 50); do wget -qO- http://127.0.0.1:8080/ >/dev/null 2>&1 && break; sleep 0.1; done
echo "ip:$(wget -qO- http://127.0.0.1:8080/)"
echo "name:$(wget -qO- http://localhost:8080/)"
for i in $(seq 10); do
  nc -l -p 9000 >/tmp/nc.out & listener=$!
  sleep 0.2
  echo over-nc | nc -w 1 127.0.0.1 9000 2>/dev/null || true
  sleep 0.2; kill $listener 2>/dev/null || true; wait $listener 2>/dev/null || true
  grep -q over-nc /tmp/nc.out && break
done
echo "nc:$(cat /tmp/nc.out)"
rc=0; timeout 5 nslookup localhost 127.0.0.1 >/dev/null 2>&1 || rc=$?
echo "nslookup:$rc"
"""
    box = await start_container({"Image": busybox_image, "Cmd": ["sh", "-c", script]})
    code = await _exit_code(box, 20)
    out = await _output(box)
    assert code == 0, out
    lines = out.splitlines()
    assert "hi" in lines
    assert any(line.startswith("uid=65534(nobody)") for line in lines), out
    assert "ip:page" in lines
    assert "name:page" in lines  # localhost through NSS (libnss_files, /etc/hosts)
    assert "nc:over-nc" in lines
    nslookup_rc = int(next(line for line in lines if line.startswith("nslookup:")).split(":")[1])
    assert nslookup_rc < 128, f"nslookup died of a signal: {out}"  # no DNS server here; no crash


async def test_httpd_answers_on_the_container_ip(start_container: StartContainer, busybox_image: str) -> None:
    server = await start_container(
        {
            "Image": busybox_image,
            "Cmd": ["sh", "-c", "mkdir -p /www && echo from-container > /www/index.html "
                    "&& exec httpd -f -p 8080 -h /www"],
        }
    )
    ip = (await server.show())["NetworkSettings"]["IPAddress"]
    assert ip, "the container has no IP on the default bridge"
    body = ""

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:

        async def answers() -> bool:
            nonlocal body
            try:
                async with http.get(f"http://{ip}:8080/") as resp:
                    body = await resp.text()
                    return resp.status == 200
            except (aiohttp.ClientError, TimeoutError):
                return False

        await _eventually(answers, 10, f"httpd on {ip}:8080")
    assert body == "from-container\n"


async def test_containers_sharing_a_network_namespace_talk_over_loopback(
    start_container: StartContainer, pause_image: str, busybox_image: str
) -> None:
    sandbox = await start_container({"Image": pause_image})
    joined = {"NetworkMode": f"container:{sandbox.id}"}
    await start_container(
        {
            "Image": busybox_image,
            "Cmd": ["sh", "-c", "mkdir -p /www && echo shared > /www/index.html "
                    "&& exec httpd -f -p 127.0.0.1:8080 -h /www"],
            "HostConfig": joined,
        }
    )
    client = await start_container(
        {
            "Image": busybox_image,
            "Cmd": ["sh", "-c", "for i in $(seq 100); do wget -qO- http://127.0.0.1:8080/ && exit 0; "
                    "sleep 0.1; done; exit 1"],
            "HostConfig": joined,
        }
    )
    code = await _exit_code(client, 20)
    out = await _output(client)
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "shared"


def test_the_registry_is_an_unpacked_binary_not_a_host_service(docker_host: str) -> None:
    """scripts/testenv unpacks docker-registry into its cache: no package, so no boot-time service on :5000."""
    binary = os.environ.get("MKL_TEST_REGISTRY_BIN", "")
    assert binary.startswith("/var/cache/minikubelet-test/docker-registry/"), binary
    assert os.access(binary, os.X_OK), binary
    owner = subprocess.run(["dpkg", "-S", binary], capture_output=True, text=True, check=False)
    assert owner.returncode != 0, f"{binary} belongs to an installed package: {owner.stdout}"

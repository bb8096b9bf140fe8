"""Issue 16 items 1-2 with the real agent process and the real Docker Engine (no systemd here, so systemd's side
is played by a real datagram socket and the environment systemd sets):

- `minikubelet join` (the real CLI process, `--root` prefix) against the test API server: token discovery, the
  files; the agent then TLS-bootstraps with the bootstrap kubeconfig join wrote and its Node turns Ready;
  `minikubelet reset` removes the pod it ran; bad discovery input fails with a clear error.
- Type=notify: READY=1 once the first sync is done, WATCHDOG=1 every WatchdogSec/2 from the event loop, none
  while the process is stopped (SIGSTOP), again after SIGCONT, STOPPING=1 at the end; and log lines with
  journald's `<N>` priority prefixes when stderr is the journal stream.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest
from cryptography import x509

from minikubelet.install import layout as paths
from minikubelet.install.ca_pin import spki_hash
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.apiserver.pki import CertificateAuthority
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, simple_pod, stop_and_clean
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view
api = agent_env.api

pytestmark = pytest.mark.integration
TOKEN = "abcdef.0123456789abcdef"


async def cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "minikubelet", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_join_then_the_agent_bootstraps_and_reset_removes_its_pods(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    api.add_bootstrap_token("abcdef", "0123456789abcdef")
    pin = spki_hash(x509.load_pem_x509_certificate(api.ca.cert_pem))
    root = tmp_path / "machine"
    join = ("join", api.url, "--token", TOKEN, "--discovery-token-ca-cert-hash", pin, "--root", str(root),
            "--discovery-timeout", "0", "--container-runtime-endpoint",
            agent_env.runtime_endpoint(agent_env.docker_host()))  # the agent's: reset removes the pods through it

    wrong = spki_hash(x509.load_pem_x509_certificate(CertificateAuthority().cert_pem))
    for args, message in [
        (("--discovery-token-ca-cert-hash", wrong), "none of the public keys"),
        (("--token", "abcdef.fedcba9876543210"), "failed to verify JWS signature"),
        (("--token", "abc"), "was not of the form"),
    ]:
        bad = list(join)
        i = bad.index(args[0])
        bad[i + 1] = args[1]
        code, _, err = await cli(*bad)
        assert code == 1 and "error: join: " in err and message in err, err
    assert not root.exists()

    started = time.monotonic()
    code, out, err = await cli(*join)
    assert code == 0, err
    assert "This node has joined the cluster." in out and "[dry-run] systemctl start minikubelet.service" in out
    code, out, _ = await cli(*join)
    assert code == 0 and "Nothing changed" in out and "[dry-run] systemctl enable minikubelet.service" in out
    join_seconds = time.monotonic() - started

    agent = AgentProcess(tmp_path / "agent", agent_env.docker_host())
    agent.args = ["--bootstrap-kubeconfig", str(root / paths.BOOTSTRAP_KUBECONFIG.lstrip("/")),
                  "--kubeconfig", str(root / paths.KUBECONFIG.lstrip("/"))]
    agent.extra = {"nodeStatusUpdateFrequency": "2s"}
    agent.put("sleeper.yaml", simple_pod("sleeper", [{"name": "c", "command": ["sleep", "3600"]}]))
    admin = api.admin()
    agent.start()
    try:
        async def ready() -> dict[str, Any] | None:
            try:
                node = await admin.get("nodes", agent.node)
            except ApiStatusError:
                return None
            conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            return node if conditions.get("Ready") == "True" else None

        await agent.wait_for("the Node Ready after a TLS bootstrap with join's kubeconfig", ready, timeout=60)
        pod = await agent.wait_for("the static pod running", lambda: _running(agent, "sleeper"))
        cid = agent_env.container_id(pod, "c")
    finally:
        agent.stop()
    code, out, err = await cli("reset", "--root", str(root))
    try:
        assert code == 0, err
        assert "[dry-run] systemctl stop minikubelet.service" in out and "Reset done." in out
        assert not await runtime_view.exists(cid)
        assert sorted(p.name for p in (root / "etc" / "kubernetes").iterdir()) == ["manifests", "pki"]
        assert not (root / "var" / "lib" / "minikubelet").exists()
        assert not (root / paths.UNIT.lstrip("/")).exists()
        code, out, _ = await cli("reset", "--root", str(root))
        assert code == 0 and "Nothing to reset." in out and "systemctl" not in out
    finally:
        await stop_and_clean(agent, docker)
    print(f"join (twice, CLI processes): {join_seconds:.1f}s")


async def _running(agent: AgentProcess, name: str) -> dict[str, Any] | None:
    pod = await agent.pod(name)
    return pod if pod and pod["status"].get("phase") == "Running" else None


def drain(s: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(s.recv(4096).decode())
        except BlockingIOError:
            return out


async def next_message(s: socket.socket, timeout: float) -> str:
    loop = asyncio.get_running_loop()
    return (await asyncio.wait_for(loop.sock_recv(s, 4096), timeout)).decode()


async def test_notify_ready_watchdog_stops_while_stopped_and_journal_levels(
        tmp_path: Path, docker: aiodocker.Docker, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.setblocking(False)
    agent = AgentProcess(tmp_path / "agent", agent_env.docker_host())
    agent.put("sleeper.yaml", simple_pod("sleeper", [{"name": "c", "command": ["sleep", "3600"]}]))
    agent.log_path.touch()
    st = os.stat(agent.log_path)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify.sock"))
    monkeypatch.setenv("WATCHDOG_USEC", "3000000")  # WatchdogSec=3: a ping every 1.5 s
    monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
    started = time.monotonic()
    agent.start()
    assert agent.proc is not None
    try:
        ready = await next_message(sock, 60)
        print(f"READY=1 after {time.monotonic() - started:.2f}s")
        assert ready.split("\n")[0] == "READY=1", ready
        # the first sync is done: the static pod source was read (its worker starts the pod right away)
        assert f"STATUS=running, node {agent.node}" in ready
        await next_message(sock, 5)  # the first ping
        started = time.monotonic()
        pings = [await next_message(sock, 5) for _ in range(3)]
        assert pings == ["WATCHDOG=1"] * 3
        assert 2.0 < time.monotonic() - started < 6.0  # three intervals of 1.5 s

        os.kill(agent.proc.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(0.2)
            drain(sock)  # a ping that was in flight
            await asyncio.sleep(4.0)  # longer than WatchdogSec: systemd would kill it now
            assert drain(sock) == []
        finally:
            os.kill(agent.proc.pid, signal.SIGCONT)
        assert await next_message(sock, 5) == "WATCHDOG=1"
        await agent.wait_for("the pod running", lambda: _running(agent, "sleeper"))
        agent.stop()
        assert "STOPPING=1" in drain(sock)
        lines = [line for line in agent.log().splitlines() if line]
        assert lines and all(line.startswith(("<6>", "<4>", "<3>", "<7>")) for line in lines), lines[:5]
        assert any(line.startswith("<6>") and "starting minikubelet" in line for line in lines)
    finally:
        sock.close()
        await stop_and_clean(agent, docker)

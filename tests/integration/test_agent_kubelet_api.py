"""The kubelet API (HTTPS, client certificates, AlwaysAllow) on the real agent and Docker Engine."""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
from pathlib import Path

import aiodocker
import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from minikubelet.server.streaming.channel_codec import V5_BINARY
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, free_port, simple_pod

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker


def _cert(name: str, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None, ca: bool
          ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer or (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(issuer_key, hashes.SHA256()))
    return cert, key


def write_pki(base: Path) -> tuple[Path, ssl.SSLContext]:
    ca, ca_key = _cert("test-ca", None, True)
    client, client_key = _cert("test-admin", (ca.subject, ca_key), False)
    (base / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (base / "client.crt").write_bytes(client.public_bytes(serialization.Encoding.PEM))
    (base / "client.key").write_bytes(client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # as the API server without --kubelet-certificate-authority
    ctx.load_cert_chain(base / "client.crt", base / "client.key")
    return base / "ca.crt", ctx


def anonymous_ctx() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def ws_exec(url: str, ctx: ssl.SSLContext) -> tuple[bytes, dict[str, object]]:
    out = b""
    async with aiohttp.ClientSession() as s, s.ws_connect(url, protocols=(V5_BINARY,), ssl=ctx) as ws:
        assert ws.protocol == V5_BINARY
        status: dict[str, object] = {}
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                break
            if msg.data[:1] == b"\x01":
                out += msg.data[1:]
            elif msg.data[:1] == b"\x03":
                status = json.loads(msg.data[1:])
        return out, status


async def test_logs_exec_and_authentication(tmp_path: Path, agent: AgentProcess, docker: aiodocker.Docker) -> None:
    ca, ctx = write_pki(tmp_path)
    port = free_port()
    agent.extra = {"port": port, "authentication": {"x509": {"clientCAFile": str(ca)}},
                   "authorization": {"mode": "AlwaysAllow"}}
    agent.put("shell.yaml", simple_pod("shell", [{"name": "shell", "command": [
        "sh", "-c", "for i in 1 2 3; do echo line $i; done; exec sleep 3600"]}]))
    agent.put("short.yaml", simple_pod("short", [{"name": "short", "command": [
        "sh", "-c", "echo one; sleep 2; echo two"]}], restartPolicy="Never"))
    agent.start()
    p = await agent.wait_pod("shell", lambda p: p.get("status", {}).get("phase") == "Running", "running")
    ns, shell = p["metadata"]["namespace"], p["metadata"]["name"]  # static pods are named <name>-<node>
    short = (await agent.wait_pod("short", lambda p: True, "status"))["metadata"]["name"]
    base = f"https://127.0.0.1:{port}"
    await asyncio.sleep(0.5)
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/containerLogs/{ns}/{shell}/shell", ssl=anonymous_ctx()) as r:
            assert (r.status, await r.text()) == (401, "Unauthorized")
        async with s.get(f"{base}/containerLogs/{ns}/{shell}/shell", ssl=ctx) as r:
            assert (r.status, await r.text()) == (200, "line 1\nline 2\nline 3\n")
        async with s.get(f"{base}/containerLogs/{ns}/{shell}/shell?tailLines=1&timestamps=true", ssl=ctx) as r:
            text = await r.text()
            assert text.endswith("Z line 3\n") and text.count("\n") == 1, text
        async with s.get(f"{base}/containerLogs/{ns}/nope/shell", ssl=ctx) as r:
            assert r.status == 404
        async with s.get(f"{base}/containerLogs/../../etc/passwd", ssl=ctx) as r:
            assert r.status == 404
        async with asyncio.timeout(30):
            async with s.get(f"{base}/containerLogs/{ns}/{short}/short?follow=true", ssl=ctx) as r:
                assert await r.text() == "one\ntwo\n"  # the stream ends when the container exits

    q = "command=sh&command=-c&command=echo+%24%28%2840%2B2%29%29&output=1&error=1"
    out, status = await ws_exec(f"wss://127.0.0.1:{port}/exec/{ns}/{shell}/shell?{q}", ctx)
    assert (out, status) == (b"42\n", {"metadata": {}, "status": "Success"})
    out, status = await ws_exec(f"wss://127.0.0.1:{port}/exec/{ns}/{shell}/shell?command=sh&command=-c"
                                f"&command=exit+3&output=1&error=1", ctx)
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"] == {"causes": [{"reason": "ExitCode", "message": "3"}]}

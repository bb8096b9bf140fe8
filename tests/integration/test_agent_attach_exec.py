"""exec and attach through the kubelet API of the real agent on the real Docker Engine, over both transports
kube-apiserver v1.36 uses towards a node: SPDY/3.1 (`tests/spdy_client.py`, the recorded POST upgrade and
client-opened streams) and WebSocket v5 (`tests/ws_client.py`). Also a TTY with resizes read back by `stty size`,
and a tar copy both ways through exec as `kubectl cp` does it."""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import pytest

from cri.spdy import DataFrame, FrameDecoder, GoAway, GoAwayStatus, RstStatus, RstStream
from minikubelet.server.streaming.channel_codec import V5_BINARY, Channel
from tests import spdy_client, ws_client
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, free_port, simple_pod
from tests.integration.runtime_view import RuntimeView
from tests.integration.test_agent_kubelet_api import write_pki
from tests.spdy_client import RemoteCommand, SpdyClient, UpgradeRefused
from tests.unit.server.streaming.recorded import KUBELET_API, load

pytestmark = pytest.mark.integration
agent = agent_env.agent
runtime_view = views.runtime_view

HOST = "127.0.0.1"


@dataclass
class Api:
    agent: AgentProcess
    port: int
    ctx: Any
    ns: str
    pods: dict[str, str]  # manifest name -> pod name (static pods are <name>-<node>)

    def path(self, verb: str, pod: str, container: str, command: tuple[str, ...] = (), /, **flags: int) -> str:
        query = [("command", c) for c in command] + [(k, "1") for k, on in flags.items() if on]
        return f"/{verb}/{self.ns}/{self.pods[pod]}/{container}?{urlencode(query, quote_via=quote)}"

    def ws_url(self, path: str) -> str:
        return f"wss://{HOST}:{self.port}{path}"

    async def spdy(self, path: str, **kw: Any) -> spdy_client.Outcome:
        return await spdy_client.run(HOST, self.port, path, self.ctx, **kw)

    async def ws(self, path: str, **kw: Any) -> spdy_client.Outcome:
        return await ws_client.run(self.ws_url(path), self.ctx, **kw)


async def start_api(agent: AgentProcess, tmp_path: Path, pods: dict[str, dict[str, Any]]) -> Api:
    ca, ctx = write_pki(tmp_path)
    port = free_port()
    agent.extra = {"port": port, "authentication": {"x509": {"clientCAFile": str(ca)}},
                   "authorization": {"mode": "AlwaysAllow"}}
    for name, pod in pods.items():
        agent.put(f"{name}.yaml", pod)
    agent.start()
    names, ns = {}, ""
    for name in pods:
        p = await agent.wait_pod(name, lambda p: p.get("status", {}).get("phase") == "Running", "running")
        names[name], ns = p["metadata"]["name"], p["metadata"]["namespace"]
    return Api(agent, port, ctx, ns, names)


def shell_pod(name: str = "shell", **container: Any) -> dict[str, Any]:
    return simple_pod(name, [{"name": "shell", "command": ["sleep", "3600"], **container}],
                      terminationGracePeriodSeconds=1)


SUCCESS = {"metadata": {}, "status": "Success"}


async def test_exec_over_spdy(tmp_path: Path, agent: AgentProcess) -> None:
    api = await start_api(agent, tmp_path, {"shell": shell_pod()})
    echo = api.path("exec", "shell", "shell", ("sh", "-c", "echo $((40+2))"), error=1, output=1)

    client = await SpdyClient.connect(HOST, api.port, echo, api.ctx)
    try:
        assert client.protocol == "v4.channel.k8s.io"  # v5 only adds the WebSocket close message
        assert client.response_headers["upgrade"] == ["SPDY/3.1"]
        rc = await RemoteCommand.open(client, stdin=False, stdout=True, stderr=True, tty=False)
        assert await rc.streams["stdout"].read_all() == b"42\n"
        assert await rc.status() == SUCCESS
        await asyncio.wait_for(client.wait_closed(), 10)
        error_id = rc.streams["error"].id
        # As recorded: the outputs FIN, then the Status on the error stream, RST_STREAM(CANCEL), GOAWAY(OK).
        tail = client.frames[-3:]
        assert tail[0] == DataFrame(error_id, b'{"metadata":{},"status":"Success"}')
        assert tail[1:] == [RstStream(error_id, RstStatus.CANCEL), GoAway(rc.streams["stderr"].id, GoAwayStatus.OK)]
        assert DataFrame(rc.streams["stdout"].id, b"", fin=True) in client.frames
    finally:
        await client.close()

    out = await api.spdy(api.path("exec", "shell", "shell", ("sh", "-c", "echo out; echo err >&2; exit 3"),
                                  error=1, output=1))
    assert (out.stdout, out.stderr) == (b"out\n", b"err\n")
    assert out.status["status"] == "Failure" and out.status["reason"] == "NonZeroExitCode"
    assert out.status["details"] == {"causes": [{"reason": "ExitCode", "message": "3"}]}

    # stdin ends with an empty DATA+FIN; cat then ends and exits 0.
    out = await api.spdy(api.path("exec", "shell", "shell", ("cat",), error=1, input=1, output=1), stdin=b"hi\n")
    assert (out.stdout, out.status) == (b"hi\n", SUCCESS)

    # Over a WebSocket the first message is an empty one on the lowest writable channel, as upstream's: stdout if
    # asked for, else stderr, else the error channel (a client has no stream for a channel it did not ask for).
    for flags, first in (({"output": 1, "error": 1}, Channel.STDOUT), ({"error": 1}, Channel.STDERR),
                         ({"input": 1}, Channel.ERROR)):
        url = api.ws_url(api.path("exec", "shell", "shell", ("true",), **flags))
        async with aiohttp.ClientSession() as http, http.ws_connect(url, protocols=(V5_BINARY,), ssl=api.ctx) as ws:
            message = await ws.receive(timeout=30)
            assert (message.type, message.data) == (aiohttp.WSMsgType.BINARY, bytes([first])), flags

    # A command the runtime cannot start: the upgrade succeeds, the Status carries the error.
    out = await api.spdy(api.path("exec", "shell", "shell", ("/no/such/binary",), error=1, output=1))
    assert out.status["status"] == "Failure", out.status

    with pytest.raises(UpgradeRefused) as refused:
        await api.spdy(f"/exec/{api.ns}/no-such-pod/c?command=true&output=1")
    assert (refused.value.status, refused.value.body) == (404, b"pod does not exist")
    with pytest.raises(UpgradeRefused) as refused:
        await api.spdy(api.path("exec", "shell", "nope", ("true",), output=1))
    assert (refused.value.status, refused.value.body) == (500, b'container not found ("nope")')

    # The recorded direct-exec-errors answers: no upgrade (500), unknown pod (404), same status, type and body.
    base = f"https://{HOST}:{api.port}"
    for recorded, path in (("s2c.bin", f"/exec/{api.ns}/{api.pods['shell']}/shell?command=true&output=1&error=1"),
                           ("conn2-s2c.bin", f"/exec/{api.ns}/no-such-pod/c?command=true&output=1&error=1")):
        status, headers, body = recorded_response(KUBELET_API / "direct-exec-errors" / recorded)
        async with aiohttp.ClientSession() as s, s.get(base + path, ssl=api.ctx) as r:
            assert (r.status, await r.read()) == (status, body)
            for name in ("Content-Type", "X-Content-Type-Options"):
                assert r.headers.get(name) == headers.get(name.lower()), name


def recorded_response(path: Path) -> tuple[int, dict[str, str], bytes]:
    raw = path.read_bytes()
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, body


async def _size_seen(write: Any, read_until: Any, expected: bytes, start: int) -> int:
    """Runs `stty size` until it prints `expected` (a resize travels on its own stream, so it may land a little
    after later stdin); returns the next marker number. The marker is computed by the shell so the terminal's
    echo of the typed line never matches it."""
    for i in range(start, start + 50):
        seen = len(await read_until(b""))
        await write(f"stty size; echo mark-$((1000+{i}))\n".encode())
        data = await read_until(f"mark-{1000 + i}".encode())
        if expected in data[seen:]:
            return i + 1
        await asyncio.sleep(0.1)
    raise AssertionError(f"stty size never printed {expected!r}")


async def test_tty_resize_exec_and_attach(tmp_path: Path, agent: AgentProcess) -> None:
    api = await start_api(agent, tmp_path, {"shell": shell_pod(),
                                            "console": shell_pod("console", command=["sh"], stdin=True, tty=True)})
    tty_exec = api.path("exec", "shell", "shell", ("sh",), input=1, output=1, tty=1)

    # SPDY exec: streams error, stdin, stdout, resize (a tty has no stderr stream).
    client = await SpdyClient.connect(HOST, api.port, tty_exec, api.ctx)
    try:
        rc = await RemoteCommand.open(client, stdin=True, stdout=True, stderr=True, tty=True)
        assert set(rc.streams) == {"error", "stdin", "stdout", "resize"}
        await rc.resize(80, 24)
        n = await _size_seen(rc.streams["stdin"].write, rc.streams["stdout"].read_until, b"24 80", 0)
        await rc.resize(120, 40)
        await _size_seen(rc.streams["stdin"].write, rc.streams["stdout"].read_until, b"40 120", n)
        await rc.streams["stdin"].write(b"exit 5\n")
        status = await rc.status()
        assert status["details"] == {"causes": [{"reason": "ExitCode", "message": "5"}]}
    finally:
        await client.close()

    # WebSocket exec: resize on channel 4.
    async with ws_client.session(api.ws_url(tty_exec), api.ctx) as ws:
        await ws.resize(100, 30)
        n = await _size_seen(ws.write, ws.read_until, b"30 100", 0)
        await ws.resize(132, 43)
        await _size_seen(ws.write, ws.read_until, b"43 132", n)
        await ws.write(b"exit\n")
        assert (await ws.finish()).status == SUCCESS

    # Attach to a container created with a tty: the tty is the container's, resizes reach it, over both.
    tty_attach = api.path("attach", "console", "shell", input=1, output=1, tty=1)
    client = await SpdyClient.connect(HOST, api.port, tty_attach, api.ctx)
    try:
        rc = await RemoteCommand.open(client, stdin=True, stdout=True, stderr=False, tty=True)
        await rc.resize(90, 25)
        await _size_seen(rc.streams["stdin"].write, rc.streams["stdout"].read_until, b"25 90", 0)
    finally:
        await client.close()  # detaching leaves the container's shell running
    async with ws_client.session(api.ws_url(tty_attach), api.ctx) as ws:
        await ws.resize(70, 20)
        await _size_seen(ws.write, ws.read_until, b"20 70", 100)
        await ws.write(b"exit 0\n")  # the container's own shell: it ends, so does the attachment
        assert (await ws.finish()).status == SUCCESS


TYPED_AFTER = 1.0
READ_LOOP = 'while read l; do echo "got: $l"; echo "stderr: $l" >&2; done; echo "stdin closed, exiting 0"'


def reader_pod(name: str) -> dict[str, Any]:
    return simple_pod(name, [{"name": "main", "command": ["sh", "-c", READ_LOOP], "stdin": True,
                              "stdinOnce": True}], restartPolicy="Never", terminationGracePeriodSeconds=1)


async def test_attach(tmp_path: Path, agent: AgentProcess, runtime_view: RuntimeView) -> None:
    ticker = simple_pod("ticker", [{"name": "main", "command": [
        "sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"]}],
        terminationGracePeriodSeconds=1)
    api = await start_api(agent, tmp_path, {"attach-spdy": reader_pod("attach-spdy"),
                                            "attach-ws": reader_pod("attach-ws"), "ticker": ticker})
    flags: dict[str, int] = {"error": 1, "input": 1, "output": 1}  # what kubectl attach -i sends, as recorded

    # The recorded scenario: two lines in, stdin closed, the stdinOnce container ends, Status Success. Typed a
    # moment after the streams are up, as a person does: containerd's attach starts copying stdin before it adds
    # the stdout and stderr writers, so lines sent at once can be answered before they listen (CI saw stderr lost).
    out = await api.spdy(api.path("attach", "attach-spdy", "main", **flags), stdin=b"hello\nworld\n",
                         stdin_after=TYPED_AFTER)
    assert out.stdout == b"got: hello\ngot: world\nstdin closed, exiting 0\n"
    assert (out.stderr, out.status) == (b"stderr: hello\nstderr: world\n", SUCCESS)
    out = await api.ws(api.path("attach", "attach-ws", "main", **flags), stdin=b"hello\nworld\n",
                       stdin_after=TYPED_AFTER)
    assert out.stdout == b"got: hello\ngot: world\nstdin closed, exiting 0\n"
    assert (out.stderr, out.status) == (b"stderr: hello\nstderr: world\n", SUCCESS)

    # Once it has exited there is no running container to attach to (upstream: 500, the lookup's error).
    pod = await agent.wait_phase("attach-spdy", "Succeeded")
    name = pod["metadata"]["name"]
    with pytest.raises(UpgradeRefused) as refused:
        await api.spdy(api.path("attach", "attach-spdy", "main", **flags))
    assert refused.value.status == 500
    assert refused.value.body == f"container main not found in pod {name}_{api.ns}".encode()
    with pytest.raises(UpgradeRefused) as refused:
        await api.spdy(api.path("attach", "attach-spdy", "main"))
    assert (refused.value.status, refused.value.body) == (400, b"you must specify at least 1 of stdin, stdout, "
                                                              b"stderr")
    with pytest.raises(UpgradeRefused) as refused:
        await api.spdy(f"/attach/{api.ns}/no-such-pod/main?output=1")
    assert (refused.value.status, refused.value.body) == (404, b"pod does not exist")

    # A container without stdin: output flows, stdin is read and dropped; leaving does not stop it.
    async with ws_client.session(api.ws_url(api.path("attach", "ticker", "main", **flags)), api.ctx) as ws:
        await ws.write(b"ignored\n")
        ticks = await ws.wait(lambda out: out.count(b"\n") >= 3)
        assert all(line.startswith(b"tick ") for line in ticks.splitlines()), ticks
    ticker_pod = await agent.pod("ticker")
    assert ticker_pod is not None
    assert await runtime_view.running(container_id(ticker_pod, "main"))


def _tar(name: str, payload: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


def _untar(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read()


async def test_copy_through_exec(tmp_path: Path, agent: AgentProcess) -> None:
    api = await start_api(agent, tmp_path, {"shell": shell_pod()})
    for upload, download, name in ((api.spdy, api.ws, "a.bin"), (api.ws, api.spdy, "b.bin")):
        payload = os.urandom(300_000)  # several SPDY frames, more than a stream's receive window
        into = api.path("exec", "shell", "shell", ("tar", "xmf", "-", "-C", "/tmp"), error=1, input=1, output=1)
        out = await upload(into, stdin=_tar(name, payload))
        assert (out.status, out.stderr) == (SUCCESS, b"")
        back = api.path("exec", "shell", "shell", ("tar", "cf", "-", "-C", "/tmp", name), error=1, output=1)
        out = await download(back)
        assert out.status == SUCCESS
        assert _untar(out.stdout, name) == payload


# -- the recorded API server bytes, replayed -------------------------------------------------------------------

RECORDED_SHELL = ["sh", "-c", "mkdir -p /data && printf 'fixture file line 1\\nfixture file line 2\\n' > /data/hello.txt"
                  " && exec sleep 100000"]  # the recorded pod's command (cp-spdy/notes.md)


@dataclass
class Seen:
    head: bytes
    data: dict[int, bytes]
    fins: set[int]
    resets: list[RstStream]
    goaway: list[GoAway]


def _seen(head: bytes, stream: bytes) -> Seen:
    seen = Seen(head, {}, set(), [], [])
    for frame in FrameDecoder().feed(stream):
        match frame:
            case DataFrame(sid, data, fin):
                seen.data[sid] = seen.data.get(sid, b"") + data
                if fin:
                    seen.fins.add(sid)
            case RstStream():
                seen.resets.append(frame)
            case GoAway():
                seen.goaway.append(frame)
    return seen


async def _replay(api: Api, scenario: str, path: str) -> tuple[Seen, Seen]:
    """Sends what the API server sent in `scenario` (its request head on our pod's path, then its SYN_STREAM and
    DATA frames as recorded, Go's zlib blocks included; its closing RST_STREAM/GOAWAY left out) and returns what
    the agent answered beside what the real kubelet answered."""
    rec = load(scenario)
    c2s = rec.raw("c2s")
    head_end = c2s.index(b"\r\n\r\n") + 4
    request_line, rest = c2s[:head_end].split(b"\r\n", 1)
    method, _, version = request_line.split(b" ")
    frames = b"".join(
        c2s[head_end + f["offset"]:head_end + f["offset"] + 8 + f["length"]] for f in rec.frames("c2s")
        if f["kind"] == "data" or f.get("type") == "SYN_STREAM")
    reader, writer = await asyncio.open_connection(HOST, api.port, ssl=api.ctx)
    try:
        writer.write(b" ".join((method, path.encode(), version)) + b"\r\n" + rest)
        head = await reader.readuntil(b"\r\n\r\n")  # the API server's SPDY dialer waits for the 101
        writer.write(frames)
        answer = b""
        try:
            async with asyncio.timeout(30):
                while chunk := await reader.read(65536):
                    answer += chunk
        except TimeoutError as exc:
            raise AssertionError(f"{scenario}: no end after {answer!r}") from exc
    finally:
        writer.close()
    return _seen(head, answer), _seen(rec.response_head(), rec.after_head("s2c"))


async def test_recorded_spdy_sessions_replayed(tmp_path: Path, agent: AgentProcess) -> None:
    api = await start_api(agent, tmp_path, {"shell": simple_pod("shell", [{"name": "shell", "command": RECORDED_SHELL}],
                                                               terminationGracePeriodSeconds=1),
                                            "attach-spdy": reader_pod("attach-spdy")})
    for scenario in ("exec-echo-spdy", "exec-exit3-spdy", "exec-stdin-spdy", "attach-spdy", "cp-spdy"):
        request_line = load(scenario).connection["exchanges"][0]["request"]["start_line"]
        recorded_path = request_line.split(" ")[1]
        verb, _, pod, _ = recorded_path.split("?")[0].strip("/").split("/")
        path = recorded_path.replace(f"/{verb}/fixtures/{pod}/", f"/{verb}/{api.ns}/{api.pods[pod]}/", 1)
        ours, real = await _replay(api, scenario, path)
        assert ours.head == real.head, scenario  # the 101, byte for byte
        if scenario == "cp-spdy":  # a tar has times and owners of its own: compare what it holds
            stdout = 3
            assert _untar(ours.data.pop(stdout), "data/hello.txt") == _untar(real.data.pop(stdout), "data/hello.txt")
        assert ours.data == real.data, scenario  # every stream's bytes: output, stderr, the Status
        assert ours.fins == real.fins, scenario
        assert ours.resets == real.resets, scenario
        assert ours.goaway == real.goaway, scenario


@dataclass(frozen=True)
class WsFrame:
    opcode: int
    payload: bytes  # unmasked
    raw: bytes  # as on the wire


def _ws_frames(data: bytes) -> list[WsFrame]:
    frames, pos = [], 0
    while pos + 2 <= len(data):
        start, b1 = pos, data[pos + 1]
        size, pos = b1 & 0x7F, pos + 2
        if size in (126, 127):
            width = 2 if size == 126 else 8
            size, pos = int.from_bytes(data[pos:pos + width], "big"), pos + width
        mask = data[pos:pos + 4] if b1 & 0x80 else b""
        pos += len(mask)
        payload = data[pos:pos + size]
        pos += size
        if mask:
            payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        frames.append(WsFrame(data[start] & 0x0F, payload, data[start:pos]))
    return frames


def _by_channel(frames: list[WsFrame]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for f in frames:
        if f.opcode == 2:
            out[f.payload[0]] = out.get(f.payload[0], b"") + f.payload[1:]
    return out


async def test_recorded_websocket_sessions_replayed(tmp_path: Path, agent: AgentProcess) -> None:
    api = await start_api(agent, tmp_path, {"shell": simple_pod("shell", [{"name": "shell", "command": RECORDED_SHELL}],
                                                               terminationGracePeriodSeconds=1),
                                            "attach-ws": reader_pod("attach-ws")})
    for scenario in ("exec-echo-ws", "exec-exit3-ws", "exec-stdin-ws", "attach-ws", "cp-ws"):
        rec = load(scenario)
        c2s, s2c = rec.raw("c2s"), rec.raw("s2c")
        head_end = c2s.index(b"\r\n\r\n") + 4
        request_line, rest = c2s[:head_end].split(b"\r\n", 1)
        method, recorded_path, version = request_line.decode().split(" ")
        verb, _, pod, _ = recorded_path.split("?")[0].strip("/").split("/")
        path = recorded_path.replace(f"/{verb}/fixtures/{pod}/", f"/{verb}/{api.ns}/{api.pods[pod]}/", 1)
        client = _ws_frames(c2s[head_end:])  # kubectl's frames, masked as recorded; its close answer last
        answer_close = [f for f in client if f.opcode == 8]  # (the cp-ws recording ends before kubectl's)
        client = [f for f in client if f.opcode != 8]
        reader, writer = await asyncio.open_connection(HOST, api.port, ssl=api.ctx)
        try:
            writer.write(f"{method} {path} {version}\r\n".encode() + rest)
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(b"".join(f.raw for f in client))
            answer = b""
            async with asyncio.timeout(30):
                while not any(f.opcode == 8 for f in _ws_frames(answer)):
                    chunk = await reader.read(65536)
                    assert chunk, f"{scenario}: closed before the close frame: {answer!r}"
                    answer += chunk
            writer.write(b"".join(f.raw for f in answer_close))
        finally:
            writer.close()
        real_head = s2c[:s2c.index(b"\r\n\r\n") + 4]
        for wanted in (b"HTTP/1.1 101 Switching Protocols", b"Sec-WebSocket-Accept:", b"Sec-WebSocket-Protocol:"):
            line = next(x for x in real_head.split(b"\r\n") if x.startswith(wanted))
            assert line in head.split(b"\r\n"), (scenario, line, head)
        ours, real = _ws_frames(answer), _ws_frames(s2c[len(real_head):])
        assert ours[0].payload == real[0].payload == b"\x01", scenario  # the empty stdout message first
        assert (ours[-1].opcode, ours[-1].payload) == (real[-1].opcode, real[-1].payload) == (8, b"\x03\xe8")
        mine, theirs = _by_channel(ours), _by_channel(real)
        if scenario == "cp-ws":
            assert _untar(mine.pop(1), "data/hello.txt") == _untar(theirs.pop(1), "data/hello.txt")
        assert mine == theirs, scenario  # stdout, stderr and the Status, byte for byte

"""ExecSync over Docker exec, with a deadline that never leaves the caller waiting.

Docker has no way to cancel an exec, so on timeout the exec'd process tree is killed directly:
the agent runs as root in the host PID namespace and the exec inspect reports the host pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from cri.docker.client import DockerClient, translate_errors
from cri.docker.hijack import STDERR
from cri.types import ExecResult

log = logging.getLogger(__name__)

# After the output stream ends Docker may need a moment to record the exit code.
_EXIT_CODE_POLL = 0.01
_EXIT_CODE_WAIT = 2.0


def kill_process_tree(pid: int) -> None:
    import psutil  # only for a timed-out exec: psutil's package stays out of the agent until then

    try:
        root = psutil.Process(pid)
        victims = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for process in victims:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGKILL)


async def _collect(client: DockerClient, exec_id: str, stdout: bytearray, stderr: bytearray) -> None:
    stream = await client.hijack(f"exec/{exec_id}/start", {"Detach": False, "Tty": False}, tty=False)
    try:
        while (chunk := await stream.read()) is not None:
            (stderr if chunk[0] == STDERR else stdout).extend(chunk[1])
    finally:
        await stream.close()


async def exit_code(client: DockerClient, exec_id: str) -> int:
    deadline = asyncio.get_running_loop().time() + _EXIT_CODE_WAIT
    while True:
        info = await client.get(f"exec/{exec_id}/json")
        if not info.get("Running") or asyncio.get_running_loop().time() > deadline:
            code = info.get("ExitCode")
            return -1 if code is None else int(code)
        await asyncio.sleep(_EXIT_CODE_POLL)


async def _kill_exec(client: DockerClient, exec_id: str) -> None:
    try:
        info = await client.get(f"exec/{exec_id}/json")
    except Exception as exc:  # the kill is best effort; the caller already has its answer
        log.warning("cannot inspect timed-out exec %s: %s", exec_id, exc)
        return
    pid = int(info.get("Pid") or 0)
    if info.get("Running") and pid > 0:
        kill_process_tree(pid)


async def exec_sync(client: DockerClient, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
    created = await client.post(
        f"containers/{container_id}/exec",
        {"Cmd": cmd, "AttachStdin": False, "AttachStdout": True, "AttachStderr": True, "Tty": False},
    )
    exec_id = str(created["Id"])
    stdout, stderr = bytearray(), bytearray()
    try:
        async with asyncio.timeout(timeout if timeout > 0 else None):
            with translate_errors():
                await _collect(client, exec_id, stdout, stderr)
    except TimeoutError:
        # Killing must not delay the answer: the probe deadline has already passed.
        task = asyncio.create_task(_kill_exec(client, exec_id))
        _background.add(task)
        task.add_done_callback(_background.discard)
        return ExecResult(exit_code=-1, stdout=bytes(stdout), stderr=bytes(stderr), timed_out=True)
    code = await exit_code(client, exec_id)
    return ExecResult(exit_code=code, stdout=bytes(stdout), stderr=bytes(stderr))


_background: set[asyncio.Task[None]] = set()

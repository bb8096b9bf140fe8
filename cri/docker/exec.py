"""ExecSync over Docker exec, with a deadline that never leaves the caller waiting.

Docker has no way to cancel an exec, so on timeout the exec'd process tree is killed directly:
the agent runs as root in the host PID namespace and the exec inspect reports the host pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import psutil
from aiodocker.execs import Exec

from cri.docker.client import DockerClient, translate_errors
from cri.types import ExecResult

log = logging.getLogger(__name__)

# After the output stream ends Docker may need a moment to record the exit code.
_EXIT_CODE_POLL = 0.01
_EXIT_CODE_WAIT = 2.0


def kill_process_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        victims = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for process in victims:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGKILL)


async def _collect(exec_: Exec, stdout: bytearray, stderr: bytearray) -> None:
    async with exec_.start(detach=False) as stream:
        while (message := await stream.read_out()) is not None:
            (stderr if message.stream == 2 else stdout).extend(message.data)


async def _exit_code(exec_: Exec) -> int:
    deadline = asyncio.get_running_loop().time() + _EXIT_CODE_WAIT
    while True:
        info = await exec_.inspect()
        if not info.get("Running") or asyncio.get_running_loop().time() > deadline:
            code = info.get("ExitCode")
            return -1 if code is None else int(code)
        await asyncio.sleep(_EXIT_CODE_POLL)


async def _kill_exec(exec_: Exec) -> None:
    try:
        info = await exec_.inspect()
    except Exception as exc:  # the kill is best effort; the caller already has its answer
        log.warning("cannot inspect timed-out exec %s: %s", exec_.id, exc)
        return
    pid = int(info.get("Pid") or 0)
    if info.get("Running") and pid > 0:
        kill_process_tree(pid)


async def exec_sync(client: DockerClient, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
    created = await client.post(
        f"containers/{container_id}/exec",
        {"Cmd": cmd, "AttachStdin": False, "AttachStdout": True, "AttachStderr": True, "Tty": False},
    )
    exec_ = Exec(client.raw, str(created["Id"]), tty=False)
    stdout, stderr = bytearray(), bytearray()
    try:
        async with asyncio.timeout(timeout if timeout > 0 else None):
            with translate_errors():
                await _collect(exec_, stdout, stderr)
    except TimeoutError:
        # Killing must not delay the answer: the probe deadline has already passed.
        task = asyncio.create_task(_kill_exec(exec_))
        _background.add(task)
        task.add_done_callback(_background.discard)
        return ExecResult(exit_code=-1, stdout=bytes(stdout), stderr=bytes(stderr), timed_out=True)
    with translate_errors():
        exit_code = await _exit_code(exec_)
    return ExecResult(exit_code=exit_code, stdout=bytes(stdout), stderr=bytes(stderr))


_background: set[asyncio.Task[None]] = set()

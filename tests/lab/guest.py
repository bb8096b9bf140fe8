"""A lab guest: a Debian 12 VM under qemu (TCG), booted from the cached image through a qcow2 overlay,
on the lab bridge with a fixed address, driven over ssh.

The test process runs inside the lab's network namespace (scripts/test-lab), so the taps, the guests'
addresses and the test API server's listener are all local to it; nothing leaves that namespace.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path


class GuestError(AssertionError):
    pass


@dataclass(frozen=True)
class Image:
    """A built image directory (lab/image/build.sh): base.qcow2, vmlinuz, initrd.img, id_ed25519."""

    path: Path

    @property
    def key(self) -> Path:
        return self.path / "id_ed25519"


@dataclass(frozen=True)
class Result:
    rc: int
    out: str

    def ok(self) -> str:
        return self.out


class Guest:
    def __init__(self, image: Image, rundir: Path, name: str, index: int, *, subnet: str, tap: str,
                 memory_mib: int = 1536, cpus: int = 2) -> None:
        self.image = image
        self.dir = rundir / name
        self.name = name
        self.index = index
        self.subnet = subnet
        self.ip = f"{subnet}.{10 + index}"
        self.gateway = f"{subnet}.1"
        self.mac = f"52:54:00:16:00:{index:02x}"
        self.tap = tap
        self.memory_mib = memory_mib
        self.cpus = cpus
        self.console = self.dir / "console.log"
        self.pidfile = self.dir / "qemu.pid"
        self.overlay = self.dir / "disk.qcow2"
        self.monitor = self.dir / "monitor.sock"

    # --- the VM -------------------------------------------------------------------------------------
    def qemu_argv(self, loadvm: str = "") -> list[str]:
        append = (f"root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 "
                  f"systemd.hostname={self.name} mkl.ip={self.ip}/24 mkl.gw={self.gateway} "
                  "systemd.show_status=0")
        return [
            "qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", "max", "-machine", "q35",
            "-m", str(self.memory_mib), "-smp", str(self.cpus), "-nodefaults", "-display", "none",
            "-kernel", str(self.image.path / "vmlinuz"), "-initrd", str(self.image.path / "initrd.img"),
            "-append", append,
            "-drive", f"file={self.overlay},if=virtio,cache=unsafe,discard=unmap",
            "-netdev", f"tap,id=n0,ifname={self.tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={self.mac}",
            "-device", "virtio-rng-pci",
            "-serial", f"file:{self.console}", "-pidfile", str(self.pidfile), "-daemonize",
            "-monitor", f"unix:{self.monitor},server=on,wait=off",
            *(["-loadvm", loadvm] if loadvm else []),
        ]

    async def boot(self, loadvm: str = "") -> None:
        """Boot the guest; with `loadvm`, resume that snapshot saved in the overlay instead (seconds, not a
        minute of TCG boot)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.overlay.exists():
            await _check("qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                         str(self.image.path / "base.qcow2"), str(self.overlay))
        await _check(*self.qemu_argv(loadvm))

    async def monitor_command(self, command: str, timeout: float = 300) -> str:
        """One HMP command over the monitor socket; its output (HMP reports errors as text, so callers check)."""
        reader, writer = await asyncio.open_unix_connection(str(self.monitor))
        try:
            await asyncio.wait_for(reader.readuntil(b"(qemu) "), 30)
            writer.write(command.encode() + b"\n")
            await writer.drain()
            if command == "quit":
                await asyncio.wait_for(reader.read(), timeout)
                return ""
            out = await asyncio.wait_for(reader.readuntil(b"(qemu) "), timeout)
        finally:
            writer.close()
        # the monitor echoes the command with terminal escapes before its output
        return out.decode(errors="replace").rsplit("(qemu) ", 1)[0].split("\n", 1)[-1].strip()

    async def set_clock(self) -> None:
        """A restored snapshot resumes with the clock of the moment it was saved."""
        await self.sh(f"date -u -s @{time.time():.3f} >/dev/null")

    def qemu_pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid

    async def kill(self) -> None:
        pid = self.qemu_pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if self.qemu_pid() is None:
                return
            await asyncio.sleep(0.1)
        os.kill(pid, signal.SIGKILL)

    # --- ssh ------------------------------------------------------------------------------------------
    def ssh_argv(self, *extra: str) -> list[str]:
        return ["ssh", "-q", "-i", str(self.image.key), "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=6", *extra, f"root@{self.ip}"]

    async def run(self, command: str, *, timeout: float = 300, stdin: bytes | None = None) -> Result:
        # 255 with no output is ssh's own failure (seen right after boot, sshd dropping a new connection):
        # tried again; the commands sent here are idempotent
        for _ in range(3):
            r = await self._run_once(command, timeout, stdin)
            if r.rc != 255 or r.out.strip():
                return r
            await asyncio.sleep(3)
        return r

    async def _run_once(self, command: str, timeout: float, stdin: bytes | None) -> Result:
        proc = await asyncio.create_subprocess_exec(
            *self.ssh_argv(), command, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise GuestError(f"{self.name}: {command!r} still running after {timeout:.0f}s") from None
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(errors="replace"))

    async def sh(self, command: str, *, timeout: float = 300, stdin: bytes | None = None) -> str:
        """`command` in the guest; its output, or GuestError with it when it fails."""
        r = await self.run(command, timeout=timeout, stdin=stdin)
        if r.rc != 0:
            raise GuestError(f"{self.name}: {command!r} exited {r.rc}:\n{r.out[-3000:]}")
        return r.out

    async def put(self, path: str, data: bytes, mode: str = "0644") -> None:
        await self.sh(f"install -D -m {mode} /dev/stdin {shlex.quote(path)}", stdin=data)

    async def put_dir(self, local: Path, remote: str) -> None:
        tar = await asyncio.create_subprocess_exec("tar", "-C", str(local), "-c", ".", stdout=asyncio.subprocess.PIPE)
        data, _ = await tar.communicate()
        await self.sh(f"mkdir -p {shlex.quote(remote)} && tar -C {shlex.quote(remote)} -x", stdin=data)

    async def wait_ssh(self, timeout: float = 600) -> float:
        """Seconds until ssh answered; GuestError with the console's tail after `timeout`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            try:
                if (await self.run("true", timeout=30)).rc == 0:
                    return time.monotonic() - t0
            except GuestError:
                pass
            await asyncio.sleep(2)
        raise GuestError(f"{self.name}: no ssh after {timeout:.0f}s; console:\n{self.console_tail()}")

    async def wait_ssh_gone(self, timeout: float = 120) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if (await self.run("true", timeout=15)).rc != 0:
                return
            await asyncio.sleep(1)
        raise GuestError(f"{self.name}: still answering ssh {timeout:.0f}s after the reboot")

    def console_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.console.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no console log)"

    async def forward_socket(self, local: Path, remote: str, attempts: int = 3) -> asyncio.subprocess.Process:
        """An ssh forward of the guest's unix socket `remote` to `local`, alive until the process is ended.
        Retried: right after boot, under load, sshd can drop a connection that `true` had just got through."""
        err = ""
        for _ in range(attempts):
            local.unlink(missing_ok=True)
            proc = await asyncio.create_subprocess_exec(
                *self.ssh_argv("-N", "-o", "StreamLocalBindUnlink=yes", "-o", "ExitOnForwardFailure=yes",
                               "-L", f"{local}:{remote}"),
                stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            # an ssh handshake alone took over 30 s with both guests booting on a loaded machine
            for _ in range(1200):
                if local.exists():
                    return proc
                if proc.returncode is not None:
                    break
                await asyncio.sleep(0.1)
            if proc.returncode is None:
                proc.kill()
            assert proc.stderr is not None
            err = (await proc.stderr.read()).decode(errors="replace")
            await proc.wait()
            await asyncio.sleep(3)
        raise GuestError(f"{self.name}: the ssh forward of {remote} did not come up in {attempts} attempts: {err}")


async def _check(*argv: str) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise GuestError(f"{argv[0]} exited {proc.returncode}: {out.decode(errors='replace')}")

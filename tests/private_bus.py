"""A real `dbus-daemon` of a test's own, configured like a system bus (any peer may own any name and call
anything), listening on a socket in the test's directory: where the D-Bus doubles of systemd and logind live
(the host has no systemd; docs/testing.md)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from pathlib import Path

_BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""


class PrivateBus:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.socket = str(workdir / "system_bus_socket")
        self.address = f"unix:path={self.socket}"
        self._daemon: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        daemon = shutil.which("dbus-daemon")
        assert daemon, "dbus-daemon is missing (apt-get install dbus-daemon)"
        config = self.workdir / "system.conf"
        config.write_text(_BUS_CONFIG.format(socket=self.socket))
        # --print-address: the daemon prints its address once it listens (the socket file exists a bit earlier)
        self._daemon = await asyncio.create_subprocess_exec(
            daemon, f"--config-file={config}", "--nofork", "--nopidfile", "--print-address",
            stdout=asyncio.subprocess.PIPE)
        assert self._daemon.stdout is not None
        line = await asyncio.wait_for(self._daemon.stdout.readline(), 10)
        if not line.startswith(b"unix:"):
            raise RuntimeError(f"dbus-daemon did not start listening: {line!r}")

    async def stop(self) -> None:
        if self._daemon is not None and self._daemon.returncode is None:
            self._daemon.terminate()
            with contextlib.suppress(ProcessLookupError):
                await self._daemon.wait()

"""The few systemctl calls join and reset make, behind an interface: the real `systemctl`, or a recorder
for `--root`/`--dry-run` installs and tests (this machine has no systemd)."""

from __future__ import annotations

import subprocess
from typing import Protocol


class SystemctlError(Exception):
    pass


class ServiceManager(Protocol):
    def daemon_reload(self) -> None: ...
    def enable(self, unit: str) -> None: ...
    def disable(self, unit: str) -> None: ...
    def start(self, unit: str) -> None: ...
    def restart(self, unit: str) -> None: ...
    def stop(self, unit: str) -> None: ...
    def is_active(self, unit: str) -> bool: ...


class Systemctl:
    def __init__(self, binary: str = "systemctl") -> None:
        self.binary = binary

    def _run(self, *args: str, check: bool = True) -> int:
        try:
            done = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SystemctlError(f"systemctl {' '.join(args)}: {e}") from None
        if check and done.returncode != 0:
            raise SystemctlError(f"systemctl {' '.join(args)} exited {done.returncode}: "
                                 f"{(done.stderr or done.stdout).strip()}")
        return done.returncode

    def daemon_reload(self) -> None:
        self._run("daemon-reload")

    def enable(self, unit: str) -> None:
        self._run("enable", unit)

    def disable(self, unit: str) -> None:
        self._run("disable", unit, check=False)

    def start(self, unit: str) -> None:
        self._run("start", unit)

    def restart(self, unit: str) -> None:
        self._run("restart", unit)

    def stop(self, unit: str) -> None:
        self._run("stop", unit, check=False)

    def is_active(self, unit: str) -> bool:
        return self._run("is-active", "--quiet", unit, check=False) == 0


class RecordingSystemctl:
    """Records the calls; `active` is what is-active answers (a started unit becomes active)."""

    def __init__(self, active: bool = False) -> None:
        self.calls: list[str] = []
        self.active = active

    def daemon_reload(self) -> None:
        self.calls.append("daemon-reload")

    def enable(self, unit: str) -> None:
        self.calls.append(f"enable {unit}")

    def disable(self, unit: str) -> None:
        self.calls.append(f"disable {unit}")

    def start(self, unit: str) -> None:
        self.calls.append(f"start {unit}")
        self.active = True

    def restart(self, unit: str) -> None:
        self.calls.append(f"restart {unit}")
        self.active = True

    def stop(self, unit: str) -> None:
        self.calls.append(f"stop {unit}")
        self.active = False

    def is_active(self, unit: str) -> bool:
        return self.active

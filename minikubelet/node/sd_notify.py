"""The service manager's notification protocol (sd_notify(3)): one datagram of `KEY=VALUE` lines to the
AF_UNIX socket in `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace), and the watchdog
settings systemd passes in `$WATCHDOG_USEC`/`$WATCHDOG_PID`, read as sd_watchdog_enabled(3) reads them.

Twenty lines of socket code instead of a dependency: `sdnotify` (PyPI) is unmaintained since 2017 and
`systemd-python` needs libsystemd's headers to build (docs/decisions.md).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger("minikubelet.node.sd_notify")


class Notifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        self.address = "\0" + raw[1:] if raw.startswith("@") else raw

    @property
    def enabled(self) -> bool:
        return self.address.startswith(("/", "\0"))

    def notify(self, *fields: str) -> bool:
        """Send `fields` (e.g. "READY=1"); False when there is no socket or the send failed (logged once per call)."""
        if not self.enabled:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.connect(self.address)
                s.sendall("\n".join(fields).encode())
        except OSError as e:
            log.warning("sd_notify failed", extra={"kv": {"socket": self.address.replace("\0", "@"), "err": str(e)}})
            return False
        return True


def watchdog_interval(environ: Mapping[str, str] | None = None, pid: int | None = None) -> float:
    """The watchdog timeout in seconds, or 0 when none is set for this process (WATCHDOG_PID names another)."""
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    if not usec:
        return 0.0
    try:
        value = int(usec)
    except ValueError:
        log.warning("WATCHDOG_USEC is not a number; no watchdog", extra={"kv": {"value": usec}})
        return 0.0
    if value <= 0:
        return 0.0
    owner = env.get("WATCHDOG_PID", "")
    if owner:
        try:
            if int(owner) != (os.getpid() if pid is None else pid):
                return 0.0
        except ValueError:
            return 0.0
    return value / 1_000_000

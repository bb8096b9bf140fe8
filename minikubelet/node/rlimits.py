"""Start-up descriptor limit: raise the soft RLIMIT_NOFILE to the hard limit."""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("minikubelet.node")


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE as far as the hard limit allows; return (old, new) soft limits.

    systemd gives a service a soft limit of 1024 (for select()); this agent uses epoll only, and a
    listener's connection cap is a fraction of this limit (minikubelet.server.limits).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.warning("cannot raise the open files limit", extra={"kv": {"soft": soft, "hard": hard, "err": str(e)}})
        return soft, soft
    log.info("raised the open files limit", extra={"kv": {"old": soft, "new": _show(hard)}})
    return soft, hard


def _show(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)

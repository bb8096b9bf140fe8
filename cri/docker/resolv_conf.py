"""The sandbox's resolv.conf as cri-dockerd writes it (rewriteResolvFile) after starting the pause container.

Docker merges the DNS settings it is given with the host's file, drops `search .` and orders the lines
its own way; the kubelet's config must reach the containers exactly, so the file is rewritten.
"""

from __future__ import annotations

import os

from cri.types import DNSConfig


def resolv_conf_content(dns: DNSConfig) -> str:
    """nameserver lines, then search and options when there are some; "" = leave Docker's file."""
    lines = [f"nameserver {server}" for server in dns.servers]
    if dns.searches:
        lines.append("search " + " ".join(dns.searches))
    if dns.options:
        lines.append("options " + " ".join(dns.options))
    return "".join(f"{line}\n" for line in lines)


def rewrite_resolv_conf(path: str, content: str) -> None:
    """In place, never by rename: the sandbox's containers bind-mount this inode."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w") as fh:
        fh.write(content)

"""The sandbox's resolv.conf in cri-dockerd's layout, rewritten in place."""

from __future__ import annotations

import os
from pathlib import Path

from cri.docker.resolv_conf import resolv_conf_content, rewrite_resolv_conf
from cri.types import DNSConfig


def test_resolv_conf_content_is_cri_dockerds_layout() -> None:
    dns = DNSConfig(("10.96.0.10", "fd00::10"), ("prod.svc.cluster.local", "cluster.local"), ("ndots:5", "edns0"))
    assert resolv_conf_content(dns) == (
        "nameserver 10.96.0.10\nnameserver fd00::10\nsearch prod.svc.cluster.local cluster.local\noptions ndots:5 edns0\n"
    )
    assert resolv_conf_content(DNSConfig(("127.0.0.1",), (".",))) == "nameserver 127.0.0.1\nsearch .\n"
    assert resolv_conf_content(DNSConfig()) == ""


def test_rewrite_keeps_the_inode(tmp_path: Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("search docker.example\nnameserver 8.8.8.8\nnameserver 8.8.4.4\n")
    inode = os.stat(path).st_ino
    rewrite_resolv_conf(str(path), "nameserver 10.96.0.10\n")
    assert path.read_text() == "nameserver 10.96.0.10\n"
    assert os.stat(path).st_ino == inode

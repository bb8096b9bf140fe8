"""A server context for the 10250 listener in unit tests (its self-signed pair, as standalone) and a client
context that trusts it."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from minikubelet.server.tls import self_signed_paths, serving_context


@dataclass(frozen=True)
class TlsPair:
    server: ssl.SSLContext
    client: ssl.SSLContext

    def session(self, **kw: object) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.client), **kw)  # type: ignore[arg-type]


def make_tls_pair(root: Path) -> TlsPair:
    server = serving_context("", "", "", root_dir=str(root), host="localhost", ips=["127.0.0.1"])
    client = ssl.create_default_context(cafile=self_signed_paths(str(root))[0])
    client.check_hostname = False
    return TlsPair(server, client)

"""tlsMinVersion and tlsCipherSuites on the serving SSLContext, checked by real loopback handshakes."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from minikubelet.server.tls import self_signed_paths, serving_context, tls_context, write_self_signed


def _server(tmp_path: Path, **options: object) -> ssl.SSLContext:
    cert, key = self_signed_paths(str(tmp_path))
    write_self_signed(cert, key, "node-1", ["127.0.0.1"])
    return serving_context(cert, key, "", root_dir=str(tmp_path), host="node-1", ips=["127.0.0.1"],
                           **options)  # type: ignore[arg-type]


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str, str] | None:
    """(TLS version, cipher) the two agree on, or None when the handshake fails."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    except (ssl.SSLError, ConnectionResetError):
        return None
    finally:
        srv.close()
    obj = writer.get_extra_info("ssl_object")
    result = (obj.version(), obj.cipher()[0])
    writer.close()
    return result


def _client(max_version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


async def test_default_is_tls12_and_up(tmp_path: Path) -> None:
    server = _server(tmp_path)
    assert server.minimum_version == ssl.TLSVersion.TLSv1_2
    assert (await _handshake(server, _client()) or ("", ""))[0] == "TLSv1.3"
    assert (await _handshake(server, _client(ssl.TLSVersion.TLSv1_2)) or ("", ""))[0] == "TLSv1.2"


async def test_min_version_13_refuses_a_tls12_client(tmp_path: Path) -> None:
    server = _server(tmp_path, min_version="VersionTLS13")
    assert await _handshake(server, _client(ssl.TLSVersion.TLSv1_2)) is None
    assert await _handshake(server, _client()) is not None


async def test_cipher_suites_decide_tls12(tmp_path: Path) -> None:
    server = _server(tmp_path, cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",))
    assert await _handshake(server, _client(ssl.TLSVersion.TLSv1_2)) == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")
    narrow = _server(tmp_path, cipher_suites=("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",))
    client = _client(ssl.TLSVersion.TLSv1_2)
    client.set_ciphers("ECDHE-ECDSA-AES256-GCM-SHA384")
    assert await _handshake(narrow, client) is None  # nothing in common


def test_only_unavailable_suites_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="tlsCipherSuites: none of TLS_RSA_WITH_RC4_128_SHA is available"):
        tls_context("", ("TLS_RSA_WITH_RC4_128_SHA",))


async def test_bootstrap_context_has_no_certificate_until_one_is_loaded(tmp_path: Path) -> None:
    ctx = serving_context("", "", "", root_dir=str(tmp_path), host="n", ips=[], bootstrap=True)
    assert not (tmp_path / "pki").exists()  # no self-signed pair is made for it
    assert await _handshake(ctx, _client()) is None
    cert, key = self_signed_paths(str(tmp_path / "other"))
    write_self_signed(cert, key, "n", [])
    ctx.load_cert_chain(cert, key)
    assert await _handshake(ctx, _client()) is not None

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.kubeapi.kubeconfig import (
    ExecPlugin,
    KubeconfigError,
    load_kubeconfig,
    parse_kubeconfig,
    ssl_context,
    write_kubeconfig,
)
from tests.apiserver import ApiServer


def _doc(user: str, cluster: str = "    server: https://127.0.0.1:6443\n") -> bytes:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
        f"clusters:\n- name: k\n  cluster:\n{cluster}"
        f"users:\n- name: u\n  user:\n{user}"
    ).encode()


def test_client_certificate_files_resolve_against_the_kubeconfig_dir(api_server: ApiServer, tmp_path: Path) -> None:
    identity = api_server.node_identity("n1")
    assert identity.cert_file is not None and identity.key_file is not None
    (tmp_path / "c.crt").write_bytes(identity.cert_file.read_bytes())
    (tmp_path / "c.key").write_bytes(identity.key_file.read_bytes())
    (tmp_path / "ca.crt").write_bytes(api_server.ca.cert_pem)
    conf = tmp_path / "k.conf"
    conf.write_bytes(_doc("    client-certificate: c.crt\n    client-key: c.key\n",
                          "    server: https://127.0.0.1:6443/\n    certificate-authority: ca.crt\n"))
    cfg = load_kubeconfig(str(conf))
    assert cfg.server == "https://127.0.0.1:6443"
    assert cfg.cert_file == str(tmp_path / "c.crt") and cfg.ca_pem == api_server.ca.cert_pem
    assert cfg.has_client_certificate
    ssl_context(cfg)  # loads the pair


def test_inline_data_and_token() -> None:
    ca = base64.b64encode(b"CA").decode()
    cfg = parse_kubeconfig(_doc("    token: abc.def\n", f"    server: https://h\n    certificate-authority-data: {ca}\n"),
                           "k", Path("/"))
    assert cfg.token == "abc.def" and cfg.ca_pem == b"CA" and not cfg.has_client_certificate


@pytest.mark.parametrize(("user", "message"), [
    ("    client-certificate-data: eA==\n", "must be given together"),
    ("    client-key-data: '%%%'\n", "not valid base64"),
    ("    exec: {command: x, apiVersion: client.authentication.k8s.io/v1alpha1}\n", "invalid apiVersion"),
])
def test_bad_user_is_refused_with_the_field(user: str, message: str) -> None:
    with pytest.raises(KubeconfigError, match=message):
        parse_kubeconfig(_doc(user), "k", Path("/"))


def test_missing_context_and_bad_server() -> None:
    with pytest.raises(KubeconfigError, match="no current-context"):
        parse_kubeconfig(b"apiVersion: v1\nkind: Config\n", "k", Path("/"))
    with pytest.raises(KubeconfigError, match="must be an https:// URL"):
        parse_kubeconfig(_doc("    token: t\n", "    server: ftp://x\n"), "k", Path("/"))


def test_written_kubeconfig_is_private_and_loads(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "kubelet.conf"
    write_kubeconfig(str(path), "https://10.0.0.1:6443", b"CA-PEM", "/pki/c.pem", "/pki/c.pem")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(KubeconfigError, match="cannot read client-certificate"):
        load_kubeconfig(str(path))  # the named pem does not exist


async def test_exec_plugin_token_is_cached_until_it_expires(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    script = tmp_path / "plugin.sh"
    script.write_text(
        "#!/bin/sh\necho x >> " + str(counter) + "\n"
        'echo \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        '"status":{"token":"tok-\'$(wc -l < ' + str(counter) + ")'\",\"expirationTimestamp\":\"2023-11-14T22:15:00Z\"}}'\n")
    script.chmod(0o755)
    cfg = parse_kubeconfig(_doc(f"    exec: {{command: {script}, apiVersion: client.authentication.k8s.io/v1}}\n"),
                           "k", Path("/"))
    assert cfg.exec is not None
    clock = FakeClock(start=1_700_000_000.0)  # 2023-11-14T22:13:20Z
    plugin = ExecPlugin(cfg.exec, clock)
    assert (await plugin.credential()).token.strip() == "tok-1"
    assert (await plugin.credential()).token.strip() == "tok-1"
    clock.advance(120)
    assert (await plugin.credential()).token.strip() == "tok-2"


async def test_exec_plugin_failure_is_an_error(tmp_path: Path) -> None:
    cfg = parse_kubeconfig(_doc("    exec: {command: /bin/false, apiVersion: client.authentication.k8s.io/v1}\n"),
                           "k", Path("/"))
    assert cfg.exec is not None
    with pytest.raises(KubeconfigError, match="exit status 1"):
        await ExecPlugin(cfg.exec, FakeClock()).credential()

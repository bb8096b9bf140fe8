"""Kubeconfig files (client-go tools/clientcmd): the server, its CA, and how the agent proves who it is.

Supported credentials, in client-go's order of precedence: a client certificate (files or `*-data`), a
bearer token (`token` or `tokenFile`), an exec credential plugin (`client.authentication.k8s.io/v1`).
Relative paths are resolved against the kubeconfig's directory, as clientcmd does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from minikubelet.base.clock import Clock
from minikubelet.kubeapi import client_metrics

MAX_KUBECONFIG_BYTES = 1 << 20
MAX_EXEC_OUTPUT = 1 << 20
EXEC_TIMEOUT = 30.0
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class ExecConfig:
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = EXEC_API_VERSIONS[0]
    cluster_info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientConfig:
    """One context of a kubeconfig, resolved: everything a REST client needs."""

    server: str
    ca_pem: bytes = b""
    insecure: bool = False
    tls_server_name: str = ""
    cert_pem: bytes = b""
    key_pem: bytes = b""
    cert_file: str = ""  # kept so that a rotated certificate on disk is picked up again
    key_file: str = ""
    token: str = ""
    token_file: str = ""
    exec: ExecConfig | None = None
    source: str = ""

    @property
    def has_client_certificate(self) -> bool:
        return bool(self.cert_pem and self.key_pem) or bool(self.cert_file and self.key_file)


def _read(path: str, what: str, source: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_KUBECONFIG_BYTES + 1)
    except OSError as e:
        raise KubeconfigError(f"{source}: cannot read {what} {path}: {e.strerror or e}") from None
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(f"{source}: {what} {path} is larger than {MAX_KUBECONFIG_BYTES} bytes")
    return data


def _named(items: object, name: str, kind: str, source: str) -> dict[str, Any]:
    if not isinstance(items, list):
        raise KubeconfigError(f"{source}: {kind}s must be a list")
    for item in items:
        if isinstance(item, dict) and item.get("name") == name:
            inner = item.get(kind)
            return inner if isinstance(inner, dict) else {}
    raise KubeconfigError(f"{source}: no {kind} named {name!r}")


def _data_or_file(section: Mapping[str, Any], data_key: str, file_key: str, base: Path, source: str) -> tuple[bytes, str]:
    data = section.get(data_key)
    if isinstance(data, str) and data:
        try:
            return base64.b64decode(data, validate=True), ""
        except ValueError:
            raise KubeconfigError(f"{source}: {data_key} is not valid base64") from None
    path = section.get(file_key)
    if isinstance(path, str) and path:
        resolved = str(base / path) if not os.path.isabs(path) else path
        return _read(resolved, file_key, source), resolved
    return b"", ""


def _exec_config(raw: object, source: str, cluster: Mapping[str, Any]) -> ExecConfig:
    if not isinstance(raw, dict) or not isinstance(raw.get("command"), str) or not raw["command"]:
        raise KubeconfigError(f"{source}: user.exec needs a command")
    api_version = raw.get("apiVersion", "")
    if api_version not in EXEC_API_VERSIONS:
        raise KubeconfigError(f"{source}: exec plugin: invalid apiVersion {api_version!r}")
    env = {}
    for item in raw.get("env") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            env[item["name"]] = str(item.get("value", ""))
    args = tuple(str(a) for a in raw.get("args") or [])
    info = {"server": cluster.get("server", "")} if raw.get("provideClusterInfo") else {}
    return ExecConfig(raw["command"], args, env, api_version, info)


def parse_kubeconfig(data: bytes, source: str, base: Path) -> ClientConfig:
    try:
        doc = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise KubeconfigError(f"{source}: not a valid kubeconfig: {e}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{source}: not a valid kubeconfig")
    context_name = doc.get("current-context") or ""
    if not context_name:
        raise KubeconfigError(f"{source}: no current-context")
    context = _named(doc.get("contexts"), context_name, "context", source)
    cluster = _named(doc.get("clusters"), str(context.get("cluster", "")), "cluster", source)
    user_name = str(context.get("user", ""))
    user = _named(doc.get("users"), user_name, "user", source) if user_name else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise KubeconfigError(f"{source}: cluster.server must be an https:// URL, got {server!r}")
    ca, _ = _data_or_file(cluster, "certificate-authority-data", "certificate-authority", base, source)
    cert, cert_file = _data_or_file(user, "client-certificate-data", "client-certificate", base, source)
    key, key_file = _data_or_file(user, "client-key-data", "client-key", base, source)
    if bool(cert) != bool(key):
        raise KubeconfigError(f"{source}: client-certificate and client-key must be given together")
    token = str(user.get("token") or "")
    token_file = str(user.get("tokenFile") or "")
    if token_file and not os.path.isabs(token_file):
        token_file = str(base / token_file)
    exec_cfg = _exec_config(user["exec"], source, cluster) if user.get("exec") else None
    return ClientConfig(
        server=server.rstrip("/"), ca_pem=ca, insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=str(cluster.get("tls-server-name") or ""), cert_pem=cert, key_pem=key,
        cert_file=cert_file, key_file=key_file, token=token, token_file=token_file, exec=exec_cfg, source=source,
    )


def load_kubeconfig(path: str) -> ClientConfig:
    return parse_kubeconfig(_read(path, "kubeconfig", path), path, Path(path).resolve().parent)


def write_kubeconfig(path: str, server: str, ca_pem: bytes, cert_path: str, key_path: str) -> None:
    """The kubeconfig the TLS bootstrap leaves behind (upstream writeKubeconfigFromBootstrapping), mode 0600."""
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": "default-auth", "user": {"client-certificate": cert_path, "client-key": key_path}}],
        "contexts": [{"name": "default-context", "context": {
            "cluster": "default-cluster", "user": "default-auth", "namespace": "default"}}],
        "current-context": "default-context",
    }
    atomic_write(path, yaml.safe_dump(doc, sort_keys=False).encode(), 0o600)


def atomic_write(path: str, data: bytes, mode: int) -> None:
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def ssl_context(cfg: ClientConfig, cert_pem: bytes = b"", key_pem: bytes = b"") -> ssl.SSLContext:
    """The TLS context for `cfg`: its CA (or the system's), and a client certificate if there is one."""
    ctx = ssl.create_default_context(cadata=cfg.ca_pem.decode()) if cfg.ca_pem else ssl.create_default_context()
    if cfg.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert, key = cert_pem or cfg.cert_pem, key_pem or cfg.key_pem
    if cfg.cert_file and cfg.key_file and not cert_pem:
        # Re-read: a rotated certificate replaces the file the kubeconfig names.
        cert = _read(cfg.cert_file, "client-certificate", cfg.source)
        key = _read(cfg.key_file, "client-key", cfg.source)
    if cert and key:
        load_cert_chain(ctx, cert, key)
    return ctx


def load_cert_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    # ssl loads certificates from files only: a private directory that lives for this call.
    with tempfile.TemporaryDirectory(prefix="mkl-tls-") as d:
        os.chmod(d, 0o700)
        cert_path, key_path = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
        for p, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as e:
            raise KubeconfigError(f"client certificate and key do not load: {e}") from None


@dataclass
class ExecCredential:
    token: str = ""
    cert_pem: bytes = b""
    key_pem: bytes = b""
    expires: float | None = None  # epoch seconds; None: valid until the server says 401


class _ExitStatus(KubeconfigError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ExecPlugin:
    """Runs an exec credential plugin and caches its answer until it expires (client-go's exec authenticator)."""

    def __init__(self, cfg: ExecConfig, clock: Clock) -> None:
        self.cfg = cfg
        self.clock = clock
        self._cached: ExecCredential | None = None
        self._lock = asyncio.Lock()

    def invalidate(self) -> None:
        self._cached = None

    async def credential(self) -> ExecCredential:
        async with self._lock:
            cached = self._cached
            if cached is not None and (cached.expires is None or cached.expires > self.clock.now()):
                return cached
            self._cached = await self._run_counted()
            self._certificate_metrics(cached, self._cached)
            return self._cached

    async def _run_counted(self) -> ExecCredential:
        """_run, each call counted by its outcome (client-go's rest_client_exec_plugin_call_total)."""
        code, status = "1", client_metrics.INTERNAL_ERROR
        try:
            credential = await self._run()
            code, status = "0", client_metrics.NO_ERROR
            return credential
        except FileNotFoundError:
            code, status = "1", client_metrics.NOT_FOUND
            raise
        except _ExitStatus as e:
            code, status = str(e.code), client_metrics.EXECUTION_ERROR
            raise
        finally:
            if (m := client_metrics.recorder()) is not None:
                m.exec_calls.labels(code, status).inc()

    def _certificate_metrics(self, old: ExecCredential | None, new: ExecCredential) -> None:
        m = client_metrics.recorder()
        if m is None or not new.cert_pem:
            return
        from cryptography import x509  # only for a plugin that gives certificates (a heavy import)

        try:
            cert = x509.load_pem_x509_certificate(new.cert_pem)
        except ValueError:
            return
        m.exec_expiry[self] = cert.not_valid_after_utc.timestamp()
        if old is not None and old.cert_pem and old.cert_pem != new.cert_pem:
            try:
                before = x509.load_pem_x509_certificate(old.cert_pem).not_valid_before_utc.timestamp()
            except ValueError:
                return
            m.exec_rotation.observe(time.time() - before)

    async def _run(self) -> ExecCredential:
        info: dict[str, Any] = {"apiVersion": self.cfg.api_version, "kind": "ExecCredential",
                                "spec": {"interactive": False}}
        if self.cfg.cluster_info:
            info["spec"]["cluster"] = dict(self.cfg.cluster_info)
        env = {**os.environ, **self.cfg.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        proc = await asyncio.create_subprocess_exec(
            self.cfg.command, *self.cfg.args, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            out = await asyncio.wait_for(proc.stdout.read(MAX_EXEC_OUTPUT + 1), EXEC_TIMEOUT)
            code = await asyncio.wait_for(proc.wait(), EXEC_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise KubeconfigError(f"exec plugin {self.cfg.command}: no answer within {EXEC_TIMEOUT:.0f}s") from None
        if len(out) > MAX_EXEC_OUTPUT:
            proc.kill()
            raise KubeconfigError(f"exec plugin {self.cfg.command}: output larger than {MAX_EXEC_OUTPUT} bytes")
        if code != 0:
            raise _ExitStatus(code, f"exec plugin {self.cfg.command}: exit status {code}")
        return parse_exec_credential(out, self.cfg)


def parse_exec_credential(out: bytes, cfg: ExecConfig) -> ExecCredential:
    try:
        doc = json.loads(out)
    except ValueError:
        raise KubeconfigError(f"exec plugin {cfg.command}: output is not JSON") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential" or doc.get("apiVersion") != cfg.api_version:
        raise KubeconfigError(f"exec plugin {cfg.command}: not an ExecCredential of {cfg.api_version}")
    status = doc.get("status")
    if not isinstance(status, dict):
        raise KubeconfigError(f"exec plugin {cfg.command}: no status")
    token = str(status.get("token") or "")
    cert = str(status.get("clientCertificateData") or "").encode()
    key = str(status.get("clientKeyData") or "").encode()
    if not token and not (cert and key):
        raise KubeconfigError(f"exec plugin {cfg.command}: neither a token nor a client certificate and key")
    expires = None
    if isinstance(status.get("expirationTimestamp"), str):
        try:
            expires = datetime.fromisoformat(status["expirationTimestamp"].replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise KubeconfigError(f"exec plugin {cfg.command}: bad expirationTimestamp") from None
    return ExecCredential(token, cert, key, expires)

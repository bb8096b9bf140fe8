"""rest_client_exec_plugin_*: each plugin call by outcome, the TTL of the certificate it gave, its rotation age."""

from __future__ import annotations

import datetime
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from minikubelet.base.clock import FakeClock
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.kubeapi import client_metrics
from minikubelet.kubeapi.kubeconfig import ExecConfig, ExecPlugin, KubeconfigError

API = "client.authentication.k8s.io/v1"


@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    r = CollectorRegistry()
    client_metrics.register(r)
    yield r
    client_metrics._recorder = None


def _pair(not_before: float, not_after: float) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "exec-user")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(datetime.datetime.fromtimestamp(not_before, datetime.UTC))
            .not_valid_after(datetime.datetime.fromtimestamp(not_after, datetime.UTC)).sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


def _plugin(tmp_path: Path, answers: list[tuple[str, str]]) -> ExecConfig:
    """A plugin that gives the next certificate of `answers` on each call."""
    for i, (cert, key) in enumerate(answers):
        expires = datetime.datetime.fromtimestamp(time.time() + 60 * (i + 1), datetime.UTC)
        (tmp_path / f"answer-{i}.json").write_text(json.dumps({"apiVersion": API, "kind": "ExecCredential", "status": {
            "clientCertificateData": cert, "clientKeyData": key,
            "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
    script = tmp_path / "plugin.sh"
    script.write_text(f"#!/bin/sh\nn=$(cat {tmp_path}/n 2>/dev/null || echo 0)\necho $((n+1)) > {tmp_path}/n\n"
                      f"cat {tmp_path}/answer-$n.json\n")
    script.chmod(0o755)
    return ExecConfig(command=str(script), api_version=API)


async def test_calls_ttl_and_rotation(tmp_path: Path, registry: CollectorRegistry) -> None:
    now = time.time()
    first, second = _pair(now - 3600, now + 7200), _pair(now - 10, now + 9000)
    clock = FakeClock(start=now)
    plugin = ExecPlugin(_plugin(tmp_path, [first, second]), clock)
    assert registry.get_sample_value("rest_client_exec_plugin_ttl_seconds") == math.inf
    await plugin.credential()
    assert registry.get_sample_value("rest_client_exec_plugin_call_total", {"code": "0", "call_status": "no_error"}) == 1
    ttl = registry.get_sample_value("rest_client_exec_plugin_ttl_seconds")
    assert ttl is not None and abs(ttl - 7200) < 5
    clock.advance(120)  # the credential expired: the plugin runs again and gives the second certificate
    await plugin.credential()
    assert registry.get_sample_value("rest_client_exec_plugin_call_total", {"code": "0", "call_status": "no_error"}) == 2
    age = registry.get_sample_value("rest_client_exec_plugin_certificate_rotation_age_sum")
    assert age is not None and abs(age - 3600) < 5
    ttl = registry.get_sample_value("rest_client_exec_plugin_ttl_seconds")
    assert ttl is not None and abs(ttl - 9000) < 5


async def test_failed_and_missing_plugins(tmp_path: Path, registry: CollectorRegistry) -> None:
    with pytest.raises(KubeconfigError):
        await ExecPlugin(ExecConfig(command="/bin/false", api_version=API), FakeClock()).credential()
    with pytest.raises(FileNotFoundError):
        await ExecPlugin(ExecConfig(command=str(tmp_path / "absent"), api_version=API), FakeClock()).credential()
    calls = {(s.labels["code"], s.labels["call_status"]): s.value for m in registry.collect() for s in m.samples
             if s.name == "rest_client_exec_plugin_call_total"}
    assert calls == {("1", "plugin_execution_error"): 1, ("1", "plugin_not_found_error"): 1}

"""tlsMinVersion/tlsCipherSuites/serverTLSBootstrap/streamingConnectionIdleTimeout, and /configz's wire form."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from minikubelet.config.configz import served_config
from minikubelet.config.kubelet_config import ConfigError, KubeletConfig, load_config, read_only_endpoint
from minikubelet.config.tls_names import CIPHER_SUITES, openssl_cipher_list

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
RECORDED = Path(__file__).parents[2] / "fixtures" / "kubernetes" / "kubelet-api" / "proxy-configz" / "s2c.bin"


def load(tmp_path: Path, body: str, **flags: object) -> KubeletConfig:
    path = tmp_path / "k.yaml"
    path.write_text(HEADER + body)
    return load_config(str(path), flags)[0]


def test_tls_settings_and_idle_timeout(tmp_path: Path) -> None:
    cfg = load(tmp_path, "tlsMinVersion: VersionTLS13\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
                         "serverTLSBootstrap: true\nstreamingConnectionIdleTimeout: 5m\n"
                         "authentication: {webhook: {cacheTTL: 30s}}\n")
    assert cfg.tls_min_version == "VersionTLS13" and cfg.server_tls_bootstrap
    assert cfg.tls_cipher_suites == ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",)
    assert cfg.streaming_connection_idle_timeout == 300.0 and cfg.authentication.webhook_cache_ttl == 30.0
    flags = load_config(None, {"tls_cipher_suites": "TLS_AES_128_GCM_SHA256, TLS_RSA_WITH_AES_128_CBC_SHA",
                               "tls_min_version": "VersionTLS12"})[0]
    assert flags.tls_cipher_suites == ("TLS_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA")


def test_unknown_tls_names_are_refused_with_upstreams_words(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tlsCipherSuites: Cipher suite TLS_FOO not supported or doesn't exist"):
        load(tmp_path, "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_FOO]\n")
    with pytest.raises(ConfigError, match=re.escape("tlsMinVersion: unknown tls version 'TLS1.3'")):
        load(tmp_path, "tlsMinVersion: TLS1.3\n")
    with pytest.raises(ConfigError, match="--tls-min-version"):
        load_config(None, {"tls_min_version": "VersionTLS14"})
    with pytest.raises(ConfigError, match="tlsCipherSuites: must be a list"):
        load(tmp_path, "tlsCipherSuites: 3\n")


def test_go_names_map_to_openssl_names() -> None:
    assert openssl_cipher_list(("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256",
                                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256")) \
        == "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305"
    assert openssl_cipher_list(("TLS_AES_256_GCM_SHA384",)) == ""
    assert len(CIPHER_SUITES) == 27  # Go's 10 secure (+2 legacy names), 12 insecure, 3 for TLS 1.3


def test_configz_is_the_v1beta1_wire_form(tmp_path: Path) -> None:
    cfg = load(tmp_path, "syncFrequency: 90s\nfeatureGates: {ExtendWebSocketsToKubelet: false}\nport: 10250\n"
                         "authorization: {mode: Webhook}\nclusterDNS: [10.96.0.10]\n",
               kubeconfig="/etc/kubelet.conf", node_ip="10.0.0.1")
    served = served_config(cfg)["kubeletconfig"]
    assert list(served)[:2] == ["kind", "apiVersion"]
    assert served["syncFrequency"] == "1m30s" and served["fileCheckFrequency"] == "20s"
    assert served["streamingConnectionIdleTimeout"] == "4h0m0s" and served["runtimeRequestTimeout"] == "2m0s"
    assert served["cpuCFSQuotaPeriod"] == "100ms"
    assert served["featureGates"] == {"ExtendWebSocketsToKubelet": False}
    assert served["clusterDNS"] == ["10.96.0.10"] and served["port"] == 10250
    assert served["authentication"] == {"x509": {}, "webhook": {"enabled": True, "cacheTTL": "2m0s"},
                                        "anonymous": {"enabled": False}}
    assert served["authorization"] == {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "5m0s",
                                                                      "cacheUnauthorizedTTL": "30s"}}
    assert "tlsCertFile" not in served and "kubeconfig" not in served and "nodeIP" not in served
    # the fields both have are spelled and shaped as the recorded v1.36 kubelet serves them
    recorded = json.loads(RECORDED.read_bytes().partition(b"\r\n\r\n")[2].split(b"\r\n", 1)[1].rsplit(b"\r\n0", 1)[0])
    theirs = recorded["kubeletconfig"]
    for key in ("syncFrequency", "fileCheckFrequency", "httpCheckFrequency", "streamingConnectionIdleTimeout",
                "nodeStatusUpdateFrequency", "nodeStatusReportFrequency", "runtimeRequestTimeout", "cpuCFSQuotaPeriod",
                "authorization", "authentication"):
        assert type(served[key]) is type(theirs[key]), key
    assert served["authorization"]["webhook"] == theirs["authorization"]["webhook"]
    # every field we serve is one the v1.36 kubelet serves (readOnlyPort: off on a joined node, omitted as theirs)
    assert set(served) - set(theirs) == set()


def test_read_only_endpoint_is_off_the_network_unless_set(tmp_path: Path) -> None:
    """Upstream's config-file default for readOnlyPort is 0 (SetDefaults_KubeletConfiguration); a standalone node
    keeps 10255 on loopback whatever `address` says; a port that is set listens on `address`, as upstream's."""
    standalone = load(tmp_path, "")
    assert standalone.address == "0.0.0.0"
    assert read_only_endpoint(standalone) == ("127.0.0.1", 10255)
    assert served_config(standalone)["kubeletconfig"]["readOnlyPort"] == 10255
    joined = load(tmp_path, "", kubeconfig="/etc/kubelet.conf")
    assert read_only_endpoint(joined) is None and "readOnlyPort" not in served_config(joined)["kubeletconfig"]
    assert read_only_endpoint(load(tmp_path, "readOnlyPort: 10255\n")) == ("0.0.0.0", 10255)
    assert read_only_endpoint(load(tmp_path, "readOnlyPort: 0\n")) is None
    assert read_only_endpoint(load(tmp_path, "address: 10.0.0.5\nreadOnlyPort: 12000\n",
                                   kubeconfig="/k")) == ("10.0.0.5", 12000)

"""shutdownGracePeriod, shutdownGracePeriodCriticalPods, shutdownGracePeriodByPodPriority: parsing and
upstream's cross-field validation (pkg/kubelet/apis/config/validation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikubelet.config.kubelet_config import ConfigError, KubeletConfig, ShutdownGracePeriodByPodPriority, load_config

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def _load(tmp_path: Path, body: str) -> KubeletConfig:
    path = tmp_path / "kubelet.yaml"
    path.write_text(HEADER + body)
    config, warnings = load_config(str(path), {})
    assert warnings == []
    return config


def test_defaults_are_off_and_values_parse(tmp_path: Path) -> None:
    config, _ = load_config(None, {})
    assert (config.shutdown_grace_period, config.shutdown_grace_period_critical_pods,
            config.shutdown_grace_period_by_pod_priority) == (0.0, 0.0, ())
    config = _load(tmp_path, "shutdownGracePeriod: 1m\nshutdownGracePeriodCriticalPods: 20s\n")
    assert (config.shutdown_grace_period, config.shutdown_grace_period_critical_pods) == (60.0, 20.0)
    config = _load(tmp_path, "shutdownGracePeriodByPodPriority:\n- {priority: 2000000000, shutdownGracePeriodSeconds: 10}\n"
                             "- {priority: 0, shutdownGracePeriodSeconds: 30}\n")
    assert config.shutdown_grace_period_by_pod_priority == (
        ShutdownGracePeriodByPodPriority(2000000000, 10), ShutdownGracePeriodByPodPriority(0, 30))


@pytest.mark.parametrize(("body", "message"), [
    ("shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n",
     "invalid configuration: shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s"),
    ("shutdownGracePeriod: 500ms\n",
     "invalid configuration: shutdownGracePeriod 500ms must be either zero or otherwise >= 1 sec"),
    ("shutdownGracePeriod: -1s\n", "shutdownGracePeriod -1s must be either zero or otherwise >= 1 sec"),
    ("shutdownGracePeriod: 10s\nshutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 5}]\n",
     "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"),
    ("shutdownGracePeriod: 10s\nfeatureGates: {GracefulNodeShutdown: false}\n",
     "invalid configuration: specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate "
     "GracefulNodeShutdown"),
    ("shutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 5}]\n"
     "featureGates: {GracefulNodeShutdownBasedOnPodPriority: false}\n",
     "invalid configuration: Specifying shutdownGracePeriodByPodPriority requires feature gate "
     "GracefulNodeShutdownBasedOnPodPriority"),
    ("shutdownGracePeriodByPodPriority: {priority: 0}\n", "shutdownGracePeriodByPodPriority: must be a list"),
    ("shutdownGracePeriodByPodPriority: [{priority: 3000000000, shutdownGracePeriodSeconds: 5}]\n",
     "priority must be a 32-bit integer"),
    ("shutdownGracePeriodByPodPriority: [{priority: 1, shutdownGracePeriodSeconds: '5s'}]\n",
     "shutdownGracePeriodSeconds must be an integer"),
    ("shutdownGracePeriod: 10\n", "shutdownGracePeriod: must be a duration string"),
])
def test_invalid_settings_are_refused_with_upstreams_message(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, body)
    assert message in str(err.value)


def test_configz_serves_them_as_upstream(tmp_path: Path) -> None:
    from minikubelet.config.configz import served_config

    served = served_config(KubeletConfig())["kubeletconfig"]
    # as the recorded real kubelet's /configz (kubelet-api/proxy-configz): durations always, the list omitted when empty
    assert (served["shutdownGracePeriod"], served["shutdownGracePeriodCriticalPods"]) == ("0s", "0s")
    assert "shutdownGracePeriodByPodPriority" not in served
    config = _load(tmp_path, "shutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 30}]\n")
    assert served_config(config)["kubeletconfig"]["shutdownGracePeriodByPodPriority"] == [
        {"priority": 0, "shutdownGracePeriodSeconds": 30}]

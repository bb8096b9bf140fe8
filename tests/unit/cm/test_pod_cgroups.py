from typing import Any

import pytest

from minikubelet.base.safepath import UnsafePathError
from minikubelet.cm.pod_cgroups import CgroupSetupError, build_pod_cgroups
from minikubelet.config.kubelet_config import KubeletConfig


def test_refuses_when_docker_uses_another_cgroup_driver() -> None:
    with pytest.raises(CgroupSetupError) as e:
        build_pod_cgroups(KubeletConfig(cgroup_driver="systemd"), "cgroupfs", lambda: [])
    assert str(e.value) == (
        'misconfiguration: kubelet cgroup driver: "systemd" is different from docker cgroup driver: "cgroupfs"')


def test_without_cgroups_per_qos_only_computes_limits() -> None:
    pc = build_pod_cgroups(KubeletConfig(cgroups_per_qos=False), "cgroupfs", lambda: [])
    container: dict[str, Any] = {"name": "a", "resources": {"limits": {"cpu": "200m", "memory": "32Mi"},
                                                            "requests": {"cpu": "200m", "memory": "32Mi"}}}
    pod: dict[str, Any] = {"metadata": {"uid": "u"}, "spec": {"containers": [container]}}
    assert pc.ensure_pod(pod) == "" and pc.qos_class(pod) == "Guaranteed"
    r = pc.container_resources(pod, container)
    assert r is not None
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period, r.memory_limit_bytes) == (204, 20000, 100000, 32 * 2**20)
    assert r.oom_score_adj >= pc.min_oom_score_adj


def test_a_uid_no_host_path_can_hold_is_refused_even_without_cgroups() -> None:
    pc = build_pod_cgroups(KubeletConfig(cgroups_per_qos=False), "cgroupfs", lambda: [])
    for uid in ("..", "../../victim-dir", "a/b"):
        with pytest.raises(UnsafePathError):
            pc.ensure_pod({"metadata": {"uid": uid}, "spec": {"containers": [{"name": "a"}]}})

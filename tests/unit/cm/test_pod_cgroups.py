
import pytest

from minikubelet.base.podview import PodView
from minikubelet.base.safepath import UnsafePathError
from minikubelet.cm.pod_cgroups import CgroupSetupError, PodCgroups, build_pod_cgroups
from minikubelet.config.kubelet_config import KubeletConfig


def test_refuses_when_docker_uses_another_cgroup_driver() -> None:
    with pytest.raises(CgroupSetupError) as e:
        build_pod_cgroups(KubeletConfig(cgroup_driver="systemd"), "cgroupfs", lambda: [])
    assert str(e.value) == (
        'misconfiguration: kubelet cgroup driver: "systemd" is different from docker cgroup driver: "cgroupfs"')


def test_without_cgroups_per_qos_only_computes_limits() -> None:
    pc = build_pod_cgroups(KubeletConfig(cgroups_per_qos=False), "cgroupfs", lambda: [])
    pod = PodView.of({"metadata": {"uid": "u"}, "spec": {"containers": [
        {"name": "a", "resources": {"limits": {"cpu": "200m", "memory": "32Mi"},
                                     "requests": {"cpu": "200m", "memory": "32Mi"}}}]}})
    assert pc.ensure_pod(pod) == "" and pc.qos_class(pod) == "Guaranteed"
    r = pc.container_resources(pod, pod.container("a"))
    assert r is not None
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period, r.memory_limit_bytes) == (204, 20000, 100000, 32 * 2**20)
    assert r.oom_score_adj >= pc.min_oom_score_adj


def test_active_pods_views_are_built_once_per_pod_version() -> None:
    a = {"metadata": {"uid": "a"}, "spec": {"containers": [{"name": "c"}]}}
    b = {"metadata": {"uid": "b"}, "spec": {"containers": [{"name": "c"}]}}
    active = [a, b]
    pc = PodCgroups(None, 2**30, -1000, lambda: active)
    first = pc._active_views()
    assert [v.uid for v in first] == ["a", "b"]
    assert all(x is y for x, y in zip(pc._active_views(), first, strict=True))
    a2 = {"metadata": {"uid": "a"}, "spec": {"containers": [{"name": "c", "image": "new"}]}}
    active[:] = [a2]
    (view,) = pc._active_views()
    assert view is not first[0] and view.container("c").image == "new"


def test_a_uid_no_host_path_can_hold_is_refused_even_without_cgroups() -> None:
    pc = build_pod_cgroups(KubeletConfig(cgroups_per_qos=False), "cgroupfs", lambda: [])
    for uid in ("..", "../../victim-dir", "a/b"):
        with pytest.raises(UnsafePathError):
            pc.ensure_pod(PodView.of({"metadata": {"uid": uid}, "spec": {"containers": [{"name": "a"}]}}))

"""/metrics/cadvisor: every family we write exists in the recorded kubelet 1.36.2 body with the same HELP, TYPE
and label names; the labels cAdvisor sets per kind of cgroup."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client.parser import text_string_to_metric_families

from minikubelet.stats import cadvisor_metrics
from minikubelet.stats.cgroup_reader import CgroupSpec, DeviceIo
from tests.fixtures import KUBERNETES
from tests.unit.stats.factories import snapshot
from tests.unit.stats.test_exposition import recorded_body
from tests.unit.stats.test_resource_metrics import line_shapes


def header_pairs(text: str) -> dict[str, tuple[str, str]]:
    helps = {}
    types = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            helps[name] = help_
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            types[name] = kind
    return {n: (helps[n], types[n]) for n in helps}


def test_families_headers_and_label_names_match_the_recording() -> None:
    want_text = recorded_body("proxy-metrics-cadvisor")
    got_text = cadvisor_metrics.text(snapshot())
    want, got = header_pairs(want_text), header_pairs(got_text)
    assert set(got) == set(want)  # all 68 (container_spec_cpu_quota only exists for a cgroup with a quota)
    for name, pair in got.items():
        assert want.get(name) == pair, name
    want_shapes, got_shapes = line_shapes(want_text), line_shapes(got_text)
    for name, shape in got_shapes.items():
        assert want_shapes[name] == shape, name  # label names, and a timestamp or none
    # The series dashboards use most are all there.
    for name in ("container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_memory_rss",
                 "container_network_receive_bytes_total", "container_network_transmit_bytes_total",
                 "container_fs_usage_bytes", "container_fs_limit_bytes"):
        assert name in got, name


def test_labels_per_kind_of_cgroup() -> None:
    fams = {f.name: f for f in text_string_to_metric_families(cadvisor_metrics.text(snapshot()))}
    ws = {s.labels["id"]: s.labels for s in fams["container_memory_working_set_bytes"].samples}
    pod_cg = "/kubepods/besteffort/podbd6bca9f-38b7-4a32-a9ba-4d6ae254cb00"
    assert ws["/"] == {"container": "", "id": "/", "image": "", "name": "", "namespace": "", "pod": ""}
    assert ws[pod_cg] == {"container": "", "id": pod_cg, "image": "", "name": "", "namespace": "fixtures",
                          "pod": "shell"}
    assert ws[pod_cg + "/fd4379"] == {"container": "", "id": pod_cg + "/fd4379",
                                      "image": "registry.k8s.io/pause:3.10", "name": "fd4379",
                                      "namespace": "fixtures", "pod": "shell"}
    assert ws[pod_cg + "/a3e3cc"]["container"] == "shell"
    assert ws[pod_cg + "/a3e3cc"]["image"] == "docker.io/library/busybox:1.35"
    assert set(ws) == {"/", "/kubepods", "/kubepods/besteffort", pod_cg, pod_cg + "/fd4379", pod_cg + "/a3e3cc"}
    # Pod network on the sandbox, node network on "/".
    rx = {(s.labels["id"], s.labels["interface"]): s.value for s in fams["container_network_receive_bytes"].samples}
    assert rx == {("/", "ifb0"): 0, ("/", "eth0"): 524394916, (pod_cg + "/fd4379", "eth0"): 7706}
    cpu = [s for s in fams["container_cpu_usage_seconds"].samples if s.labels["id"] == "/"]
    assert cpu[0].labels["cpu"] == "total" and cpu[0].value == 5825.326157231
    fs = fams["container_fs_usage_bytes"].samples
    assert [(s.labels["id"], s.labels["device"], s.value) for s in fs] == [("/", "/dev/vda", 31170637824)]


def test_the_cadvisor_only_series_values() -> None:
    snap = snapshot()
    pod = snap.pods[0]
    c = pod.containers[0]
    assert c.cgroup is not None
    limited = replace(c.cgroup.sample, spec=CgroupSpec(cpu_period=100000, cpu_quota=50000, cpu_shares=512),
                      io=(DeviceIo(254, 0, 7, 3), DeviceIo(9, 9, 1, 1)), oom_kills=2, memory_failcnt=5,
                      local_page_faults=11, page_faults=12, cfs_periods=40, cfs_throttled_periods=30,
                      cfs_throttled_ns=1_500_000_000)
    pod = replace(pod, containers=(replace(c, cgroup=replace(c.cgroup, sample=limited)),))
    snap = replace(snap, pods=(pod,), node=replace(snap.node, block_devices={(254, 0): "/dev/vda"}))
    fams = {f.name: f for f in text_string_to_metric_families(cadvisor_metrics.text(snap))}

    def by_id(name: str, **extra: str) -> dict[str, float]:
        return {s.labels["id"]: s.value for s in fams[name].samples
                if all(s.labels.get(k) == v for k, v in extra.items())}

    cid = "/kubepods/besteffort/podbd6bca9f-38b7-4a32-a9ba-4d6ae254cb00/a3e3cc"
    assert by_id("container_spec_cpu_quota") == {cid: 50000}  # only where a quota is set
    assert by_id("container_cpu_cfs_throttled_periods") == {cid: 30}
    assert by_id("container_cpu_cfs_throttled_seconds") == {cid: 1.5}
    assert by_id("container_spec_cpu_shares")[cid] == 512
    assert by_id("container_oom_events")[cid] == 2
    assert by_id("container_memory_failcnt")[cid] == 5
    assert by_id("container_memory_failures", failure_type="pgfault", scope="container")[cid] == 11
    assert by_id("container_memory_failures", failure_type="pgfault", scope="hierarchy")[cid] == 12
    # per-device I/O of a container where the device is known; the node's from diskstats
    reads = {(s.labels["id"], s.labels["device"]): s.value for s in fams["container_fs_reads"].samples}
    assert reads == {(cid, "/dev/vda"): 7, ("/", "/dev/vda"): 321998}
    assert by_id("container_fs_writes_bytes") == {cid: 0}  # only per container, as cAdvisor
    assert by_id("container_fs_read_seconds") == {"/": 897193 / 1e9}  # cAdvisor's ms/1e9 scale
    # open-files limit only where the container's first process is known; processes from cgroup.procs
    assert set(by_id("container_ulimits_soft")) == {cid, cid.replace("a3e3cc", "fd4379")}
    assert by_id("container_processes")[cid] == 1 and by_id("container_sockets")[cid] == 1
    assert {s.labels["state"] for s in fams["container_tasks_state"].samples} == {
        "iowaiting", "running", "sleeping", "stopped", "uninterruptible"}
    assert {s.value for s in fams["container_health_state"].samples} == {-1}
    machine = {n: f.samples[0] for n, f in fams.items() if n.startswith("machine_")}
    assert machine["machine_cpu_cores"].value == 2 and machine["machine_cpu_sockets"].value == 1
    assert machine["machine_cpu_cores"].labels["boot_id"] == "f7594652-4fa4-42b0-9c55-405465827b52"
    assert machine["machine_scrape_error"].labels == {}
    version = fams["cadvisor_version_info"].samples[0].labels
    assert version["kernelVersion"] == "6.18.44-fc-v595" and version["dockerVersion"] == ""


def test_the_family_fixture_keeps_every_family_and_label_set_of_the_recording() -> None:
    """tests/fixtures/metrics/kubelet-v1.36-cadvisor.txt (which the integration test compares with) is a faithful
    excerpt of the recorded body: the same 68 families, HELP, TYPE and label names."""
    excerpt = (KUBERNETES.parent / "metrics" / "kubelet-v1.36-cadvisor.txt").read_text()
    body = recorded_body("proxy-metrics-cadvisor")
    assert header_pairs(excerpt) == header_pairs(body) and len(header_pairs(body)) == 68
    assert line_shapes(excerpt) == line_shapes(body)

"""/metrics/cadvisor: every family we write exists in the recorded kubelet 1.36.2 body with the same HELP, TYPE
and label names; the labels cAdvisor sets per kind of cgroup."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from minikubelet.stats import cadvisor_metrics
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
    assert len(got) >= 25
    for name, pair in got.items():
        assert want.get(name) == pair, name
    want_shapes, got_shapes = line_shapes(want_text), line_shapes(got_text)
    for name, shape in got_shapes.items():
        if name.startswith("machine_"):
            continue  # the recording labels machine series with boot and machine ids we do not read
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

"""downwardAPI and projected volumes: what each item renders (upstream CollectData, ExtractFieldPathAsString,
FormatMap), modes, refusals, and the files written on a (fake) memory-backed volume."""

from __future__ import annotations

import os
import stat
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from minikubelet.volumes.atomic_writer import FileProjection
from minikubelet.volumes.downward_api import DownwardAPIError, collect_data, field_path_value, format_map
from minikubelet.volumes.manager import VolumeError, container_mounts, refresh_volumes, setup_volumes
from minikubelet.volumes.projected import ProjectedError, check_sources
from tests.unit.volumes.fake_mounter import FakeMounter

POD: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "prod", "uid": "u-1",
                 "labels": {"app": "web", "tier": "front"},
                 "annotations": {"note": 'say "hi"\nbye', "a.io/x": "1"}},
    "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "500m", "memory": "64Mi"},
                                                          "requests": {"cpu": "250m"}}},
                            {"name": "free"}]},
}
ALLOC = {"cpu": Fraction(4), "memory": Fraction(8 << 30)}


def item(path: str, **ref: Any) -> dict[str, Any]:
    return {"path": path, **ref}


def test_format_map_is_sorted_and_go_quoted() -> None:
    assert format_map({"b": "2", "a": 'x"y\n'}) == 'a="x\\"y\\n"\nb="2"'
    assert format_map({}) == ""


@pytest.mark.parametrize(("field_path", "expected"), [
    ("metadata.name", "web"),
    ("metadata.namespace", "prod"),
    ("metadata.uid", "u-1"),
    ("metadata.labels", 'app="web"\ntier="front"'),
    ("metadata.annotations", 'a.io/x="1"\nnote="say \\"hi\\"\\nbye"'),
    ("metadata.labels['tier']", "front"),
    ("metadata.annotations['a.io/x']", "1"),
    ("metadata.labels['absent']", ""),
])
def test_field_paths(field_path: str, expected: str) -> None:
    assert field_path_value(POD, field_path) == expected


@pytest.mark.parametrize(("field_path", "message"), [
    ("spec.nodeName", "unsupported fieldPath: spec.nodeName"),
    ("status.podIP", "unsupported fieldPath: status.podIP"),
    ("metadata.name['x']", 'fieldPath "metadata.name" does not support subscript'),
    ("metadata.labels['-bad-']", r"invalid key subscript in metadata.labels\['-bad-'\]: "),
])
def test_field_paths_a_volume_cannot_show(field_path: str, message: str) -> None:
    with pytest.raises(DownwardAPIError, match=message):
        field_path_value(POD, field_path)


def test_collect_data_modes_and_resources() -> None:
    data = collect_data([
        item("name", fieldRef={"fieldPath": "metadata.name"}),
        item("dir/labels", fieldRef={"fieldPath": "metadata.labels"}, mode=0o400),
        item("cpu_limit", resourceFieldRef={"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}),
        item("mem_limit", resourceFieldRef={"containerName": "app", "resource": "limits.memory", "divisor": "1Mi"}),
        item("cpu_request", resourceFieldRef={"containerName": "app", "resource": "requests.cpu"}),
        item("free_mem", resourceFieldRef={"containerName": "free", "resource": "limits.memory", "divisor": "1Gi"}),
    ], POD, 0o644, ALLOC)
    assert data == {
        "name": FileProjection(b"web", 0o644),
        "dir/labels": FileProjection(b'app="web"\ntier="front"', 0o400),
        "cpu_limit": FileProjection(b"500", 0o644),
        "mem_limit": FileProjection(b"64", 0o644),
        "cpu_request": FileProjection(b"1", 0o644),   # 250m rounded up to whole cores
        "free_mem": FileProjection(b"8", 0o644),      # no limit: node allocatable
    }


def test_every_failing_item_is_reported() -> None:
    with pytest.raises(DownwardAPIError, match=r"^\[unsupported fieldPath: spec.nodeName, .*not found"):
        collect_data([item("a", fieldRef={"fieldPath": "spec.nodeName"}),
                      item("b", resourceFieldRef={"containerName": "nope", "resource": "limits.cpu"})],
                     POD, 0o644, ALLOC)
    with pytest.raises(DownwardAPIError, match="no defaultMode"):
        collect_data([], POD, None, ALLOC)


@pytest.mark.parametrize("kind", ["clusterTrustBundle", "podCertificate"])
def test_projected_api_sources_are_refused_with_the_reason(kind: str) -> None:
    with pytest.raises(ProjectedError, match=f"projected {kind} sources are not supported yet"):
        check_sources({"sources": [{"downwardAPI": {"items": []}}, {kind: {"name": "x"}}]})


def volume_pod(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"uid": "u1", "name": "p", "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "c"}], **spec, "volumes": [
                {"name": "info", "downwardAPI": {"defaultMode": 0o644, "items": [
                    item("labels", fieldRef={"fieldPath": "metadata.labels"}),
                    item("name", fieldRef={"fieldPath": "metadata.name"}, mode=0o400)]}},
                {"name": "proj", "projected": {"defaultMode": 0o440, "sources": [
                    {"downwardAPI": {"items": [item("ns", fieldRef={"fieldPath": "metadata.namespace"})]}},
                    {"downwardAPI": {"items": [item("uid", fieldRef={"fieldPath": "metadata.uid"})]}}]}}]}}


def test_set_up_writes_on_a_memory_volume_mounted_read_only_and_refreshes(tmp_path: Path) -> None:
    m = FakeMounter()
    paths = setup_volumes(volume_pod({"v": "1"}), str(tmp_path), m)
    info, proj = Path(paths["info"]), Path(paths["proj"])
    assert str(info).endswith("pods/u1/volumes/kubernetes.io~downward-api/info")
    assert str(proj).endswith("pods/u1/volumes/kubernetes.io~projected/proj")
    assert sorted(p for p, _ in m.mounted) == sorted([str(info), str(proj)])  # both wrap a memory emptyDir
    assert (info / "labels").read_text() == 'v="1"' and (info / "name").read_text() == "p"
    assert stat.S_IMODE(os.stat(info / "name").st_mode) == 0o400
    assert (proj / "ns").read_text() == "default" and (proj / "uid").read_text() == "u1"
    assert stat.S_IMODE(os.stat(proj / "ns").st_mode) == 0o440
    mounts = container_mounts(volume_pod({}), {"name": "c", "volumeMounts": [
        {"name": "info", "mountPath": "/info"}, {"name": "proj", "mountPath": "/proj", "readOnly": False}]}, paths)
    assert [x.readonly for x in mounts] == [True, True]

    assert refresh_volumes(volume_pod({"v": "1"}), str(tmp_path)) == []
    assert refresh_volumes(volume_pod({"v": "2", "w": "3"}), str(tmp_path)) == ["info"]
    assert (info / "labels").read_text() == 'v="2"\nw="3"'


def test_fs_group_owns_the_written_files(tmp_path: Path) -> None:
    paths = setup_volumes(volume_pod({}, securityContext={"fsGroup": 4321}), str(tmp_path), FakeMounter())
    st = os.stat(Path(paths["info"]) / "labels")
    assert st.st_gid == 4321 and stat.S_IMODE(st.st_mode) == 0o644


def test_an_unserved_projected_source_fails_set_up_before_any_mount(tmp_path: Path) -> None:
    pod = volume_pod({})
    pod["spec"]["volumes"][1]["projected"]["sources"].append({"clusterTrustBundle": {"path": "token", "signerName": "x"}})
    m = FakeMounter()
    with pytest.raises(VolumeError, match="clusterTrustBundle sources are not supported yet") as e:
        setup_volumes(pod, str(tmp_path), m)
    assert e.value.volume == "proj" and m.mounted == []

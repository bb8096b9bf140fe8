import os
from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.podview import Pod
from minikubelet.volumes.manager import VolumeError, container_mounts, setup_volumes, teardown_pod_dir


def pod(volumes: list[dict[str, Any]]) -> Pod:
    return {"metadata": {"uid": "u1"}, "spec": {"volumes": volumes, "containers": []}}


def test_empty_dir_and_host_path(tmp_path: Path) -> None:
    host = tmp_path / "data"
    paths = setup_volumes(pod([{"name": "scratch", "emptyDir": {}},
                               {"name": "h", "hostPath": {"path": str(host), "type": "DirectoryOrCreate"}}]),
                          str(tmp_path / "root"))
    assert os.path.isdir(paths["scratch"]) and paths["scratch"].endswith("u1/volumes/kubernetes.io~empty-dir/scratch")
    assert host.is_dir() and paths["h"] == str(host)
    mounts = container_mounts({"volumeMounts": [{"name": "scratch", "mountPath": "/s", "readOnly": True},
                                                {"name": "h", "mountPath": "/h", "subPath": "a/b",
                                                 "mountPropagation": "HostToContainer"}]}, paths)
    assert (mounts[0].container_path, mounts[0].readonly) == ("/s", True)
    assert mounts[1].host_path == str(host / "a" / "b") and mounts[1].propagation == "rslave"
    teardown_pod_dir(str(tmp_path / "root"), "u1")
    assert not (tmp_path / "root" / "pods" / "u1").exists() and host.is_dir()  # hostPath is never removed


@pytest.mark.parametrize("sub", ["../../etc", "/etc", "a/../../x"])
def test_sub_path_cannot_leave_its_volume(tmp_path: Path, sub: str) -> None:
    with pytest.raises(VolumeError):
        container_mounts({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": sub}]}, {"v": str(tmp_path)})


def test_sub_path_symlink_escape_is_refused(tmp_path: Path) -> None:
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "link").symlink_to("/etc")
    with pytest.raises(VolumeError, match="escapes"):
        container_mounts({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "link"}]}, {"v": str(vol)})


def test_host_path_type_checks(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(VolumeError, match="not a Directory"):
        setup_volumes(pod([{"name": "h", "hostPath": {"path": str(f), "type": "Directory"}}]), str(tmp_path))
    with pytest.raises(VolumeError, match="absolute"):
        setup_volumes(pod([{"name": "h", "hostPath": {"path": "relative/x"}}]), str(tmp_path))
    assert setup_volumes(pod([{"name": "h", "hostPath": {"path": str(f), "type": "File"}}]), str(tmp_path))


def test_unknown_volume_types_and_mounts_are_errors(tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match="configMap"):
        setup_volumes(pod([{"name": "c", "configMap": {"name": "x"}}]), str(tmp_path))
    with pytest.raises(VolumeError, match="no volume"):
        container_mounts({"volumeMounts": [{"name": "missing", "mountPath": "/m"}]}, {})

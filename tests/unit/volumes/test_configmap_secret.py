"""configMap and secret volumes and projected sources (upstream MakePayload, SetUpAt): items, modes,
optional, binaryData, the messages of what is missing; secrets on tmpfs, ConfigMaps on disk; refresh."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from minikubelet.api.pod_objects import PodObjects, not_found
from minikubelet.volumes import configmap, secret
from minikubelet.volumes.atomic_writer import FileProjection
from minikubelet.volumes.configmap import ConfigMapVolumeError
from minikubelet.volumes.manager import (
    VolumeError,
    cleanup_orphaned_pod_dirs,
    container_mounts,
    refresh_volumes,
    setup_volumes,
)
from tests.unit.volumes.fake_mounter import FakeMounter


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


CM = {"metadata": {"name": "cfg", "resourceVersion": "1"}, "data": {"app.conf": "a=1\n", "other": "o"},
      "binaryData": {"blob.bin": b64(b"\x00\x01\xff")}}
SECRET = {"metadata": {"name": "creds"}, "data": {"password": b64(b"s3cr3t"), "user": b64(b"admin")}}


def objs(cm: dict[str, Any] | None = None) -> PodObjects:
    return PodObjects("ns", configmaps={"cfg": cm or CM, "gone": not_found("configmap", "gone")},
                      secrets={"creds": SECRET, "nope": not_found("secret", "nope")})


def test_all_keys_with_the_default_mode_binary_data_included() -> None:
    assert configmap.collect_data({"name": "cfg"}, objs(), 0o644) == {
        "app.conf": FileProjection(b"a=1\n", 0o644), "other": FileProjection(b"o", 0o644),
        "blob.bin": FileProjection(b"\x00\x01\xff", 0o644)}
    assert secret.collect_data({"secretName": "creds"}, objs(), 0o400) == {
        "password": FileProjection(b"s3cr3t", 0o400), "user": FileProjection(b"admin", 0o400)}


def test_items_select_keys_to_paths_with_their_own_mode() -> None:
    source = {"name": "cfg", "items": [{"key": "app.conf", "path": "etc/app.conf", "mode": 0o600},
                                       {"key": "blob.bin", "path": "b"}]}
    assert configmap.collect_data(source, objs(), 0o644) == {
        "etc/app.conf": FileProjection(b"a=1\n", 0o600), "b": FileProjection(b"\x00\x01\xff", 0o644)}


def test_missing_keys_and_objects_fail_with_upstreams_messages_unless_optional() -> None:
    with pytest.raises(ConfigMapVolumeError, match=r"^configmap references non-existent config key: nokey$"):
        configmap.collect_data({"name": "cfg", "items": [{"key": "nokey", "path": "x"}]}, objs(), 0o644)
    with pytest.raises(ConfigMapVolumeError, match=r"^references non-existent secret key: nokey$"):
        secret.collect_data({"secretName": "creds", "items": [{"key": "nokey", "path": "x"}]}, objs(), 0o644)
    assert configmap.collect_data({"name": "cfg", "optional": True, "items": [{"key": "nokey", "path": "x"}]},
                                  objs(), 0o644) == {}
    assert configmap.collect_data({"name": "gone", "optional": True}, objs(), 0o644) == {}
    assert secret.collect_data({"secretName": "nope", "optional": True}, objs(), 0o644) == {}
    with pytest.raises(Exception, match=r'^configmap "gone" not found$'):
        configmap.collect_data({"name": "gone"}, objs(), 0o644)
    with pytest.raises(ConfigMapVolumeError, match="no defaultMode"):
        configmap.collect_data({"name": "cfg"}, objs(), None)


def pod(*volumes: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"},
            "spec": {"volumes": list(volumes), "containers": [{"name": "c", "volumeMounts": [
                {"name": v["name"], "mountPath": f"/m/{v['name']}"} for v in volumes]}]}}


VOLUMES = (
    {"name": "cm", "configMap": {"name": "cfg", "defaultMode": 0o644}},
    {"name": "sec", "secret": {"secretName": "creds", "defaultMode": 0o440}},
    {"name": "proj", "projected": {"defaultMode": 0o644, "sources": [
        {"configMap": {"name": "cfg", "items": [{"key": "other", "path": "cfg/other"}]}},
        {"secret": {"name": "creds", "items": [{"key": "user", "path": "creds/user", "mode": 0o400}]}},
        {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
)


def test_set_up_secrets_on_tmpfs_configmaps_on_disk_all_read_only(tmp_path: Path) -> None:
    m = FakeMounter()
    p = pod(*VOLUMES)
    paths = setup_volumes(p, str(tmp_path), m, objects=objs())
    vols = tmp_path / "pods" / "uid-1" / "volumes"
    assert paths == {"cm": str(vols / "kubernetes.io~configmap" / "cm"), "sec": str(vols / "kubernetes.io~secret" / "sec"),
                     "proj": str(vols / "kubernetes.io~projected" / "proj")}
    assert sorted(path for path, _ in m.mounted) == sorted([os.path.realpath(paths["sec"]),
                                                             os.path.realpath(paths["proj"])])
    assert (Path(paths["cm"]) / "app.conf").read_text() == "a=1\n"
    assert (Path(paths["cm"]) / "blob.bin").read_bytes() == b"\x00\x01\xff"
    assert os.readlink(Path(paths["cm"]) / "app.conf") == "..data/app.conf"
    assert stat.S_IMODE((Path(paths["sec"]) / "password").stat().st_mode) == 0o440
    assert (Path(paths["proj"]) / "cfg" / "other").read_text() == "o"
    assert stat.S_IMODE((Path(paths["proj"]) / "creds" / "user").stat().st_mode) == 0o400
    assert (Path(paths["proj"]) / "name").read_text() == "p"
    mounts = container_mounts(p, p["spec"]["containers"][0], paths)
    assert all(mount.readonly for mount in mounts)
    # the orphan sweep unmounts the secret's tmpfs before it removes the directory
    assert cleanup_orphaned_pod_dirs(str(tmp_path), [], m) == []
    assert m.mounted == [] and not (tmp_path / "pods" / "uid-1").exists()


def test_a_change_of_the_object_is_rewritten_by_refresh(tmp_path: Path) -> None:
    m = FakeMounter()
    p = pod(VOLUMES[0])
    paths = setup_volumes(p, str(tmp_path), m, objects=objs())
    assert refresh_volumes(p, str(tmp_path), objects=objs()) == []
    changed = {**CM, "data": {"app.conf": "a=2\n"}, "binaryData": {}}
    assert refresh_volumes(p, str(tmp_path), objects=objs(changed)) == ["cm"]
    assert (Path(paths["cm"]) / "app.conf").read_text() == "a=2\n"
    assert not (Path(paths["cm"]) / "other").exists()  # a key gone is a file gone


def test_failures_name_the_volume_and_a_standalone_node_cannot_read_objects(tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match=r'^configmap "gone" not found$') as e:
        setup_volumes(pod({"name": "v", "configMap": {"name": "gone", "defaultMode": 0o644}}), str(tmp_path),
                      FakeMounter(), objects=objs())
    assert e.value.volume == "v"
    with pytest.raises(VolumeError, match=r"^\[configmap \"gone\" not found, secret \"nope\" not found\]$"):
        setup_volumes(pod({"name": "v", "projected": {"defaultMode": 0o644, "sources": [
            {"configMap": {"name": "gone"}}, {"secret": {"name": "nope"}}]}}), str(tmp_path), FakeMounter(),
            objects=objs())
    with pytest.raises(VolumeError, match=r"^couldn't get secret ns/creds, no kubeClient defined$"):
        setup_volumes(pod({"name": "v", "secret": {"secretName": "creds", "defaultMode": 0o644}}), str(tmp_path),
                      FakeMounter())


def kube_api_access(fs_group: int | None = None) -> dict[str, Any]:
    p = pod({"name": "kube-api-access-x", "projected": {"defaultMode": 0o644, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "cfg", "items": [{"key": "app.conf", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}})
    if fs_group is not None:
        p["spec"]["securityContext"] = {"fsGroup": fs_group}
    return p


def test_projected_service_account_token_with_the_ca_and_namespace(tmp_path: Path) -> None:
    with_token = PodObjects("ns", configmaps={"cfg": CM}, tokens={("", 3607): "header.claims.sig"})
    paths = setup_volumes(kube_api_access(), str(tmp_path), FakeMounter(), objects=with_token)
    vol = Path(paths["kube-api-access-x"])
    assert (vol / "token").read_text() == "header.claims.sig" and (vol / "namespace").read_text() == "ns"
    assert (vol / "ca.crt").read_text() == "a=1\n"
    assert stat.S_IMODE((vol / "token").stat().st_mode) == 0o644
    # with fsGroup the token is 0600 before the ownership pass gives the group read (0640)
    paths = setup_volumes(kube_api_access(os.getgid()), str(tmp_path / "g"), FakeMounter(), objects=with_token)
    assert stat.S_IMODE((Path(paths["kube-api-access-x"]) / "token").stat().st_mode) == 0o640
    # a refreshed token is rewritten
    refreshed = PodObjects("ns", configmaps={"cfg": CM}, tokens={("", 3607): "new.token.sig"})
    assert refresh_volumes(kube_api_access(), str(tmp_path), objects=refreshed) == ["kube-api-access-x"]
    assert (vol / "token").read_text() == "new.token.sig"


def test_a_token_that_cannot_be_had_fails_the_volume(tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match=r"^failed to fetch token: cannot use TokenManager when kubelet is in "
                                          r"standalone mode$"):
        setup_volumes(kube_api_access(), str(tmp_path), FakeMounter(), objects=PodObjects("ns", configmaps={"cfg": CM}))

"""subPath / subPathExpr (upstream makeMounts, ExpandContainerVolumeMounts, SafeMakeDir, PrepareSafeSubpath)."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikubelet.volumes.manager import VolumeError, container_mounts
from minikubelet.volumes.subpath import SubPathError, expand_sub_path_expr, resolve


@pytest.mark.parametrize(("expr", "env", "expected"), [
    ("$(POD)", {"POD": "web-0"}, "web-0"),
    ("logs/$(NS)/$(POD)", {"NS": "prod", "POD": "web-0"}, "logs/prod/web-0"),
    ("$$(POD)", {"POD": "web-0"}, "$(POD)"),  # escaped
    ("plain", {}, "plain"),
])
def test_expansion(expr: str, env: dict[str, str], expected: str) -> None:
    assert expand_sub_path_expr(expr, env) == expected


def test_unset_or_empty_variables_are_errors_listed_sorted() -> None:
    with pytest.raises(SubPathError, match=r"^missing value for B, EMPTY$"):
        expand_sub_path_expr("$(EMPTY)/$(B)/$(A)", {"A": "a", "EMPTY": ""})


@pytest.mark.parametrize(("sub", "message"), [
    ("/etc", "error SubPath `/etc` must not be an absolute path"),
    ("a/../../x", "unable to provision SubPath `a/../../x`: must not contain '..'"),
])
def test_absolute_and_backstepping_results_are_refused(tmp_path: Path, sub: str, message: str) -> None:
    with pytest.raises(SubPathError) as e:
        resolve(str(tmp_path), sub, "v", "c")
    assert str(e.value) == message


def test_missing_dirs_are_created_inside_the_volume_with_its_mode(tmp_path: Path) -> None:
    vol = tmp_path / "vol"
    vol.mkdir(mode=0o777)
    vol.chmod(0o777)
    assert resolve(str(vol), "a/b", "v", "c") == str(vol / "a" / "b")
    assert (vol / "a" / "b").is_dir()


def test_symlinks_inside_the_volume_are_followed_out_of_it_never(tmp_path: Path) -> None:
    vol = tmp_path / "vol"
    (vol / "real").mkdir(parents=True)
    (vol / "inside").symlink_to("real")
    outside = tmp_path / "outside"
    outside.mkdir()
    (vol / "out").symlink_to(outside)
    assert resolve(str(vol), "inside", "v", "c") == str(vol / "real")
    with pytest.raises(SubPathError, match=r'^failed to prepare subPath for volumeMount "v" of container "c"$'):
        resolve(str(vol), "out", "v", "c")
    with pytest.raises(SubPathError, match=r'^failed to create subPath directory for volumeMount "v" of container'):
        resolve(str(vol), "out/new", "v", "c")
    assert list(outside.iterdir()) == []


def test_sub_path_expr_mounts_the_expanded_directory(tmp_path: Path) -> None:
    c = {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/logs", "subPathExpr": "pods/$(POD_NAME)"}]}
    [m] = container_mounts({}, c, {"v": str(tmp_path)}, env=lambda: {"POD_NAME": "web-0"})
    assert m.host_path == str(tmp_path / "pods" / "web-0") and (tmp_path / "pods" / "web-0").is_dir()
    with pytest.raises(VolumeError, match="missing value for POD_NAME"):
        container_mounts({}, c, {"v": str(tmp_path)}, env=lambda: {})
    escape = {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/x", "subPathExpr": "$(P)"}]}
    with pytest.raises(VolumeError, match=r"must not contain '\.\.'"):
        container_mounts({}, escape, {"v": str(tmp_path)}, env=lambda: {"P": "../.."})
    with pytest.raises(VolumeError, match="must not be an absolute path"):
        container_mounts({}, escape, {"v": str(tmp_path)}, env=lambda: {"P": "/etc"})

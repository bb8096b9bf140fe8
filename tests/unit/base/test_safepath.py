"""Paths from hostile identifiers, and symlinks or mounts planted below the trusted base."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minikubelet.base.safepath import (
    UnsafePathError,
    create_file,
    make_dirs,
    remove_tree,
    safe_component,
    safe_join,
)

HOSTILE = ["", ".", "..", "../x", "a/b", "/abs", "x\0y", "../../victim-dir"]


@pytest.fixture
def no_mounts(tmp_path: Path) -> Path:
    m = tmp_path / "mountinfo"
    m.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    return m


@pytest.mark.parametrize("bad", [*HOSTILE, None, 5])
def test_hostile_components_are_refused(bad: object) -> None:
    with pytest.raises(UnsafePathError):
        safe_component(bad)
    with pytest.raises(UnsafePathError):
        safe_join("/root", "pods", bad)


def test_ordinary_components_join_below_the_base() -> None:
    assert safe_component("..a") == "..a" and safe_component("pod..") == "pod.."
    assert safe_join("/r/", "pods", "u1", "0-termination-log") == "/r/pods/u1/0-termination-log"


def test_make_dirs_refuses_a_planted_symlink(tmp_path: Path) -> None:
    base, outside = tmp_path / "root", tmp_path / "outside"
    base.mkdir()
    outside.mkdir()
    (base / "pods").mkdir()
    (base / "pods" / "u1").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symlink"):
        make_dirs(str(base), "pods", "u1", "volumes")
    assert list(outside.iterdir()) == []


def test_make_dirs_sets_the_leaf_mode_despite_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        p = make_dirs(str(tmp_path), "a", "b", leaf_mode=0o777)
    finally:
        os.umask(old)
    assert p == str(tmp_path / "a" / "b") and (os.stat(p).st_mode & 0o777) == 0o777


def test_create_file_never_truncates_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "root" / "c").mkdir(parents=True)
    (tmp_path / "root" / "c" / "0-log").symlink_to(victim)
    with pytest.raises(UnsafePathError):
        create_file(str(tmp_path / "root"), "c", "0-log")
    assert victim.read_text() == "precious"
    (tmp_path / "root" / "d").symlink_to(tmp_path)
    with pytest.raises(UnsafePathError):
        create_file(str(tmp_path / "root"), "d", "victim")
    assert victim.read_text() == "precious"
    assert Path(create_file(str(tmp_path / "root"), "e", "0-log")).read_bytes() == b""


def test_remove_tree_removes_links_not_their_targets(tmp_path: Path, no_mounts: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("k")
    pod = tmp_path / "root" / "pods" / "u1"
    (pod / "volumes" / "v").mkdir(parents=True)
    (pod / "volumes" / "v" / "f").write_text("x")
    (pod / "volumes" / "v" / "dirlink").symlink_to(outside)
    (pod / "filelink").symlink_to(outside / "keep")
    assert remove_tree(str(tmp_path / "root"), "pods", "u1", mountinfo=no_mounts)
    assert not pod.exists() and (tmp_path / "root" / "pods").is_dir()
    assert (outside / "keep").read_text() == "k"


def test_remove_tree_never_follows_a_symlinked_pod_dir_or_parent(tmp_path: Path, no_mounts: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "u1").mkdir(parents=True)
    (outside / "u1" / "keep").write_text("k")
    root = tmp_path / "root"
    (root / "pods").mkdir(parents=True)
    (root / "pods" / "u1").symlink_to(outside / "u1")
    assert remove_tree(str(root), "pods", "u1", mountinfo=no_mounts)  # the link is gone, its target stays
    assert not (root / "pods" / "u1").is_symlink() and (outside / "u1" / "keep").exists()

    (root / "pods").rmdir()
    (root / "pods").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        remove_tree(str(root), "pods", "u1", mountinfo=no_mounts)
    assert (outside / "u1" / "keep").exists()


def test_remove_tree_leaves_anything_mounted_inside(tmp_path: Path) -> None:
    pod = tmp_path / "root" / "pods" / "u1"
    (pod / "volumes" / "m").mkdir(parents=True)
    (pod / "volumes" / "m" / "host-file").write_text("h")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"99 1 0:50 / {pod / 'volumes' / 'm'} rw - tmpfs tmpfs rw\n")
    assert not remove_tree(str(tmp_path / "root"), "pods", "u1", mountinfo=mountinfo)
    assert (pod / "volumes" / "m" / "host-file").exists()


def test_remove_tree_of_nothing_is_done_and_the_base_itself_is_refused(tmp_path: Path, no_mounts: Path) -> None:
    assert remove_tree(str(tmp_path), "pods", "missing", mountinfo=no_mounts)
    with pytest.raises(UnsafePathError):
        remove_tree(str(tmp_path), mountinfo=no_mounts)
    with pytest.raises(UnsafePathError):
        remove_tree(str(tmp_path), "pods", "..", mountinfo=no_mounts)

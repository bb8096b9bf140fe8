"""The atomic writer (upstream atomic_writer.go): ..data swap, visible links, cleanup, modes, path rules."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from minikubelet.volumes.atomic_writer import DATA_DIR, AtomicWriteError, FileProjection, validate_path, write


def payload(**files: str) -> dict[str, FileProjection]:
    return {k.replace("__", "/"): FileProjection(v.encode(), 0o644) for k, v in files.items()}


def ts_dirs(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("..") and p.name != DATA_DIR)


def test_first_write_lays_out_data_link_timestamp_dir_and_visible_links(tmp_path: Path) -> None:
    assert write(str(tmp_path), payload(labels="a", sub__name="n"), now=lambda: 0.0) is True
    [ts] = ts_dirs(tmp_path)
    assert ts.startswith("..1970_01_01_00_00_00.")
    assert os.readlink(tmp_path / DATA_DIR) == ts
    assert os.readlink(tmp_path / "labels") == "..data/labels" and os.readlink(tmp_path / "sub") == "..data/sub"
    assert (tmp_path / "labels").read_text() == "a" and (tmp_path / "sub" / "name").read_text() == "n"
    assert stat.S_IMODE((tmp_path / ts).stat().st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([DATA_DIR, ts, "labels", "sub"])


def test_an_update_swaps_the_data_link_and_removes_the_old_dir_and_stale_names(tmp_path: Path) -> None:
    write(str(tmp_path), payload(a="1", b="2"))
    [old] = ts_dirs(tmp_path)
    assert write(str(tmp_path), payload(a="10", c="3")) is True
    [new] = ts_dirs(tmp_path)
    assert new != old and os.readlink(tmp_path / DATA_DIR) == new
    assert (tmp_path / "a").read_text() == "10" and (tmp_path / "c").read_text() == "3"
    assert not os.path.lexists(tmp_path / "b")
    assert not os.path.lexists(tmp_path / "..data_tmp")


def test_unchanged_content_is_not_rewritten(tmp_path: Path) -> None:
    write(str(tmp_path), payload(a="1"))
    before = ts_dirs(tmp_path)
    assert write(str(tmp_path), payload(a="1")) is False
    assert ts_dirs(tmp_path) == before


def test_modes_are_set_exactly_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write(str(tmp_path), {"ro": FileProjection(b"x", 0o400), "wide": FileProjection(b"y", 0o666),
                              "d/x": FileProjection(b"z", 0o755)})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ro").stat().st_mode) == 0o400
    assert stat.S_IMODE((tmp_path / "wide").stat().st_mode) == 0o666
    assert stat.S_IMODE((tmp_path / "d" / "x").stat().st_mode) == 0o755


def test_the_new_files_are_complete_before_anything_visible_changes(tmp_path: Path) -> None:
    write(str(tmp_path), payload(a="old", b="old"))
    seen: list[tuple[str, str]] = []

    def at_swap(ts_name: str) -> None:  # called once the new dir is written, just before the swap
        seen.append(((tmp_path / "a").read_text(), (tmp_path / "b").read_text()))
        assert (tmp_path / ts_name / "a").read_text() == "new" and (tmp_path / ts_name / "b").read_text() == "new"

    write(str(tmp_path), payload(a="new", b="new"), set_perms=at_swap)
    assert seen == [("old", "old")]
    assert ((tmp_path / "a").read_text(), (tmp_path / "b").read_text()) == ("new", "new")


def test_a_reader_through_data_never_sees_a_mix_of_versions(tmp_path: Path) -> None:
    write(str(tmp_path), payload(a="0", b="0"))
    stop = threading.Event()
    mixed: list[tuple[str, str]] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                ts = os.readlink(tmp_path / DATA_DIR)
                pair = ((tmp_path / ts / "a").read_text(), (tmp_path / ts / "b").read_text())
            except FileNotFoundError:
                continue  # the old dir went away after the swap: a reader retries, as with any rename
            reads += 1
            if pair[0] != pair[1]:
                mixed.append(pair)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 200):
            write(str(tmp_path), payload(a=str(i), b=str(i)))
    finally:
        stop.set()
        t.join()
    assert reads > 0 and mixed == []


def test_a_failed_write_leaves_the_old_version_and_no_temporary_dir(tmp_path: Path) -> None:
    write(str(tmp_path), payload(a="1"))
    before = sorted(p.name for p in tmp_path.iterdir())

    def fail(_ts: str) -> None:
        raise OSError("chown failed")

    with pytest.raises(OSError, match="chown failed"):
        write(str(tmp_path), payload(a="2"), set_perms=fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == before and (tmp_path / "a").read_text() == "1"


@pytest.mark.parametrize(("path", "message"), [
    ("", "must not be empty"),
    ("/etc/passwd", "must be relative path"),
    ("a/../../x", "must not contain '..'"),
    ("..data", "must not start with '..'"),
    ("..x/y", "must not start with '..'"),
    ("a" * 256, "filenames must be less than or equal to 255 characters"),
    ("a/" * 2049, "must be less than or equal to 4096 characters"),
])
def test_payload_paths_are_validated_as_upstream(tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(AtomicWriteError, match=message):
        validate_path(path)
    with pytest.raises(AtomicWriteError):
        write(str(tmp_path), {path: FileProjection(b"", 0o644)})
    assert list(tmp_path.iterdir()) == []


def test_dotted_names_that_are_not_the_writers_are_fine() -> None:
    validate_path(".hidden")
    validate_path("a/..b")

"""The du walk: the same totals whole or in slices, hard links once, the entry cap, a missing path."""

from __future__ import annotations

import os
from pathlib import Path

from minikubelet.stats.fs import DirWalk, dir_usage


def tree(base: Path) -> Path:
    root = base / "t"
    for i in range(7):
        d = root / f"d{i}" / "sub"
        d.mkdir(parents=True)
        for j in range(30):
            (d / f"f{j}").write_bytes(b"x" * 5000)
    os.link(root / "d0/sub/f0", root / "d1/hard")
    return root


def test_sliced_walk_counts_what_a_whole_walk_counts(tmp_path: Path) -> None:
    root = tree(tmp_path)
    whole = dir_usage(str(root))
    walk = DirWalk(str(root))
    steps = 1
    while not walk.step(16):
        steps += 1
    assert steps >= 7  # at least one slice per 30-file directory
    assert walk.usage == whole
    assert whole is not None and whole.inodes == 1 + 7 * 2 + 7 * 30  # root, d*, d*/sub, files; the link once


def test_the_cap_stops_a_walk(tmp_path: Path) -> None:
    root = tree(tmp_path)
    walk = DirWalk(str(root), max_entries=50)
    assert walk.step(10_000) and walk.count < 50 + 31  # whole directories: at most one over the cap
    full = dir_usage(str(root))
    assert walk.usage is not None and full is not None and walk.usage.inodes < full.inodes


def test_a_missing_path_has_no_usage(tmp_path: Path) -> None:
    assert dir_usage(str(tmp_path / "nope")) is None
    assert DirWalk(str(tmp_path / "nope")).step(1)

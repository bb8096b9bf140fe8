"""The plain os-level reads of cgroup interface files (a stats pass makes ~7 per cgroup)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgroups.driver import read_flat_keyed, read_int, read_text


def test_read_text_returns_the_whole_file_past_one_read(tmp_path: Path) -> None:
    big = "".join(f"key{i} {i}\n" for i in range(20_000))  # ~250 KB: several os.read calls
    (tmp_path / "memory.stat").write_text(big)
    assert read_text(tmp_path / "memory.stat") == big
    assert read_flat_keyed(tmp_path / "memory.stat")["key19999"] == 19999


def test_missing_files_keep_their_errors_and_defaults(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "gone")
    assert read_int(tmp_path / "gone", 7) == 7
    assert read_flat_keyed(tmp_path / "gone") == {}
    (tmp_path / "pids.max").write_text("max\n")
    (tmp_path / "cpu.weight").write_text("100\n")
    assert read_int(tmp_path / "pids.max", -1) == -1 and read_int(tmp_path / "cpu.weight") == 100


def test_flat_keyed_skips_non_numeric_values(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 12\nthrottled -3\nname abc\n\n")
    assert read_flat_keyed(tmp_path / "cpu.stat") == {"usage_usec": 12, "throttled": -3}


def test_flat_keyed_lines_of_other_shapes_are_parsed_line_by_line(tmp_path: Path) -> None:
    (tmp_path / "odd.stat").write_text("a 1 2 3\nb 4\n")  # even word count, but not "key value" lines
    assert read_flat_keyed(tmp_path / "odd.stat") == {"b": 4}
    (tmp_path / "unterminated.stat").write_text("a 1\nb 2")
    assert read_flat_keyed(tmp_path / "unterminated.stat") == {"a": 1, "b": 2}

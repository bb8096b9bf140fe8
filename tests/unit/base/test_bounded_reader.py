"""The bounded YAML loader and the regular-file reader."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
import yaml

from minikubelet.base.bounded_reader import (
    MAX_MANIFEST_BYTES,
    Bounds,
    NotRegular,
    TooLarge,
    YAMLLoadError,
    allowed_alias_ratio,
    excessive_aliasing,
    load_yaml,
    read_regular_file,
)

MANIFESTS = Path(__file__).parents[1] / "sources" / "manifests"


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    lines = ['a0: &a0 "lol"'] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
                                 for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def one(text: str) -> object:
    docs = load_yaml(text)
    assert len(docs) == 1
    return docs[0]


@pytest.mark.parametrize("name", ["nginx.yaml", "busybox.json", "invalid-pod.yaml", "deployment.yaml", "multi-doc.yaml"])
def test_same_values_as_pyyaml_safe_load(name: str) -> None:
    text = (MANIFESTS / name).read_text()
    assert load_yaml(text) == list(yaml.safe_load_all(text))


@pytest.mark.parametrize(
    ("text", "value"),
    [("a: true", {"a": True}), ("a: 'true'", {"a": "true"}), ("a: yes", {"a": True}), ("a: 0x10", {"a": 16}),
     ("a: 1_000", {"a": 1000}), ("a: 1.5", {"a": 1.5}), ("a: ~", {"a": None}), ("a: !!str 12", {"a": "12"}),
     ("a: !!int '7'", {"a": 7}), ("a: '='", {"a": "="}), ('{"a": [1, "x", null]}', {"a": [1, "x", None]}),
     ("b: &b {x: 1, y: 2}\nc: {<<: *b, y: 3}", {"b": {"x": 1, "y": 2}, "c": {"x": 1, "y": 3}}),
     ("p: &p {x: 1}\nq: &q {x: 2, z: 2}\nc: {<<: [*p, *q]}", {"p": {"x": 1}, "q": {"x": 2, "z": 2}, "c": {"x": 1, "z": 2}})],
)
def test_scalars_and_merges_resolve_as_pyyaml(text: str, value: object) -> None:
    assert one(text) == value == yaml.safe_load(text)


def test_value_key_is_a_string_as_in_go_yaml() -> None:
    assert one("a: =") == {"a": "="}  # PyYAML's safe_load has no constructor for it


def test_aliases_are_shared_not_copied() -> None:
    doc = one("env: &e [{name: A, value: x}]\nc1: *e\nc2: *e\n")
    assert isinstance(doc, dict) and doc["c1"] is doc["env"] is doc["c2"]


def test_billion_laughs_is_refused_after_bounded_work() -> None:
    started = time.monotonic()
    with pytest.raises(YAMLLoadError, match="excessive aliasing") as info:
        load_yaml(billion_laughs())
    assert info.value.bound and info.value.line == 4
    assert time.monotonic() - started < 0.5


def test_string_alias_bomb_is_refused_by_the_result_size() -> None:
    text = f's: &s "{"x" * 65536}"\nl: [' + ", ".join(["*s"] * 2048) + "]\n"
    with pytest.raises(YAMLLoadError, match="expands to more than") as info:
        load_yaml(text)
    assert info.value.bound


def test_moderate_aliasing_is_allowed() -> None:
    # 50 aliases of a 20-node mapping: 1000 of ~1060 nodes from aliases is under go-yaml's 99%
    text = "base: &b {" + ", ".join(f"k{i}: v" for i in range(10)) + "}\nl: [" + ", ".join(["*b"] * 50) + "]\n"
    doc = one(text)
    assert isinstance(doc, dict) and len(doc["l"]) == 50


@pytest.mark.parametrize(
    ("decoded", "ratio"), [(1000, 0.99), (400_000, 0.99), (2_200_000, 0.545), (4_000_000, 0.10), (9_000_000, 0.10)],
)
def test_alias_ratio_tapers_like_go_yaml(decoded: int, ratio: float) -> None:
    assert allowed_alias_ratio(decoded) == pytest.approx(ratio)


def test_small_documents_are_never_refused_for_aliasing() -> None:
    assert not excessive_aliasing(100, 100_000)
    assert not excessive_aliasing(999, 1000)
    assert excessive_aliasing(1000, 1001)


def test_depth_and_node_bounds() -> None:
    with pytest.raises(YAMLLoadError, match="nested deeper than 100 levels") as info:
        load_yaml("[" * 100_000 + "]" * 100_000)
    # where the bound is seen: the 101st level, or with PyYAML >= 6.0.4 its own limit of 1000 levels, which its
    # scanner reaches first while looking ahead for a simple key
    assert info.value.bound and (info.value.line, info.value.column) in ((1, 101), (1, 1001))
    assert one("[" * 100 + "]" * 100) is not None
    with pytest.raises(YAMLLoadError, match="more than 50 nodes"):
        load_yaml("[" + ", ".join(["1"] * 60) + "]", Bounds(max_nodes=50))


@pytest.mark.parametrize(
    ("text", "needle"),
    [("a: &a [*a]", "value contains itself"), ("a: *nope", "undefined alias"), ("a: &x 1\nb: &x 2", "duplicate anchor"),
     ("a: !!python/object:os.system {}", "unknown tag"), ("a: !foo x", "unknown tag"), ("a: {<<: 3}", "for merging"),
     ("a: !!int zz", "not a valid int")],
)
def test_structural_errors(text: str, needle: str) -> None:
    with pytest.raises(YAMLLoadError, match=needle) as info:
        load_yaml(text)
    assert not info.value.bound and info.value.line >= 1


@pytest.mark.parametrize(
    "text", ["a: 2024-01-01", "a: !!binary aGVsbG8=", "a: !!set {x}", "1: x", "? [a]\n: b", "a: .nan", "a: .inf"],
)
def test_values_without_a_json_form(text: str) -> None:
    with pytest.raises(YAMLLoadError) as info:
        load_yaml(text)
    assert info.value.no_json_form


def test_syntax_error_names_line_and_column_without_parser_noise() -> None:
    with pytest.raises(YAMLLoadError) as info:
        load_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
    msg = str(info.value)
    assert msg.startswith("line 4, column 1: ")
    assert "<unicode string>" not in msg and "\n" not in msg and "^" not in msg
    with pytest.raises(YAMLLoadError, match=r"^line 2, column 4: character '\\x00' not allowed"):
        load_yaml("a: 1\nb: \x00\n")


# ---- files ----

def test_regular_file_and_symlink_to_one(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_bytes(b"kind: Pod\n")
    data, version = read_regular_file(str(f))
    st = f.stat()
    assert data == b"kind: Pod\n"
    assert (version.ino, version.size, version.mtime_ns) == (st.st_ino, 10, st.st_mtime_ns)
    (tmp_path / "link.yaml").symlink_to(f)
    assert read_regular_file(str(tmp_path / "link.yaml"))[0] == data


def _make_entries(d: Path) -> dict[str, str]:
    """Every non-regular kind, and what the refusal must say."""
    (d / "self.yaml").symlink_to(d / "self.yaml")
    (d / "c1.yaml").symlink_to(d / "c2.yaml")
    (d / "c2.yaml").symlink_to(d / "c1.yaml")
    (d / "dangling.yaml").symlink_to(d / "missing")
    (d / "zero.yaml").symlink_to("/dev/zero")
    (d / "dir.yaml").mkdir()
    os.mkfifo(d / "fifo.yaml")
    (d / "todir.yaml").symlink_to(d / "dir.yaml")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock.yaml"))
    sock.close()
    return {"self.yaml": "symlink loop", "c1.yaml": "symlink loop", "dangling.yaml": "dangling symlink",
            "zero.yaml": "symlink to a character device", "dir.yaml": "is a directory", "fifo.yaml": "is a named pipe",
            "todir.yaml": "symlink to a directory", "sock.yaml": "is a socket"}


def test_every_non_regular_entry_is_refused_without_blocking(tmp_path: Path) -> None:
    started = time.monotonic()
    for name, needle in _make_entries(tmp_path).items():
        with pytest.raises(NotRegular, match=needle):
            read_regular_file(str(tmp_path / name))
    assert time.monotonic() - started < 1


def test_size_is_checked_before_reading(tmp_path: Path) -> None:
    f = tmp_path / "huge.yaml"
    with open(f, "wb") as fh:
        fh.truncate(MAX_MANIFEST_BYTES + 1)  # sparse: reading it would take a while, stat does not
    with pytest.raises(TooLarge, match=f"is {MAX_MANIFEST_BYTES + 1} bytes"):
        read_regular_file(str(f))
    with pytest.raises(TooLarge):
        read_regular_file(str(tmp_path / "huge.yaml"), max_bytes=10)
    with pytest.raises(FileNotFoundError):
        read_regular_file(str(tmp_path / "gone.yaml"))

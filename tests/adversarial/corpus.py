"""A corpus of hostile static pod path entries, generated on demand (nothing large is checked in).

Every case writes one entry (or a small group) into a manifest directory and says what the agent must
log about it: `expect` is a regex the log line must match, `lines` how many log lines mention the case's
token (each entry name starts with it). The bulk of invalid-field cases belongs to the validation owner:
`field_cases.py` is the hook, one (name, manifest, expected field path) per case.

    python -m tests.adversarial.corpus DIR     # write the corpus into DIR and list it
"""

from __future__ import annotations

import os
import random
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.adversarial.field_cases import field_cases

MiB = 1 << 20
POD_HEAD = "apiVersion: v1\nkind: Pod\nmetadata: {name: adv}\n"


@dataclass(frozen=True)
class Case:
    token: str  # unique, ASCII, starts every entry name of the case
    family: str
    expect: str  # regex for the log line(s)
    make: Callable[[Path, str], None]  # (directory, token) -> creates the entry
    lines: int = 1
    big: bool = False  # takes the parser seconds; the integration test uses a few


def _write(name_suffix: str, data: bytes | str) -> Callable[[Path, str], None]:
    def make(d: Path, token: str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        tmp = d / f".{token}.tmp"
        tmp.write_bytes(raw)
        os.replace(tmp, d / (token + name_suffix))
    return make


def billion_laughs(levels: int, width: int, scalar: str = '"lol"') -> str:
    lines = [f"  a0: &a0 {scalar}"] + [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
                                      for i in range(1, levels + 1)]
    return POD_HEAD + "x:\n" + "\n".join(lines) + "\n"


def merge_bomb(levels: int, width: int) -> str:
    lines = ["  m0: &m0 {k: v}"]
    for i in range(1, levels + 1):
        keys = ", ".join(f"k{j}: *m{i - 1}" for j in range(width))
        lines.append(f"  m{i}: &m{i} {{<<: *m{i - 1}, {keys}}}")
    return POD_HEAD + "x:\n" + "\n".join(lines) + "\n"


def string_bomb(size: int, copies: int) -> str:
    return POD_HEAD + f's: &s "{"x" * size}"\nl: [' + ", ".join(["*s"] * copies) + "]\n"


def deep_flow(depth: int, opener: str = "[", closer: str = "]") -> str:
    return POD_HEAD + "x: " + opener * depth + closer * depth + "\n"


def deep_block(depth: int) -> str:
    return POD_HEAD + "x:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(depth)) + "  " * (depth + 1) + "v\n"


def invalid_at_end(size: int) -> str:
    parts = [POD_HEAD, "  annotations:\n"]
    n = len(POD_HEAD)
    i = 0
    while n < size:
        line = f"    k{i}: \"{'x' * 60}\"\n"
        parts.append(line)
        n += len(line)
        i += 1
    parts.append("  bad: [unclosed\n")
    return "".join(parts).replace("metadata: {name: adv}\n", "metadata:\n  name: adv\n")


def many_nodes(count: int) -> str:
    return POD_HEAD + "x: [" + ",".join(["0"] * count) + "]\n"


def _garbage(seed: int, size: int) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(size))


def _symlink(target: str | Callable[[Path, str], str], suffix: str = ".yaml") -> Callable[[Path, str], None]:
    def make(d: Path, token: str) -> None:
        t = target(d, token) if callable(target) else target
        (d / f"{token}{suffix}").symlink_to(t)
    return make


def _cycle(d: Path, token: str) -> None:
    (d / f"{token}-a.yaml").symlink_to(d / f"{token}-b.yaml")
    (d / f"{token}-b.yaml").symlink_to(d / f"{token}-a.yaml")


def _directory(d: Path, token: str) -> None:
    (d / f"{token}.yaml").mkdir()
    (d / f"{token}.yaml" / "inner.yaml").write_text(POD_HEAD)


def _fifo(d: Path, token: str) -> None:
    os.mkfifo(d / f"{token}.yaml")


def _socket(d: Path, token: str) -> None:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(d / f"{token}.yaml"))
    finally:
        s.close()


BAD_YAML = "not valid YAML or JSON"
UTF8 = "not valid UTF-8"


def _families(good_names: list[str]) -> Iterator[tuple[str, str, Callable[[Path, str], None], int, bool]]:
    """(family, expect, make, lines, big)"""
    for levels in (4, 5, 6, 7, 8, 9, 10, 12):
        for width in (10, 16, 32, 64):
            yield "alias-bomb", "excessive aliasing", _write(".yaml", billion_laughs(levels, width)), 1, False
        yield "alias-bomb", "excessive aliasing", _write(".yaml", billion_laughs(levels, 10, "[a, b, c]")), 1, False
        yield "merge-bomb", "excessive aliasing|more than \\d+ nodes", _write(".yaml", merge_bomb(levels + 4, 8)), 1, False
    for size in (4096, 16384, 65536, 262144):
        for copies in (16 * MiB // size + 1, 32 * MiB // size, 128 * MiB // size):
            yield "string-bomb", "expands to more than|excessive aliasing", _write(".yaml", string_bomb(size, copies)), 1, False
    for depth in (101, 150, 1000, 20000, 200000):
        yield "deep", "nested deeper than", _write(".yaml", deep_flow(depth)), 1, False
        yield "deep", "nested deeper than", _write(".yaml", deep_flow(depth, "{a: ", "}")), 1, False
        yield "deep", "nested deeper than", _write(".json", '{"a":' * depth + "1" + "}" * depth), 1, False
    for depth in (101, 300):
        yield "deep", "nested deeper than", _write(".yaml", deep_block(depth)), 1, False
    yield "many-nodes", "more than 1000000 nodes", _write(".yaml", many_nodes(1_100_000)), 1, True
    yield "huge", "too_large", _write(".yaml", b"#" * (10 * MiB + 1)), 1, True
    yield "huge", "too_large", _write(".json", b"{" + b" " * (12 * MiB) + b"}"), 1, True
    yield "invalid-at-end", "line \\d{5,}, column \\d+: did not find expected", _write(".yaml", invalid_at_end(9_500_000)), 1, True
    for size in (1000, 100_000):
        yield "invalid-at-end", "line \\d+, column \\d+", _write(".yaml", invalid_at_end(size)), 1, False
    for seed in range(120):
        yield "garbage", f"{UTF8}|{BAD_YAML}|must hold a Pod|kind: must", _write(".yaml", _garbage(seed, 64 + seed * 97)), 1, False
    yield "garbage", UTF8, _write(".yaml", b"\xff\xfe" + b"\x00" * 100), 1, False
    yield "garbage", BAD_YAML, _write(".yaml", POD_HEAD.encode() + b"x: \x00\x01\x02\n"), 1, False
    yield "garbage", BAD_YAML, _write(".yaml", POD_HEAD.encode() + b"x: \x1b[31mred\n"), 1, False
    pod = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "enc"},
                          "spec": {"containers": [{"name": "c", "image": "busybox", "args": ["héllo"]}]}},
                         allow_unicode=True)
    for codec in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252", "shift_jis"):
        data = (pod.replace("héllo", "日本") if codec == "shift_jis" else pod).encode(codec)
        yield "encoding", f"{UTF8}|control characters are not allowed", _write(".yaml", data), 1, False
    for docs in (2, 3, 5):
        yield "multi-doc", f"holds {docs} documents", _write(".yaml", "---\n".join([POD_HEAD] * docs)), 1, False
    for body, expect in [
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "kind: must be"),
        ('{"apiVersion": "v1", "kind": "PodList", "items": []}', "lists are not supported"),
        ("apiVersion: v2\nkind: Pod\nmetadata: {name: p}\n", "apiVersion: must be"),
        ("kind: Pod\nmetadata: {name: p}\n", "apiVersion: must be"),
        ("apiVersion: v1\nmetadata: {name: p}\n", "kind: must be"),
        ("", "the file is empty"), ("# comment only\n", "the file is empty"), ("---\n...\n", "the file is empty"),
        ("- a\n- b\n", "got a list"), ("just a string\n", "got a string"), ("42\n", "got a number"),
        (POD_HEAD + "t: 2024-01-01\n", "no JSON form"), (POD_HEAD + "b: !!binary aGVsbG8=\n", "no JSON form"),
        (POD_HEAD + "s: !!set {a, b}\n", "no JSON form"), (POD_HEAD + "n: .nan\n", "no JSON form"),
        (POD_HEAD + "1: x\n", "no JSON form"), (POD_HEAD + "? [a, b]\n: c\n", "no JSON form"),
        (POD_HEAD + "x: !!python/object/apply:os.system [id]\n", "unknown tag"), (POD_HEAD + "x: !custom y\n", "unknown tag"),
        (POD_HEAD + "x: &a [*a]\n", "contains itself"), (POD_HEAD + "x: *undefined\n", "undefined alias"),
        (POD_HEAD + "x: &a 1\ny: &a 2\n", "duplicate anchor"),
        ("apiVersion: v1\nkind: Pod\n  bad: indent: here\n", "line 3, column"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n", "line 4, column 1"),
        ("apiVersion: v1\nkind: Pod\n\tmetadata: {}\n", "line 3, column 1"),
        ('{"apiVersion": "v1", "kind": "Pod",', "line \\d+, column \\d+"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: 'unterminated\n", "line \\d+, column \\d+"),
    ]:
        yield "structure", expect, _write(".yaml", body), 1, False
    # The good files must sort before "adv" (say "a-good-a.yaml"): the first file defining a pod wins, and
    # these copies must lose so the good pods keep running.
    for good in good_names:
        yield "duplicate", "is already defined by", _write(f"-{good}.yaml.bak", _DUPLICATE.replace("NAME", good)), 1, False
    yield "not-regular", "symlink loop", _symlink(lambda d, t: str(d / f"{t}.yaml")), 1, False
    yield "not-regular", "symlink loop", _cycle, 2, False
    yield "not-regular", "dangling symlink", _symlink("/nonexistent/target.yaml"), 1, False
    for dev in ("/dev/zero", "/dev/null", "/dev/urandom", "/dev/full"):
        yield "not-regular", "symlink to a character device", _symlink(dev), 1, False
    yield "not-regular", "symlink to a directory", _symlink("/proc/self"), 1, False
    yield "not-regular", "is a directory", _directory, 1, False
    yield "not-regular", "is a named pipe", _fifo, 1, False
    yield "not-regular", "is a socket", _socket, 1, False
    for suffix in (" with spaces.yaml", "\nnewline.yaml", "-\x1b[2Jescape.yaml", "-'quote\"=.yaml", "-日本語.yaml",
                   "-\udcff\udcfe-not-utf8.yaml", "-" + "L" * 200 + ".yaml", "--looks-like-a-flag", "-$(id).yaml",
                   "-*.yaml", "-back\\slash.json"):
        yield "hostile-name", "excessive aliasing", _write(suffix, billion_laughs(9, 10)), 1, False
    for name, manifest, field in field_cases():
        yield f"field:{name}", field.replace(".", "\\.").replace("[", "\\[").replace("]", "\\]"), _write(
            ".yaml", yaml.safe_dump(manifest)), 1, False


_DUPLICATE = ("apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\n"
              "spec: {containers: [{name: c, image: busybox, command: [sleep, '1']}]}\n")


def corpus(good_names: list[str] = ["good-a", "good-b", "good-c"], big: bool = True) -> list[Case]:  # noqa: B006
    cases = []
    for i, (family, expect, make, lines, is_big) in enumerate(_families(good_names)):
        if is_big and not big:
            continue
        cases.append(Case(f"adv{i:04d}", family, expect, make, lines, is_big))
    return cases


def hidden_cases() -> list[tuple[str, bytes]]:
    """Dotfiles are never read: even a bomb there must leave no trace in the log."""
    return [(".adv-hidden.yaml", billion_laughs(12, 32).encode()), (".adv-swap.yaml.swp", _garbage(1, 4096))]


def write(d: Path, cases: list[Case]) -> None:
    for c in cases:
        c.make(d, c.token)
    for name, data in hidden_cases():
        (d / name).write_bytes(data)


def main(argv: list[str]) -> int:
    d = Path(argv[1])
    d.mkdir(parents=True, exist_ok=True)
    cases = corpus()
    write(d, cases)
    by_family: dict[str, int] = {}
    for c in cases:
        key = c.family.split(":")[0]
        by_family[key] = by_family.get(key, 0) + 1
    print(f"{len(cases)} cases in {d}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_family.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

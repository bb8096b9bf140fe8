"""Reading manifests without letting a file hurt the reader.

Two halves, both without asyncio so a URL source and a worker process can reuse them:
- `read_regular_file`: opens only regular files (a symlink counts when it leads to one), never blocks on a
  FIFO or device, checks the size before reading, and names what it refused.
- `load_yaml`: YAML/JSON to plain JSON values, built straight from the parser's event stream with bounds on
  nesting, node count, alias expansion and the size of the result, so an alias bomb is refused after a
  bounded amount of work instead of being expanded.
"""

from __future__ import annotations

import errno
import math
import os
import stat
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

# Upstream refuses larger manifests (maxConfigLength in pkg/kubelet/config/common.go).
MAX_MANIFEST_BYTES = 10 * (1 << 20)


@dataclass(frozen=True)
class Bounds:
    """Limits on one YAML stream. Node counts include what aliases expand to, as go-yaml counts them."""

    # A Pod nests about 10 levels; 100 leaves room for deep unknown fields and keeps every later
    # recursive walk (defaulting, validation, deepcopy) far from Python's recursion limit.
    max_depth: int = 100
    # A valid pod with 200 000 env entries is about 1 000 000 nodes.
    max_nodes: int = 1_000_000
    # The result as compact JSON: 10 MiB of YAML without aliases stays under it (YAML is at most
    # ~1.6x shorter than its JSON form for pod-like content).
    max_result_bytes: int = 16 * (1 << 20)


DEFAULT_BOUNDS = Bounds()


class YAMLLoadError(ValueError):
    """A stream that is not YAML, has no JSON form, or exceeds a bound; `line`/`column` are 1-based."""

    def __init__(self, message: str, line: int = 0, column: int = 0, *, bound: bool = False,
                 no_json_form: bool = False) -> None:
        super().__init__(f"line {line}, column {column}: {message}" if line else message)
        self.line = line
        self.column = column
        self.bound = bound
        self.no_json_form = no_json_form


# go-yaml v2 decode.go (sigs.k8s.io/yaml): a document may take 99% of its decoded nodes from alias
# expansion up to 400 000 nodes, tapering to 10% at 4 000 000; below 100 aliased or 1000 total it is free.
_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


def allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def excessive_aliasing(aliased: int, decoded: int) -> bool:
    return aliased > 100 and decoded > 1000 and aliased / decoded > allowed_alias_ratio(decoded)


_T = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT = _T + "str", _T + "null", _T + "bool", _T + "int", _T + "float"
_MERGE, _VALUE, _SEQ, _MAP = _T + "merge", _T + "value", _T + "seq", _T + "map"
_NO_JSON_FORM = {_T + "timestamp", _T + "binary", _T + "set", _T + "omap", _T + "pairs"}
_RESOLVER = Resolver()
_CONSTRUCTOR = SafeConstructor()
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Merge:
    """The `<<` key: its value's mappings are merged into the enclosing mapping."""


_MERGE_KEY = _Merge()


@dataclass
class _Frame:
    container: dict[str, Any] | list[Any]
    anchor: str | None
    start_nodes: int
    start_bytes: int
    key: object = None
    has_key: bool = False
    merges: list[dict[str, Any]] = field(default_factory=list)


class _Builder:
    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.nodes = 0
        self.aliased = 0
        self.result_bytes = 0
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[object, int, int] | None] = {}  # None: still open
        self.docs: list[object] = []
        self.mark: Any = None
        self.resolved: dict[str, str] = {}  # plain scalar -> tag; keys repeat a lot

    def fail(self, message: str, **kw: bool) -> YAMLLoadError:
        m = self.mark
        return YAMLLoadError(message, m.line + 1 if m else 0, m.column + 1 if m else 0, **kw)

    def count(self, nodes: int, size: int, aliased: bool = False) -> None:
        self.nodes += nodes
        self.result_bytes += size
        b = self.bounds
        if aliased:
            self.aliased += nodes
            if excessive_aliasing(self.aliased, self.nodes):
                raise self.fail(f"document contains excessive aliasing ({self.aliased} of {self.nodes} "
                                "nodes come from aliases)", bound=True)
        if self.nodes > b.max_nodes:
            raise self.fail(f"more than {b.max_nodes} nodes (aliases expanded)", bound=True)
        if self.result_bytes > b.max_result_bytes:
            raise self.fail(f"expands to more than {b.max_result_bytes} bytes as JSON", bound=True)

    def run(self, loader: Any) -> None:
        get_event = loader.get_event
        while True:
            ev = get_event()
            kind = type(ev)
            self.mark = ev.start_mark
            if kind is yaml.ScalarEvent:
                size = len(ev.value) + 2
                self.count(1, size)
                self.value(self.scalar(ev), ev.anchor, 1, size, defined=False)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                self.start(ev)
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                self.end()
            elif kind is yaml.AliasEvent:
                self.alias(ev.anchor)
            elif kind is yaml.DocumentEndEvent:
                self.anchors.clear()
            elif kind is yaml.StreamEndEvent:
                return

    def resolve(self, value: str) -> str:
        tag = self.resolved.get(value)
        if tag is None:
            tag = str(_RESOLVER.resolve(ScalarNode, value, (True, False)))  # type: ignore[no-untyped-call]
            if len(value) <= 64 and len(self.resolved) < 4096:
                self.resolved[value] = tag
        return tag

    def scalar(self, ev: yaml.ScalarEvent) -> object:
        tag = ev.tag
        if tag is None or tag == "!":
            if not ev.implicit[0]:
                return ev.value  # quoted: always a string
            tag = self.resolve(ev.value)
        if tag in (_STR, _VALUE):
            return ev.value
        if tag == _MERGE:
            return _MERGE_KEY
        if tag in (_NULL, _BOOL, _INT, _FLOAT):
            try:
                value: object = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, ScalarNode(tag, ev.value))
            except (ValueError, KeyError, yaml.YAMLError):
                raise self.fail(f"{ev.value[:40]!r} is not a valid {tag.removeprefix(_T)}") from None
            if isinstance(value, float) and not math.isfinite(value):
                raise self.fail(f"{ev.value!r}: NaN and infinity have no JSON form", no_json_form=True)
            return value
        if tag in _NO_JSON_FORM:
            raise self.fail(f"a {tag.removeprefix(_T)} value has no JSON form", no_json_form=True)
        raise self.fail(f"unknown tag {tag[:80]!r}")

    def start(self, ev: yaml.SequenceStartEvent | yaml.MappingStartEvent) -> None:
        is_map = isinstance(ev, yaml.MappingStartEvent)
        tag = ev.tag
        if tag not in (None, "!", _MAP if is_map else _SEQ):
            if tag in _NO_JSON_FORM:
                raise self.fail(f"a {tag.removeprefix(_T)} value has no JSON form", no_json_form=True)
            raise self.fail(f"unknown tag {str(tag)[:80]!r}")
        if len(self.stack) >= self.bounds.max_depth:
            raise self.fail(f"nested deeper than {self.bounds.max_depth} levels", bound=True)
        if ev.anchor is not None:
            self.define(ev.anchor)
            self.anchors[ev.anchor] = None
        self.count(1, 2)
        container: dict[str, Any] | list[Any] = {} if is_map else []
        self.stack.append(_Frame(container, ev.anchor, self.nodes - 1, self.result_bytes - 2))

    def define(self, anchor: str) -> None:
        if anchor in self.anchors:
            # PyYAML refuses a second definition; so do we, whatever the first one was.
            raise self.fail(f"found duplicate anchor {anchor[:40]!r}")

    def end(self) -> None:
        frame = self.stack.pop()
        value: object = frame.container
        if frame.merges:
            assert isinstance(frame.container, dict)
            merged: dict[str, Any] = {}
            for m in frame.merges:
                merged.update(m)
            merged.update(frame.container)
            value = merged
        self.value(value, frame.anchor, self.nodes - frame.start_nodes, self.result_bytes - frame.start_bytes)

    def alias(self, anchor: str) -> None:
        if anchor not in self.anchors:
            raise self.fail(f"found undefined alias {anchor[:40]!r}")
        entry = self.anchors[anchor]
        if entry is None:
            raise self.fail(f"anchor {anchor[:40]!r} value contains itself")
        value, nodes, size = entry
        self.count(nodes, size, aliased=True)
        self.value(value, None, nodes, size)

    def value(self, value: object, anchor: str | None, nodes: int, size: int, defined: bool = True) -> None:
        if anchor is not None and not defined:
            self.define(anchor)
        if anchor is not None:
            self.anchors[anchor] = (value, nodes, size)
        if not self.stack:
            self.docs.append(value)
            return
        top = self.stack[-1]
        self.result_bytes += 1  # the separator
        if isinstance(top.container, list):
            top.container.append(value)
            return
        if not top.has_key:
            if value is not _MERGE_KEY and not isinstance(value, str):
                raise self.fail(f"mapping key {_describe(value)} is not a string: it has no JSON form",
                                no_json_form=True)
            top.key, top.has_key = value, True
            return
        top.has_key = False
        if top.key is _MERGE_KEY:
            top.merges.extend(self.merge_sources(value))
        else:
            assert isinstance(top.key, str)
            top.container[top.key] = value

    def merge_sources(self, value: object) -> list[dict[str, Any]]:
        if isinstance(value, dict):
            return [value]
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return list(reversed(value))  # the first mapping listed wins, as in PyYAML and go-yaml
        raise self.fail("expected a mapping or list of mappings for merging")


def _describe(value: object) -> str:
    if isinstance(value, dict | list):
        return "a mapping" if isinstance(value, dict) else "a sequence"
    return repr(value)[:40]


_PYYAML_DEPTH_LIMIT = "exceeded maximum nesting depth"


def load_yaml(text: str, bounds: Bounds = DEFAULT_BOUNDS) -> list[object]:
    """Every document in a YAML (or JSON) stream as plain JSON values; empty documents are None.

    Raises YAMLLoadError naming the line and column. Aliased values are shared, not copied, but counted
    as expanded, so whatever walks the result later walks a bounded tree.
    """
    builder = _Builder(bounds)
    loader = _LOADER(text)
    try:
        builder.run(loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if str(exc.problem or "").startswith(_PYYAML_DEPTH_LIMIT):
            # PyYAML >= 6.0.4 stops at its own depth (1000) while scanning ahead, before our smaller bound is seen
            raise YAMLLoadError(f"nested deeper than {bounds.max_depth} levels", mark.line + 1 if mark else 0,
                                mark.column + 1 if mark else 0, bound=True) from None
        problem = " ".join(str(exc.problem or exc.context or "syntax error").split())
        if exc.context and exc.problem and exc.context_mark is not None:
            cm = exc.context_mark
            problem += f" ({exc.context} at line {cm.line + 1}, column {cm.column + 1})"
        raise YAMLLoadError(problem, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0) from None
    except yaml.reader.ReaderError as exc:
        line, column = _position(text, exc.position)
        char = chr(exc.character) if isinstance(exc.character, int) else str(exc.character)
        raise YAMLLoadError(f"character {char!r} not allowed: {exc.reason}", line, column) from None
    finally:
        loader.dispose()
    return builder.docs


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    return line + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


# ---- files ----

class FileVersion(NamedTuple):
    """What identifies a version of a file without reading it."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileVersion:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class NotRegular(Exception):
    """An entry that is not a regular file (nor a symlink to one); the message says what it is."""


class TooLarge(Exception):
    pass


def file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "named pipe"), (stat.S_ISSOCK, "socket"),
             (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISLNK, "symlink"),
             (stat.S_ISREG, "regular file"))
    return next((name for test, name in kinds if test(mode)), f"file of mode {mode:o}")


def stat_regular(path: str) -> os.stat_result:
    """stat() of what `path` leads to, when that is a regular file; NotRegular (saying why) otherwise.

    FileNotFoundError when `path` itself is gone. A symlink is followed only to a regular file, as the
    kubelet's os.Stat + IsRegular does.
    """
    lst = os.lstat(path)
    if not stat.S_ISLNK(lst.st_mode):
        if not stat.S_ISREG(lst.st_mode):
            raise NotRegular(f"is a {file_kind(lst.st_mode)}, not a regular file")
        return lst
    target = _readlink(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NotRegular(f"is a dangling symlink (to {target})") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegular(f"is a symlink loop (to {target})") from None
        raise
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(f"is a symlink to a {file_kind(st.st_mode)} ({target}), not to a regular file")
    return st


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)[:256]
    except OSError:
        return "?"


def read_regular_file(path: str, max_bytes: int = MAX_MANIFEST_BYTES) -> tuple[bytes, FileVersion]:
    """The bytes of a regular file and the version they were read from.

    Raises NotRegular, TooLarge, or OSError (FileNotFoundError when it vanished). The file is opened
    non-blocking, so a FIFO swapped in after the stat cannot block the open, and the opened descriptor
    is checked again before anything is read from it.
    """
    st = stat_regular(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if st.st_ino == os.lstat(path).st_ino:
        flags |= os.O_NOFOLLOW  # not a symlink a moment ago: it must not become one now
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"is a {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise TooLarge(f"is {st.st_size} bytes; the limit is {max_bytes}")
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > max_bytes:
            raise TooLarge(f"grew beyond {max_bytes} bytes while being read")
        return b"".join(chunks), FileVersion.of(st)
    finally:
        os.close(fd)

"""The file source on a temp directory: memo of versions, one log line per change, the last good set."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from asyncinotify import Inotify

from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.metrics import Metrics
from minikubelet.sources import file as file_source
from minikubelet.sources.file import WATCH_MASK, StaticPodSource, _queued
from minikubelet.sources.manifest_worker import InProcessParser
from minikubelet.sources.static_pod import StaticPod
from tests.unit.base.test_bounded_reader import _make_entries


def manifest(name: str, **container: Any) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                           "spec": {"containers": [{"name": "c", "image": "busybox", **container}]}})


class CountingParser(InProcessParser):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def parse(self, data: bytes, filename: str, node: str, seen: float | None) -> StaticPod:
        self.calls.append(os.path.basename(filename))
        return await super().parse(data, filename, node, seen)


class Harness:
    def __init__(self, path: Path) -> None:
        self.dir = path
        self.parser = CountingParser()
        self.published: list[list[Pod]] = []
        self.clock = FakeClock()
        self.metrics = Metrics()
        self.source = StaticPodSource(str(path), "n1", self.clock, self.metrics,
                                      lambda _src, pods: self.published.append(pods), parser=self.parser)

    def put(self, name: str, text: str) -> None:
        tmp = self.dir / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.dir / name)

    async def names(self) -> list[str]:
        await self.source.sync()
        self.clock.advance(20)
        return sorted(p["metadata"]["name"] for p in self.published[-1])

    def errors(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value("minikubelet_static_pod_manifest_errors_total",
                                                       {"reason": reason})
        return value or 0.0


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    d = tmp_path / "manifests"
    d.mkdir()
    return Harness(d)


def _lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    """Log lines about the file named `needle`, or (with a space in it) lines containing that text."""
    out = []
    for r in caplog.records:
        kv = getattr(r, "kv", {})
        about = str(kv.get("file", "")).endswith("/" + needle) if " " not in needle else needle in str(kv)
        if about:
            out.append(f"{r.getMessage()} {kv}")
    return out


async def test_rejected_file_is_parsed_and_logged_once_per_change(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h.put("good.yaml", manifest("good"))
    h.put("bad.yaml", manifest("bad", ports=[{"containerPort": 70000}]))
    for _ in range(3):
        assert await h.names() == ["good-n1"]
    assert sorted(h.parser.calls) == ["bad.yaml", "good.yaml"]
    assert len(_lines(caplog, "bad.yaml")) == 1
    os.utime(h.dir / "bad.yaml", ns=(1, 1))  # a new version with the same bytes: read, not parsed
    assert await h.names() == ["good-n1"]
    assert sorted(h.parser.calls) == ["bad.yaml", "good.yaml"] and len(_lines(caplog, "bad.yaml")) == 1
    h.put("bad.yaml", manifest("bad", ports=[{"containerPort": 70001}]))
    assert await h.names() == ["good-n1"]
    assert len(_lines(caplog, "bad.yaml")) == 2 and h.errors("invalid") == 2
    h.put("bad.yaml", manifest("bad"))
    assert await h.names() == ["bad-n1", "good-n1"]
    assert h.parser.calls.count("good.yaml") == 1


async def test_unchanged_good_file_keeps_the_same_pod_object(h: Harness) -> None:
    h.put("a.yaml", manifest("a"))
    await h.names()
    first = h.published[-1][0]
    await h.names()
    assert h.published[-1][0] is first  # same config.seen, so the pod worker sees no update


async def test_non_regular_entries_are_reported_once_each(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    expected = _make_entries(h.dir)
    h.put("good.yaml", manifest("good"))
    for _ in range(3):
        assert await h.names() == ["good-n1"]
    for name, needle in expected.items():
        lines = _lines(caplog, name)
        assert len(lines) == 1 and needle in lines[0], (name, lines)
    assert h.errors("not_regular") == len(expected) + 1  # c2.yaml is the other half of the loop
    (h.dir / "dangling.yaml").unlink()
    (h.dir / "dangling.yaml").symlink_to(h.dir / "good.yaml")  # now it leads to a regular file
    assert await h.names() == ["good-n1"]
    dup = _lines(caplog, "is already defined by")
    assert len(dup) == 1 and "dangling.yaml" in dup[0]


async def test_duplicate_uid_names_both_files_and_is_counted(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """Two manifests with one metadata.uid (upstream's merge keys pods by UID and would keep one silently): the
    second file is refused, the line names both files, and the manifest error counter counts it."""
    def with_uid(name: str) -> str:
        doc = yaml.safe_load(manifest(name))
        doc["metadata"]["uid"] = "11111111-2222-3333-4444-555555555555"
        return yaml.safe_dump(doc)

    h.put("a.yaml", with_uid("alpha"))
    h.put("b.yaml", with_uid("beta"))
    for _ in range(3):
        assert await h.names() == ["alpha-n1"]
    lines = _lines(caplog, "is already defined by")
    assert len(lines) == 1 and h.errors("duplicate_uid") == 1, lines
    assert str(h.dir / "b.yaml") in lines[0] and str(h.dir / "a.yaml") in lines[0]
    assert "11111111-2222-3333-4444-555555555555" in lines[0]
    # a file earlier in name order that takes the uid later does not take it from the running pod
    h.put("0.yaml", with_uid("zero"))
    assert await h.names() == ["alpha-n1"]
    assert h.errors("duplicate_uid") == 2 and str(h.dir / "0.yaml") in _lines(caplog, "is already defined by")[-1]


async def test_duplicate_pod_is_one_line_per_change(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h.put("web.yaml", manifest("web"))
    h.put("web.yaml.bak", manifest("web", command=["old"]))
    for _ in range(4):
        assert await h.names() == ["web-n1"]
    assert len(_lines(caplog, "is already defined by")) == 1 and h.errors("duplicate") == 1
    (h.dir / "web.yaml.bak").unlink()
    assert await h.names() == ["web-n1"]
    h.put("web.yaml.bak", manifest("web", command=["old"]))
    assert await h.names() == ["web-n1"]
    assert len(_lines(caplog, "is already defined by")) == 2


async def test_unreadable_directory_keeps_the_last_set_and_removal_empties_it(
        h: Harness, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    h.put("a.yaml", manifest("a"))
    assert await h.names() == ["a-n1"]
    real_listdir = os.listdir

    def emfile(path: str) -> list[str]:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(os, "listdir", emfile)
    for _ in range(3):
        await h.source.sync()
    assert len(h.published) == 1  # nothing new published
    assert len([r for r in caplog.records if r.getMessage() == "cannot read static pod path"]) == 1
    monkeypatch.setattr(os, "listdir", real_listdir)
    assert await h.names() == ["a-n1"]
    shutil.rmtree(h.dir)
    assert await h.names() == []


async def test_transient_read_error_keeps_the_file_s_pod(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h.put("a.yaml", manifest("a"))
    assert await h.names() == ["a-n1"]

    def eio(path: str) -> Any:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(file_source, "read_regular_file", eio)
    h.put("a.yaml", manifest("a", command=["x"]))
    assert await h.names() == ["a-n1"]
    assert h.published[-1][0]["spec"]["containers"][0].get("command") is None
    assert h.errors("unreadable") == 1


async def test_too_large_file_is_refused_once_without_reading(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    with open(h.dir / "huge.yaml", "wb") as f:
        f.truncate(10 * (1 << 20) + 1)
    for _ in range(2):
        assert await h.names() == []
    assert h.parser.calls == [] and h.errors("too_large") == 1 and len(_lines(caplog, "huge.yaml")) == 1


async def test_log_line_cuts_long_values(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h.put("long.yaml", manifest("x" * 100_000))
    many = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m"},
            "spec": {"containers": [{"name": f"C{i}", "image": "busybox"} for i in range(40)]}}
    h.put("many.yaml", yaml.safe_dump(many))
    h.put("syntax.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n")
    assert await h.names() == []
    caplog.handler.setFormatter(logging.Formatter("%(message)s"))
    (long_line,) = _lines(caplog, "long.yaml")
    assert "metadata.name" in long_line and len(long_line) < 2000 and "more characters" in long_line
    (many_line,) = _lines(caplog, "many.yaml")
    assert "and 30 more errors" in many_line and len(many_line) < 4000
    (syntax,) = _lines(caplog, "syntax.yaml")
    assert "line 4, column 1" in syntax and "<unicode string>" not in syntax


async def test_single_file_path(tmp_path: Path) -> None:
    f = tmp_path / "only.yaml"
    f.write_text(manifest("only"))
    h = Harness(f)
    assert await h.names() == ["only-n1"]


async def _until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout  # real seconds: the kernel's inotify is the point
    while not condition():
        assert time.monotonic() < deadline, "the watch did not publish in time"
        await asyncio.sleep(0.01)


async def test_the_inotify_watch_publishes_changes_without_the_periodic_relist(h: Harness) -> None:
    """The FakeClock never advances, so only the watch (inotify on the loop) can publish these changes; a burst of
    writes is coalesced into few re-lists; the directory removed and made again is watched again."""
    watcher = asyncio.create_task(h.source._watch())
    try:
        await _until(lambda: bool(h.published))  # the sync once the watch is in place
        for i in range(20):
            h.put(f"p{i}.yaml", manifest(f"p{i}"))
        await _until(lambda: len(h.published[-1]) == 20)
        assert len(h.published) <= 6
        os.remove(h.dir / "p0.yaml")
        await _until(lambda: len(h.published[-1]) == 19)
        shutil.rmtree(h.dir)
        await _until(lambda: h.published[-1] == [])
        await _until(lambda: h.clock.sleepers == 1)  # the watch waits for the directory on the clock
        h.dir.mkdir()
        h.put("back.yaml", manifest("back"))
        h.clock.advance(h.source.check_frequency)
        await _until(lambda: [p["metadata"]["name"] for p in h.published[-1]] == ["back-n1"])
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


def test_the_watch_waits_only_for_a_file_still_open_for_writing(tmp_path: Path) -> None:
    """A manifest written and closed is re-listed at once; one still open for writing (created or modified, not
    closed) waits for the settle. The kernel queues the events as the calls are made, so no timing is involved."""
    watched = tmp_path / "manifests"
    watched.mkdir()
    with Inotify(sync_timeout=0) as inotify:
        inotify.add_watch(watched, WATCH_MASK)
        writing: dict[str, bool] = {}
        with (watched / "a.yaml").open("w") as f:
            f.write("apiVersion: v1\n")
            f.flush()
            assert _queued(inotify, writing) is False
            assert writing == {"a.yaml": True}
        assert _queued(inotify, writing) is False
        assert writing == {"a.yaml": False}
        (watched / "b.yaml").write_text("kind: Pod\n")  # created, written and closed
        (watched / "sub").mkdir()  # a directory is never written to
        assert _queued(inotify, writing) is False
        assert writing == {"a.yaml": False, "b.yaml": False}
        for p in watched.iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        watched.rmdir()
        assert _queued(inotify, writing) is True  # the directory itself went away

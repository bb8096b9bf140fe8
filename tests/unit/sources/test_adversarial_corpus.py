"""The adversarial corpus (without its multi-MiB cases) through the file source: every entry gets its line."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.logs import KeyValueFormatter
from minikubelet.metrics import Metrics
from minikubelet.sources.file import StaticPodSource
from minikubelet.sources.manifest_worker import InProcessParser
from tests.adversarial.corpus import corpus, write

from .test_file_source import manifest


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(KeyValueFormatter())
    logger = logging.getLogger("minikubelet.static_pods")
    logger.addHandler(handler)
    yield buf
    logger.removeHandler(handler)


async def test_every_case_is_rejected_with_one_line_and_good_pods_win(tmp_path: Path, log_text: io.StringIO) -> None:
    for name in ("good-a", "good-b", "good-c"):
        (tmp_path / f"a-{name}.yaml").write_text(manifest(name))
    cases = corpus(big=False)
    assert len(cases) >= 250
    write(tmp_path, cases)
    published: list[list[Pod]] = []
    source = StaticPodSource(str(tmp_path), "n", FakeClock(), Metrics(), lambda _s, pods: published.append(pods),
                             parser=InProcessParser())
    await source.sync()
    await source.sync()
    assert [sorted(p["metadata"]["annotations"]["kubernetes.io/config.source"] + ":" + p["metadata"]["name"]
                   for p in pods) for pods in published] == [["file:good-a-n", "file:good-b-n", "file:good-c-n"]] * 2
    lines = log_text.getvalue().splitlines()
    wrong = []
    for c in cases:
        mine = [ln for ln in lines if c.token in ln]
        if len(mine) != c.lines or not all(re.search(c.expect, ln) for ln in mine):
            wrong.append((c.token, c.family, c.expect, [ln[:200] for ln in mine]))
    assert wrong == []
    assert not [ln for ln in lines if "adv-hidden" in ln or "adv-swap" in ln]
    assert len(lines) == sum(c.lines for c in cases)  # nothing else, and nothing twice

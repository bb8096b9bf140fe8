"""The agent raises its soft descriptor limit to the hard one at start-up."""

from __future__ import annotations

import logging
import resource
from collections.abc import Iterator

import pytest

from minikubelet.node.rlimits import raise_nofile_limit


@pytest.fixture
def restore_nofile() -> Iterator[tuple[int, int]]:
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield limits
    resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def test_raises_the_soft_limit_to_the_hard_limit_and_logs_it_once(
        restore_nofile: tuple[int, int], caplog: pytest.LogCaptureFixture) -> None:
    _, hard = restore_nofile
    if hard <= 512:
        pytest.skip(f"hard RLIMIT_NOFILE is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
    caplog.set_level(logging.INFO, "minikubelet.node")
    assert raise_nofile_limit() == (512, hard)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    assert raise_nofile_limit() == (hard, hard)
    lines = [r for r in caplog.records if r.name == "minikubelet.node"]
    assert len(lines) == 1
    assert getattr(lines[0], "kv", None) == {"old": 512, "new": str(hard)}


def test_at_the_hard_limit_nothing_changes(restore_nofile: tuple[int, int], caplog: pytest.LogCaptureFixture) -> None:
    _, hard = restore_nofile
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    caplog.set_level(logging.INFO, "minikubelet.node")
    assert raise_nofile_limit() == (hard, hard)
    assert not caplog.records

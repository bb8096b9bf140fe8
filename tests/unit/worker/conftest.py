"""Fixtures the pod worker's tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.fake_node import FakeNode, running_node


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[FakeNode]:
    async with running_node(tmp_path) as n:
        yield n

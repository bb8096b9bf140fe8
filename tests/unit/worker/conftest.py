"""Fixtures the pod worker's tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.fake_node import FakeNode


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[FakeNode]:
    n = FakeNode(tmp_path)
    try:
        yield n
    finally:
        await n.close()

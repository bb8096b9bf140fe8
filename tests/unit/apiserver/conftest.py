"""The test API server for these tests; every test fails if a client wrote what the schema refuses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.apiserver import ApiServer


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ApiServer]:
    server = ApiServer(tmp_path, history=50, max_watch_seconds=10)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
    assert server.violations == [], "writes the API server's decoder would refuse or prune"

"""The pytest fixture: a started ApiServer; at teardown, no client may have written what the API
server's decoder refuses or prunes (wrong types, unknown fields). Use it from a conftest.py:

    from tests.apiserver.fixtures import api_server  # noqa: F401
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.apiserver.harness import ApiServer


@pytest.fixture
async def api_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    server = ApiServer(tmp_path, history=50, max_watch_seconds=10)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
    assert server.violations == [], "writes the API server's decoder would refuse or prune"

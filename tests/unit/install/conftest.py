"""The discovery tests use the shared `api_server` fixture under a short name."""

from __future__ import annotations

import pytest

from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401


@pytest.fixture
def api(api_server: ApiServer) -> ApiServer:  # noqa: F811
    return api_server

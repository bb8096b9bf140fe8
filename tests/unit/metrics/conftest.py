"""The shared `api_server` fixture, and a node client helper."""

from __future__ import annotations

from tests.apiserver.fixtures import api_server  # noqa: F401

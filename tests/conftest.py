"""Suite-wide pytest hooks: tests under tests/integration/ are marked ``integration`` and run last.

One pytest run covers the whole suite (scripts/test); the fast unit tests come first so a
broken unit shows up before the slower Docker-backed tests start. Select with
``-m integration`` / ``-m 'not integration'``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_INTEGRATION_DIR = Path(__file__).resolve().parent / "integration"


def _is_integration(item: pytest.Item) -> bool:
    return _INTEGRATION_DIR in Path(str(item.path)).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_integration(item):
            item.add_marker(pytest.mark.integration)
    # Stable: keeps file and definition order inside each group.
    items.sort(key=_is_integration)


def pytest_report_header(config: pytest.Config) -> list[str]:
    host = os.environ.get("MKL_TEST_DOCKER_HOST") or "(unset: integration tests skip, or fail under CI)"
    return [f"test Docker Engine: {host}"]

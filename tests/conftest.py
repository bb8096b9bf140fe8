"""Suite-wide pytest hooks: tests under tests/integration/ are marked ``integration`` and run last.

One pytest run covers the whole suite (scripts/test); the fast unit tests come first so a
broken unit shows up before the slower Docker-backed tests start. Select with
``-m integration`` / ``-m 'not integration'``.

Every async test also fails if it leaves asyncio tasks pending (``no_leaked_tasks``).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator
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


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    # The unit tests print a dot each; an integration test can take a minute, so from the first one on pytest
    # names each test as it starts (as -v does), and a long silence always says which test it is in.
    config = _CONFIG.get("config")
    if config is not None and config.option.verbose < 1 and Path(location[0]).parts[:2] == ("tests", "integration"):
        config.option.verbose = 1


_CONFIG: dict[str, pytest.Config] = {}


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG["config"] = config


def pytest_report_header(config: pytest.Config) -> list[str]:
    host = os.environ.get("MKL_TEST_DOCKER_HOST") or "(unset: integration tests skip, or fail under CI)"
    return [f"test Docker Engine: {host}"]


# Loop turns a task gets after the test to finish by itself (e.g. one cancelled but not awaited).
_LEAK_GRACE_TURNS = 50


def _describe(task: asyncio.Task[object]) -> str:
    coro = task.get_coro()
    where = getattr(coro, "__qualname__", repr(coro))
    return f"{task.get_name()} ({where})"


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fails the test if tasks created during it (and its fixtures) are still pending afterwards."""
    before = asyncio.all_tasks()
    yield
    leaked: set[asyncio.Task[object]] = set()
    for _ in range(_LEAK_GRACE_TURNS):
        leaked = asyncio.all_tasks() - before - {asyncio.current_task()}
        if not leaked:
            return
        await asyncio.sleep(0)
    for task in leaked:
        task.cancel()
    await asyncio.gather(*leaked, return_exceptions=True)
    pytest.fail("test left asyncio tasks pending: " + ", ".join(sorted(map(_describe, leaked))), pytrace=False)


@pytest.fixture(autouse=True)
def _async_tests_leak_no_tasks(request: pytest.FixtureRequest) -> None:
    # Requested first, so it is torn down last: after the test's own fixtures have cleaned up.
    if inspect.iscoroutinefunction(getattr(request.node, "function", None)):
        request.getfixturevalue("no_leaked_tasks")

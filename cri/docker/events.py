"""Docker's event stream as ContainerEvents, reconnecting with backoff when it breaks.

On reconnect the stream is resumed with `since` = the last event seen, so events that happened
while disconnected are replayed (Docker keeps a short in-memory history); a duplicate at the
boundary is harmless because consumers relist anyway.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from cri.docker.client import DockerClient
from cri.docker.convert import EVENT_TYPES, container_event
from cri.docker.naming import LABEL_CONTAINER_TYPE
from cri.errors import RuntimeError_
from cri.types import ContainerEvent

log = logging.getLogger(__name__)

EVENT_FILTERS = json.dumps({"type": ["container"], "event": sorted(EVENT_TYPES), "label": [LABEL_CONTAINER_TYPE]})


async def _messages(client: DockerClient, since: str | None) -> AsyncIterator[dict[str, Any]]:
    params = {"filters": EVENT_FILTERS}
    if since is not None:
        params["since"] = since
    async with client.stream("events", params=params) as response:
        async for line in response.content:
            if line.strip():
                yield json.loads(line)


def _since(message: dict[str, Any]) -> str | None:
    time_nano = message.get("timeNano")
    if not time_nano:
        return None
    seconds, nanos = divmod(int(time_nano), 1_000_000_000)
    return f"{seconds}.{nanos:09d}"


async def container_events(
    client: DockerClient, initial_backoff: float = 0.5, max_backoff: float = 30.0
) -> AsyncGenerator[ContainerEvent, None]:
    since: str | None = None
    backoff = initial_backoff
    while True:
        try:
            async for message in _messages(client, since):
                backoff = initial_backoff
                since = _since(message) or since
                event = container_event(message)
                if event is not None:
                    yield event
            log.warning("Docker event stream ended; reconnecting")
        except (RuntimeError_, OSError, ValueError, asyncio.IncompleteReadError) as exc:
            log.warning("Docker event stream failed: %s; reconnecting in %.1fs", exc, backoff)
        except Exception as exc:  # whatever else breaks the stream must not end the watch
            log.warning("Docker event stream broke: %r; reconnecting in %.1fs", exc, backoff)
        await asyncio.sleep(backoff)
        backoff = min(max_backoff, backoff * 2)

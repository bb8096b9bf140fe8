"""containerd's own event service (not CRI): where containerd says a container's task exited.

containerd 1.6 has no CRI GetContainerEvents, so the agent's events come from relisting (events.py). The
exit reaches containerd's event service at once; CRI records it a little later (after the task is deleted).
The relisting fallback uses this word to relist at once and again until CRI agrees, instead of waiting for
its next period. The state itself still comes from CRI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from google.protobuf.message import DecodeError

from cri.remote.client import Channel, server_stream
from cri.remote.containerd import events_pb2 as ev

EXIT_TOPIC = "/tasks/exit"


async def task_exits(channel: Channel) -> AsyncIterator[str]:
    """Ids of containers whose init process exited, as containerd announces them (every namespace). Ends when
    containerd ends the stream; a runtime that is not containerd fails the first read with UNIMPLEMENTED."""
    request = ev.SubscribeRequest(filters=[f'topic=="{EXIT_TOPIC}"'])
    async for envelope in server_stream(channel.containerd_events.Subscribe, request):
        if envelope.topic != EXIT_TOPIC:
            continue
        exited = ev.TaskExit()
        try:
            exited.ParseFromString(envelope.event.value)
        except DecodeError:
            continue
        if exited.container_id and exited.id in ("", exited.container_id):  # not an exec's process
            yield exited.container_id

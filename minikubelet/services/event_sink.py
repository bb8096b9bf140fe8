"""The Events' way to the API server as a node service: started before the registration, so the start-up events
are written while the Node registers, as upstream's."""

from __future__ import annotations

import asyncio
import contextlib

from minikubelet.base.clock import Clock
from minikubelet.events import EventRecorder
from minikubelet.events.api_sink import ApiEventSink
from minikubelet.kubeapi.rest import RestClient
from minikubelet.services.service import Service


class EventSinkService(Service):
    name = "event-sink"

    def __init__(self, client: RestClient, clock: Clock, recorder: EventRecorder) -> None:
        # Events get a client of their own, as upstream's kubelet: limited by the sink's bucket (eventRecordQPS
        # 50 / eventBurst 100) only, so a burst of events never takes the node's kubeAPIQPS from its status.
        self.sink = ApiEventSink(RestClient(client.config, clock, qps=0, agent=client.agent), clock)
        self._recorder = recorder
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._recorder.add_sink(self.sink)
        # Running from now on, not from the TaskGroup: the start-up events go out before the registration.
        self._task = asyncio.get_running_loop().create_task(self.sink.run(), name="event-sink")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.sink.client.close()

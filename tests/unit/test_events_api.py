"""The API event sink against the test API server: the recorded create and PATCH bodies (`kubelet-10`,
`kubelet-11`), the 404 re-create, aggregation of similar events, the spam filter and the rate limit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from minikubelet.base.clock import FakeClock
from minikubelet.events import EventRecorder
from minikubelet.events.api_sink import ApiEventSink
from minikubelet.kubeapi.rest import Json, RestClient
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.kubeapi.helpers import client_for, eventually

NODE = "n1"


class Recording(RestClient):
    """Our client, talking to the server, keeping what it sent."""

    sent: list[tuple[str, str, Any]]
    answered: int = 0  # requests the server has answered (`sent` counts them as they leave)

    async def request(self, method: str, path: str, **kwargs: Any) -> Json:
        self.sent.append((method, path, kwargs.get("body")))
        reply = await super().request(method, path, **kwargs)
        self.answered += 1
        return reply


async def _setup(api: ApiServer, tmp_path: Path, **kwargs: Any) -> tuple[
        FakeClock, EventRecorder, ApiEventSink, Recording, dict[str, Any], asyncio.Task[None]]:
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    pod = await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                              "spec": {"nodeName": NODE, "automountServiceAccountToken": False,
                                       "containers": [{"name": "main", "image": "busybox"}]}})
    clock = FakeClock()
    base = client_for(api, api.node_identity(NODE), tmp_path, clock)
    client = Recording(base.config, clock, qps=0, retry=base.retry)  # the sink's own limiter is the one tested
    client.sent = []
    recorder = EventRecorder(clock, NODE)
    sink = ApiEventSink(client, clock, **kwargs)
    recorder.add_sink(sink)
    return clock, recorder, sink, client, pod, asyncio.create_task(sink.run())


async def test_created_then_patched_with_count_and_last_timestamp(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    clock, recorder, _sink, client, pod, task = await _setup(api_server, tmp_path)
    try:
        recorder.pod_event(pod, "Normal", "Killing", "Stopping container main", "main")
        await eventually(lambda: len(client.sent) == 1, what="the create")
        method, path, body = client.sent[0]
        assert (method, path) == ("POST", "/api/v1/namespaces/default/events")
        assert body["involvedObject"] == {"kind": "Pod", "namespace": "default", "name": "p",
                                          "uid": pod["metadata"]["uid"], "apiVersion": "v1",
                                          "fieldPath": "spec.containers{main}"}
        assert body["source"] == {"component": "kubelet", "host": NODE}
        assert (body["reportingComponent"], body["reportingInstance"], body["count"]) == ("kubelet", NODE, 1)
        assert body["metadata"]["name"] == f"p.{int(clock.now() * 1e9):x}"  # <name>.<hex nanoseconds>
        clock.advance(3)
        recorder.pod_event(pod, "Normal", "Killing", "Stopping container main", "main")
        await eventually(lambda: len(client.sent) == 2, what="the patch")
        method, path, body = client.sent[1]
        assert (method, path) == ("PATCH", f"/api/v1/namespaces/default/events/{client.sent[0][2]['metadata']['name']}")
        assert set(body) == {"count", "lastTimestamp", "message"} and body["count"] == 2  # as kubelet-11
        stored = (await api_server.admin().list("events", "default"))["items"]
        assert [(e["count"], e["reason"]) for e in stored] == [(2, "Killing")]
        # the event expired on the server: the next repeat creates it again
        await api_server.admin().delete("events", stored[0]["metadata"]["name"], "default")
        recorder.pod_event(pod, "Normal", "Killing", "Stopping container main", "main")
        await eventually(lambda: len(client.sent) == 4, what="patch 404, then create")
        assert [m for m, _, _ in client.sent[2:]] == ["PATCH", "POST"]
        assert [e["count"] for e in (await api_server.admin().list("events", "default"))["items"]] == [3]
    finally:
        task.cancel()
        await client.close()


async def test_similar_events_are_combined_and_spam_is_dropped(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    _clock, recorder, sink, client, pod, task = await _setup(api_server, tmp_path)
    try:
        for i in range(30):
            recorder.pod_event(pod, "Warning", "Failed", f"error {i}", "main")
        await eventually(lambda: len(client.sent) == 25, what="25 writes (the spam burst)")
        await asyncio.sleep(0.05)
        assert len(client.sent) == 25 and sink.dropped == 5
        messages = [b["message"] for _, _, b in client.sent]
        assert messages[:9] == [f"error {i}" for i in range(9)]
        assert messages[9] == "(combined from similar events): error 9"
        assert [m for m, _, _ in client.sent[10:]] == ["PATCH"] * 15  # the combined event counts up
        assert len(recorder.list(pod["metadata"]["uid"])) == 30  # the local store keeps all of them
    finally:
        task.cancel()
        await client.close()


async def test_writes_are_rate_limited(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    clock, recorder, _sink, client, _pod, task = await _setup(api_server, tmp_path, qps=1.0, burst=3)
    pods = [await api_server.admin().create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"q{i}", "namespace": "default"},
        "spec": {"nodeName": NODE, "automountServiceAccountToken": False,
                 "containers": [{"name": "main", "image": "busybox"}]}}) for i in range(5)]
    try:
        for p in pods:
            recorder.pod_event(p, "Normal", "Started", "Container started", "main")
        await eventually(lambda: len(client.sent) == 3, what="the burst")
        await asyncio.sleep(0.1)
        assert len(client.sent) == 3  # no more until the clock moves
        clock.advance(1.0)
        await eventually(lambda: len(client.sent) == 4, what="one more after 1 s")
        clock.advance(1.0)
        await eventually(lambda: len(client.sent) == 5, what="the last")
    finally:
        task.cancel()
        await client.close()


async def test_annotated_event_carries_its_annotations(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    """upstream AnnotatedEventf (the eviction manager's Evicted Event): the annotations are the Event's."""
    _clock, recorder, _sink, client, pod, task = await _setup(api_server, tmp_path)
    annotations = {"offending_pod": "p", "offending_pod_usage": "700Mi", "offending_containers": "main",
                   "offending_containers_usage": "700Mi", "starved_resource": "memory"}
    try:
        recorder.pod_event(pod, "Warning", "Evicted", "The node was low on resource: memory. ",
                           annotations=annotations)
        await eventually(lambda: client.answered == 1, what="the create")
        assert client.sent[0][2]["metadata"]["annotations"] == annotations
        assert recorder.list()[0]["metadata"]["annotations"] == annotations
        stored = (await api_server.admin().list("events", "default"))["items"]
        assert [e["metadata"].get("annotations") for e in stored] == [annotations]
    finally:
        task.cancel()
        await client.close()

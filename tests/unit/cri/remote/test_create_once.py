"""RunPodSandbox and CreateContainer go to the runtime first; the listing that makes them idempotent (the runtime
refuses a name an object holds) is made only when the runtime refuses, against a scripted CRI server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from cri.errors import CreateContainerError, RuntimeUnavailableError
from cri.remote import RemoteRuntime, convert
from cri.remote.v1 import api_pb2 as pb
from cri.types import LABEL_CONTAINER_NAME, ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from tests.unit.cri.remote.partial_runtime import PartialRuntime

Served = tuple[PartialRuntime, Callable[[], Awaitable[str]]]
POD = PodSandboxConfig(PodMeta("web", "default", "uid-1"), hostname="web")
RESERVED = 'failed to reserve sandbox name "web_default_uid-1_0": name "web_default_uid-1_0" is reserved for "old"'


class Script:
    """The calls the runtime received, by method name, and what it answers to each."""

    def __init__(self, runtime: PartialRuntime) -> None:
        self.calls: list[str] = []
        self.runtime = runtime

    def on(self, method: str, request: type[Any], reply: type[Any], *answers: Any) -> None:
        queue = list(answers)

        async def answer(stream: Stream[Any, Any]) -> None:
            await stream.recv_message()
            self.calls.append(method)
            out = queue.pop(0) if len(queue) > 1 else queue[0]
            if isinstance(out, GRPCError):
                raise out
            await stream.send_message(out)

        self.runtime.answer(method, request, reply, answer)


def _sandbox(sandbox_id: str, state: int, attempt: int = 0) -> pb.PodSandbox:
    return pb.PodSandbox(id=sandbox_id, state=state,  # type: ignore[arg-type]
                         metadata=pb.PodSandboxMetadata(name="web", namespace="default", uid="uid-1", attempt=attempt))


@contextlib.asynccontextmanager
async def _connect(served: Served) -> AsyncIterator[RemoteRuntime]:
    """The client of the server, once the test's script is in place (the server reads it when it starts)."""
    rt = RemoteRuntime(await served[1]())
    try:
        yield rt
    finally:
        await rt.close()


async def test_a_new_sandbox_is_one_call(served: Served) -> None:
    script = Script(served[0])
    script.on("RunPodSandbox", pb.RunPodSandboxRequest, pb.RunPodSandboxResponse,
              pb.RunPodSandboxResponse(pod_sandbox_id="s1"))
    async with _connect(served) as rt:
        assert await rt.run_pod_sandbox(POD) == "s1"
        assert script.calls == ["RunPodSandbox"]


async def test_a_refused_name_held_by_a_ready_sandbox_is_that_sandbox(served: Served) -> None:
    script = Script(served[0])
    script.on("RunPodSandbox", pb.RunPodSandboxRequest, pb.RunPodSandboxResponse, GRPCError(Status.UNKNOWN, RESERVED))
    script.on("ListPodSandbox", pb.ListPodSandboxRequest, pb.ListPodSandboxResponse, pb.ListPodSandboxResponse(
        items=[_sandbox("other-attempt", pb.SANDBOX_READY, attempt=1), _sandbox("old", pb.SANDBOX_READY)]))
    async with _connect(served) as rt:
        assert await rt.run_pod_sandbox(POD) == "old"
        assert script.calls == ["RunPodSandbox", "ListPodSandbox"]


async def test_a_refused_name_held_by_a_dead_sandbox_is_freed_and_run_again(served: Served) -> None:
    script = Script(served[0])
    script.on("RunPodSandbox", pb.RunPodSandboxRequest, pb.RunPodSandboxResponse,
              GRPCError(Status.UNKNOWN, RESERVED), pb.RunPodSandboxResponse(pod_sandbox_id="new"))
    script.on("ListPodSandbox", pb.ListPodSandboxRequest, pb.ListPodSandboxResponse,
              pb.ListPodSandboxResponse(items=[_sandbox("old", pb.SANDBOX_NOTREADY)]))
    script.on("StopPodSandbox", pb.StopPodSandboxRequest, pb.StopPodSandboxResponse, pb.StopPodSandboxResponse())
    script.on("RemovePodSandbox", pb.RemovePodSandboxRequest, pb.RemovePodSandboxResponse,
              pb.RemovePodSandboxResponse())
    async with _connect(served) as rt:
        assert await rt.run_pod_sandbox(POD) == "new"
        assert script.calls == ["RunPodSandbox", "ListPodSandbox", "StopPodSandbox", "RemovePodSandbox",
                                "RunPodSandbox"]


async def test_a_failed_sandbox_with_nothing_in_its_name_is_the_runtimes_error_once(served: Served) -> None:
    script = Script(served[0])
    script.on("RunPodSandbox", pb.RunPodSandboxRequest, pb.RunPodSandboxResponse,
              GRPCError(Status.UNKNOWN, "failed to setup network for sandbox"))
    script.on("ListPodSandbox", pb.ListPodSandboxRequest, pb.ListPodSandboxResponse, pb.ListPodSandboxResponse())
    async with _connect(served) as rt:
        with pytest.raises(CreateContainerError, match=r"^failed to setup network for sandbox$"):
            await rt.run_pod_sandbox(POD)
        assert script.calls == ["RunPodSandbox", "ListPodSandbox"]  # not run a second time


async def test_an_unanswered_create_is_not_followed_by_a_listing(served: Served) -> None:
    script = Script(served[0])
    script.on("RunPodSandbox", pb.RunPodSandboxRequest, pb.RunPodSandboxResponse,
              GRPCError(Status.UNAVAILABLE, "shutting down"))
    script.on("CreateContainer", pb.CreateContainerRequest, pb.CreateContainerResponse,
              GRPCError(Status.DEADLINE_EXCEEDED, "Deadline Exceeded"))
    async with _connect(served) as rt:
        with pytest.raises(RuntimeUnavailableError, match="shutting down"):
            await rt.run_pod_sandbox(POD)
        with pytest.raises(CreateContainerError, match="Deadline Exceeded"):
            await rt.create_container("s1", ContainerConfig(ContainerMeta("app"), "busybox"), POD)
        assert script.calls == ["RunPodSandbox", "CreateContainer"]


def _container(container_id: str, labels: dict[str, str], attempt: int = 0) -> pb.Container:
    return pb.Container(id=container_id, pod_sandbox_id="s1", labels=labels,
                        metadata=pb.ContainerMetadata(name="app", attempt=attempt))


async def test_a_container_is_one_call_and_a_refused_name_is_resolved_by_its_labels(served: Served) -> None:
    script = Script(served[0])
    config = ContainerConfig(ContainerMeta("app"), "busybox", labels={"k": "v"})
    refused = GRPCError(Status.UNKNOWN, 'failed to reserve container name "app_web_default_uid-1_0"')
    script.on("CreateContainer", pb.CreateContainerRequest, pb.CreateContainerResponse,
              pb.CreateContainerResponse(container_id="c1"), refused, refused, refused)
    mine = dict(convert.container_config(config, POD).labels)  # what the client asks for
    assert {"k": "v", LABEL_CONTAINER_NAME: "app"}.items() <= mine.items()
    script.on("ListContainers", pb.ListContainersRequest, pb.ListContainersResponse,
              pb.ListContainersResponse(containers=[_container("c0", mine, attempt=1), _container("c1", mine)]),
              pb.ListContainersResponse(containers=[_container("c1", {**mine, "k": "other"})]),
              pb.ListContainersResponse())
    async with _connect(served) as rt:
        assert await rt.create_container("s1", config, POD) == "c1"
        assert script.calls == ["CreateContainer"]
        assert await rt.create_container("s1", config, POD) == "c1"  # the same container, asked again
        assert script.calls == ["CreateContainer", "CreateContainer", "ListContainers"]
        with pytest.raises(CreateContainerError, match='"app" attempt 0 is already in use by c1'):
            await rt.create_container("s1", config, POD)
        with pytest.raises(CreateContainerError, match=r"^failed to reserve container name"):
            await rt.create_container("s1", config, POD)  # refused, and nothing listed: the runtime's words

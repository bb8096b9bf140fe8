"""Docker inspect/event/stats JSON -> CRI shapes, following cri-dockerd's interpretation."""

from __future__ import annotations

import io
import tarfile
from datetime import UTC, datetime
from typing import Any

import pytest

from cri.docker.archive import first_file_from_tar
from cri.docker.convert import (
    container_event,
    container_stats,
    container_status,
    demux_stream,
    image_from_inspect,
    parse_docker_time,
    sandbox_status,
    writable_layer,
)
from cri.types import ContainerEventType, ContainerMeta, ContainerState, PodMeta, SandboxState

IMAGE_ID = "sha256:" + "1f" * 32
ZERO = "0001-01-01T00:00:00Z"


def inspect(state: dict[str, Any], name: str = "/k8s_app_web_prod_uid-1_2", **extra: Any) -> dict[str, Any]:
    return {
        "Id": "c0ffee",
        "Name": name,
        "Created": "2024-05-01T10:00:00.000000001Z",
        "Image": IMAGE_ID,
        "Config": {
            "Image": "busybox:1.36",
            "Labels": {
                "io.kubernetes.container.name": "app",
                "io.kubernetes.pod.uid": "uid-1",
                "io.kubernetes.docker.type": "container",
                "io.kubernetes.sandbox.id": "sb1",
                "io.kubernetes.container.logpath": "/var/log/pods/p/app/2.log",
                "annotation.io.kubernetes.container.hash": "abc",
            },
        },
        "State": {"Running": False, "Pid": 0, "ExitCode": 0, "Error": "", "OOMKilled": False, **state},
        **extra,
    }


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_parse_docker_time_keeps_nanoseconds_and_maps_zero_time() -> None:
    assert parse_docker_time(ZERO) == 0.0
    assert parse_docker_time("") == 0.0
    assert parse_docker_time("2024-05-01T10:00:01.123456789Z") == pytest.approx(
        epoch("2024-05-01T10:00:01") + 0.123456789
    )
    assert parse_docker_time("2024-05-01T12:00:01+02:00") == epoch("2024-05-01T10:00:01")
    with pytest.raises(ValueError):
        parse_docker_time("yesterday")


def test_running_container() -> None:
    status = container_status(
        inspect({"Running": True, "Pid": 4242, "StartedAt": "2024-05-01T10:00:02Z", "FinishedAt": ZERO}), None
    )
    assert status.state is ContainerState.RUNNING
    assert (status.pid, status.reason, status.finished_at) == (4242, "", 0.0)
    assert status.started_at == epoch("2024-05-01T10:00:02")
    assert status.metadata == ContainerMeta("app", 2)
    assert (status.sandbox_id, status.log_path, status.image) == ("sb1", "/var/log/pods/p/app/2.log", "busybox:1.36")
    assert status.image_ref == f"docker://{IMAGE_ID}"
    assert status.annotations == {"io.kubernetes.container.hash": "abc"}
    assert "io.kubernetes.sandbox.id" not in status.labels


@pytest.mark.parametrize(
    ("exit_code", "oom", "reason"), [(0, False, "Completed"), (1, False, "Error"), (137, True, "OOMKilled")]
)
def test_exited_container_reason(exit_code: int, oom: bool, reason: str) -> None:
    state = {
        "ExitCode": exit_code,
        "OOMKilled": oom,
        "StartedAt": "2024-05-01T10:00:02Z",
        "FinishedAt": "2024-05-01T10:00:05.5Z",
        "Error": "",
    }
    status = container_status(inspect(state), {"RepoDigests": ["busybox@sha256:" + "aa" * 32]})
    assert (status.state, status.exit_code, status.reason) == (ContainerState.EXITED, exit_code, reason)
    assert status.finished_at == epoch("2024-05-01T10:00:05.500000")
    assert status.image_ref == "docker-pullable://busybox@sha256:" + "aa" * 32


def test_container_that_could_not_run() -> None:
    state = {"ExitCode": 127, "StartedAt": ZERO, "FinishedAt": ZERO, "Error": 'exec: "nope": not found'}
    status = container_status(inspect(state), None)
    assert (status.state, status.reason, status.message) == (
        ContainerState.EXITED,
        "ContainerCannotRun",
        'exec: "nope": not found',
    )
    assert status.started_at == status.finished_at == status.created_at > 0


def test_created_container() -> None:
    status = container_status(inspect({"StartedAt": ZERO, "FinishedAt": ZERO}), None)
    assert (status.state, status.started_at, status.finished_at, status.reason) == (
        ContainerState.CREATED,
        0.0,
        0.0,
        "",
    )


def sandbox_inspect(running: bool, network_mode: str = "default") -> dict[str, Any]:
    return {
        "Id": "sb1",
        "Name": "/k8s_POD_web_prod_uid-1_4",
        "Created": "2024-05-01T10:00:00Z",
        "Config": {
            "Labels": {
                "io.kubernetes.pod.name": "web",
                "io.kubernetes.pod.namespace": "prod",
                "io.kubernetes.pod.uid": "uid-1",
                "io.kubernetes.docker.type": "podsandbox",
                "io.kubernetes.container.name": "POD",
                "annotation.kubernetes.io/config.source": "file",
            }
        },
        "State": {"Running": running, "Pid": 777 if running else 0},
        "HostConfig": {"NetworkMode": network_mode},
        "NetworkSettings": {"IPAddress": "172.17.0.5", "Networks": {"bridge": {"IPAddress": "172.17.0.5"}}},
    }


def test_sandbox_status() -> None:
    status = sandbox_status(sandbox_inspect(True))
    assert status.metadata == PodMeta("web", "prod", "uid-1", 4)
    assert (status.state, status.ip, status.network_namespace) == (SandboxState.READY, "172.17.0.5", "/proc/777/ns/net")
    assert status.labels == {
        "io.kubernetes.pod.name": "web",
        "io.kubernetes.pod.namespace": "prod",
        "io.kubernetes.pod.uid": "uid-1",
    }
    assert status.annotations == {"kubernetes.io/config.source": "file"}
    stopped = sandbox_status(sandbox_inspect(False))
    assert (stopped.state, stopped.ip, stopped.network_namespace) == (SandboxState.NOTREADY, "", "")
    assert sandbox_status(sandbox_inspect(True, "host")).ip == ""


def test_sandbox_ip_from_networks_when_top_level_is_empty() -> None:
    raw = sandbox_inspect(True)
    raw["NetworkSettings"] = {"IPAddress": "", "Networks": {"bridge": {"IPAddress": "10.1.2.3"}}}
    assert sandbox_status(raw).ip == "10.1.2.3"


def event(action: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "Type": "container",
        "Action": action,
        "status": action,
        "Actor": {"ID": "abc", "Attributes": {"image": "busybox", "name": "k8s_x", **labels}},
        "time": 1714557600,
        "timeNano": 1714557600123456789,
    }


@pytest.mark.parametrize(
    ("action", "kind"),
    [
        ("create", ContainerEventType.CREATED),
        ("start", ContainerEventType.STARTED),
        ("die", ContainerEventType.STOPPED),
        ("destroy", ContainerEventType.DELETED),
    ],
)
def test_container_events(action: str, kind: ContainerEventType) -> None:
    labels = {"io.kubernetes.docker.type": "container", "io.kubernetes.pod.uid": "uid-1"}
    converted = container_event(event(action, labels))
    assert converted is not None
    assert (converted.container_id, converted.type, converted.pod_uid, converted.is_sandbox) == (
        "abc",
        kind,
        "uid-1",
        False,
    )
    assert converted.timestamp == pytest.approx(1714557600.123456789)


def test_events_that_are_not_ours_are_dropped() -> None:
    assert container_event(event("start", {})) is None
    assert container_event(event("exec_start: sh", {"io.kubernetes.docker.type": "container"})) is None
    sandbox = container_event(event("start", {"io.kubernetes.docker.type": "podsandbox"}))
    assert sandbox is not None and sandbox.is_sandbox
    assert container_event({**event("start", {}), "Type": "network"}) is None


@pytest.mark.parametrize(
    ("memory_stats", "working_set"),
    [
        ({"usage": 10_000, "stats": {"total_inactive_file": 3_000, "inactive_file": 1}}, 7_000),  # cgroup v1
        ({"usage": 10_000, "stats": {"inactive_file": 4_000}}, 6_000),  # cgroup v2
        ({"usage": 1_000, "stats": {"inactive_file": 4_000}}, 0),
    ],
)
def test_container_stats(memory_stats: dict[str, Any], working_set: int) -> None:
    stats = container_stats(
        "abc",
        {
            "read": "2024-05-01T10:00:00Z",
            "cpu_stats": {"cpu_usage": {"total_usage": 123_456_789}},
            "memory_stats": memory_stats,
        },
    )
    assert (stats.cpu_usage_core_nanoseconds, stats.memory_usage_bytes, stats.memory_working_set_bytes) == (
        123_456_789,
        memory_stats["usage"],
        working_set,
    )
    assert stats.timestamp == epoch("2024-05-01T10:00:00")


def test_image_from_inspect() -> None:
    image = image_from_inspect(
        {
            "Id": IMAGE_ID,
            "RepoTags": ["busybox:1.36"],
            "RepoDigests": [],
            "Size": 4096,
            "Config": {"StopSignal": "SIGQUIT", "User": "1000:1000"},
        }
    )
    assert (image.id, image.repo_tags, image.size, image.stop_signal, image.user) == (
        IMAGE_ID,
        ("busybox:1.36",),
        4096,
        "SIGQUIT",
        "1000:1000",
    )


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def test_demux_stream_splits_and_keeps_order() -> None:
    data = frame(1, b"one\n") + frame(2, b"err\n") + frame(1, b"two\n") + frame(1, b"cut")[:-1]
    assert demux_stream(data) == (b"one\ntwo\ncu", b"err\n", b"one\nerr\ntwo\ncu")


def tar_of(name: str, payload: bytes | None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo(name)
        if payload is None:
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
        else:
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


def test_first_file_from_tar() -> None:
    payload = bytes(range(256)) * 40
    data = tar_of("termination-log", payload)
    assert first_file_from_tar(data, 100_000) == payload
    assert first_file_from_tar(data, 10) == payload[:10]
    # Truncated right after the part we want, as read_file stops reading early.
    assert first_file_from_tar(data[: 512 * 3 + 1000], 1000) == payload[:1000]
    assert first_file_from_tar(tar_of("dir", None), 10) is None
    long_name = tar_of("d" * 200 + "/termination-log", b"pax")  # preceded by a PAX header
    assert first_file_from_tar(long_name, 10) == b"pax"
    assert first_file_from_tar(b"not a tar", 10) is None


def test_image_is_the_first_repo_tag_as_cri_dockerd_reports_it() -> None:
    state = {"Running": True, "StartedAt": "2024-01-01T00:00:00.5Z", "FinishedAt": ZERO}
    tagged = container_status(inspect(state), {"RepoTags": ["minikubelet.test/busybox:1.36", "busybox:1.28"]})
    assert tagged.image == "minikubelet.test/busybox:1.36"
    untagged = container_status(inspect(state), {"RepoTags": []})
    assert untagged.image == inspect(state)["Config"]["Image"]


def test_writable_layer_is_size_rw_of_a_container_listed_with_size() -> None:
    assert writable_layer({"Names": ["/x"]}, "/var/lib/docker", 5.0) is None
    empty = writable_layer({"Id": "c1"}, "/var/lib/docker", 5.0)  # Docker omits a SizeRw of 0
    assert empty is not None and empty.writable_layer_used_bytes == 0
    stats = writable_layer({"Id": "c1", "SizeRw": 8388608, "SizeRootFs": 12000000}, "/var/lib/docker", 5.0)
    assert stats is not None
    assert (stats.container_id, stats.writable_layer_mountpoint, stats.writable_layer_used_bytes,
            stats.writable_layer_inodes_used, stats.writable_layer_timestamp) == ("c1", "/var/lib/docker", 8388608,
                                                                                  None, 5.0)

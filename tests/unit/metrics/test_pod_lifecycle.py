"""Each pod lifecycle family observed at the moment the kubelet observes it, with its labels, driven through the
agent's pod stack on the fake runtime and the fake clock."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cri.errors import RuntimeError_
from cri.fake import Program
from minikubelet.base.podview import Pod
from minikubelet.services.housekeeping import set_pod_gauges
from tests.unit.fake_node import IMAGE, FakeNode, make_pod, running_node
from tests.unit.metrics.scrape import scrape, value


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[FakeNode]:
    async with running_node(tmp_path, max_pods=2) as n:
        yield n


def api_pod(name: str, uid: str, containers: list[dict[str, Any]] | None = None) -> Pod:
    pod = copy.deepcopy(make_pod(name, uid, containers))
    pod["metadata"]["annotations"]["kubernetes.io/config.source"] = "api"
    return pod


def v(n: FakeNode, sample: str, **labels: str) -> float | None:
    return value(n.metrics.registry, sample, **labels)


async def test_a_pod_start_counts_the_pod_its_containers_and_the_start_latencies(node: FakeNode) -> None:
    n = node
    assert v(n, "kubelet_started_pods_total") == 0
    n.clock.advance(0)
    n.config.set_source_pods("file", [make_pod(inits=[{"name": "init", "image": IMAGE}])])
    await n.settle()
    n.runtime.exit_container(n.runtime.container_id("init"), 0)
    await n.advance(2)
    assert n.phase() == "Running"
    assert v(n, "kubelet_started_pods_total") == 1 and v(n, "kubelet_started_pods_errors_total") == 0
    assert v(n, "kubelet_started_containers_total", container_type="init_container") == 1
    assert v(n, "kubelet_started_containers_total", container_type="container") == 1
    assert v(n, "kubelet_run_podsandbox_duration_seconds_count", runtime_handler="") == 1
    # the init container's exit, once, as the status shows it
    assert v(n, "kubelet_terminated_containers_total", container_type="init_container", exit_code="0",
             reason="Completed") == 1
    # first seen to Running: the pod became Running after the fake clock moved 1 s, its worker started at once
    assert v(n, "kubelet_pod_start_duration_seconds_count") == 1
    assert v(n, "kubelet_pod_start_duration_seconds_sum") == 1.0
    assert v(n, "kubelet_pod_worker_start_duration_seconds_count") == 1
    assert v(n, "kubelet_pod_worker_start_duration_seconds_sum") == 0.0
    assert v(n, "kubelet_containers_per_pod_count_sum") == 1 and v(n, "kubelet_containers_per_pod_count_count") == 1
    assert v(n, "kubelet_pod_worker_duration_seconds_count", operation_type="create") == 1
    assert (v(n, "kubelet_pod_worker_duration_seconds_count", operation_type="sync") or 0) >= 1
    # the topology manager (none) counted the admission; nothing rejected
    assert v(n, "kubelet_topology_manager_admission_requests_total") == 1
    assert "kubelet_admission_rejections_total" not in scrape(n.metrics.registry)


async def test_the_relist_counts_running_sandboxes_and_containers_by_state(node: FakeNode) -> None:
    n = node
    n.config.set_source_pods("file", [make_pod(containers=[{"name": "a", "image": IMAGE},
                                                           {"name": "b", "image": IMAGE}])])
    await n.settle()
    await n.pleg.relist()
    assert v(n, "kubelet_running_pods") == 1
    assert v(n, "kubelet_running_containers", container_state="running") == 2
    assert v(n, "kubelet_pleg_last_seen_seconds") == int(n.clock.now())
    assert v(n, "kubelet_pleg_relist_duration_seconds_count") == 1
    n.runtime.exit_container(n.runtime.container_id("b"), 3)
    n.clock.advance(5)
    await n.pleg.relist()
    assert v(n, "kubelet_running_containers", container_state="running") == 1
    assert v(n, "kubelet_running_containers", container_state="exited") == 1
    assert v(n, "kubelet_pleg_last_seen_seconds") == int(n.clock.now())
    await n.settle()
    assert v(n, "kubelet_terminated_containers_total", container_type="container", exit_code="3",
             reason="Error") == 1
    n.config.set_source_pods("file", [])
    await n.advance(35)
    await n.pleg.relist()
    assert v(n, "kubelet_running_pods") == 0
    # a state seen once stays in the scrape at 0, as upstream's gauge vector keeps its children
    assert v(n, "kubelet_running_containers", container_state="running") == 0


async def test_a_sandbox_the_runtime_refuses_is_a_start_error(node: FakeNode) -> None:
    n = node
    n.runtime.fail("run_pod_sandbox", RuntimeError_("no network"))
    n.config.set_source_pods("file", [make_pod()])
    await n.settle()
    assert v(n, "kubelet_started_pods_total") == 1 and v(n, "kubelet_started_pods_errors_total") == 1
    assert v(n, "kubelet_run_podsandbox_errors_total", runtime_handler="") == 1
    assert v(n, "kubelet_started_containers_total", container_type="container") is None


async def test_an_image_pull_failure_is_a_container_start_error_with_its_code(node: FakeNode) -> None:
    n = node
    n.runtime.fail_pull("private/app:1")
    n.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": "private/app:1"}])])
    await n.settle()
    # every attempt past the container back-off counts as a start; the first fails pulling, the next ones in the
    # pull's back-off
    starts = v(n, "kubelet_started_containers_total", container_type="container") or 0
    assert v(n, "kubelet_started_containers_errors_total", container_type="container", code="ErrImagePull") == 1
    backoffs = v(n, "kubelet_started_containers_errors_total", container_type="container", code="ImagePullBackOff")
    assert starts >= 1 and (backoffs or 0) == starts - 1
    assert "kubelet_image_pull_duration_seconds" not in scrape(n.metrics.registry)


async def test_a_pulled_image_is_timed_under_its_size_label(node: FakeNode) -> None:
    n = node
    n.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": "other:1",
                                                             "imagePullPolicy": "Always"}])])
    await n.settle()
    assert v(n, "kubelet_image_pull_duration_seconds_count", image_size_in_bytes="0-10MB") == 1
    assert v(n, "kubelet_image_manager_ensure_image_requests_total", pull_policy="always", present_locally="false",
             pull_required="true") == 1


async def test_ensure_image_requests_are_counted_by_policy_presence_and_pull(node: FakeNode) -> None:
    n = node
    n.config.set_source_pods("file", [
        make_pod("a", "uid-a", containers=[{"name": "app", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent"}]),
        make_pod("b", "uid-b", containers=[{"name": "app", "image": "absent:1", "imagePullPolicy": "Never"}])])
    await n.settle()
    assert v(n, "kubelet_image_manager_ensure_image_requests_total", pull_policy="ifnotpresent",
             present_locally="true", pull_required="false") == 1
    assert (v(n, "kubelet_image_manager_ensure_image_requests_total", pull_policy="never", present_locally="false",
              pull_required="unknown") or 0) >= 1


async def test_admission_rejections_are_counted_by_reason(node: FakeNode) -> None:
    n = node
    n.config.set_source_pods("file", [make_pod("a", "uid-a"), make_pod("b", "uid-b"), make_pod("c", "uid-c")])
    await n.settle()
    assert v(n, "kubelet_admission_rejections_total", reason="OutOfpods") == 1
    assert v(n, "kubelet_topology_manager_admission_requests_total") == 3


async def test_the_housekeeping_gauges_split_static_and_api_pods_and_the_workers(node: FakeNode) -> None:
    n = node
    n.runtime.program("slow", Program(ignore_stop_signal=True))  # stops only when its grace is over
    n.config.set_source_pods("file", [make_pod("s", "uid-s")])
    debug = {"name": "dbg", "image": IMAGE, "targetContainerName": "slow"}
    pod_a = api_pod("a", "uid-a", containers=[{"name": "slow", "image": IMAGE}])
    pod_a["spec"]["ephemeralContainers"] = [debug, {**debug, "name": "dbg2"}]
    n.config.set_source_pods("api", [pod_a])
    await n.settle()
    set_pod_gauges(n.metrics, n.manager.desired, n.manager.active_pods(), n.workers, n.manager.runtime_only, 2)
    assert v(n, "kubelet_desired_pods", static="true") == 1 and v(n, "kubelet_desired_pods", static="") == 1
    assert v(n, "kubelet_active_pods", static="true") == 1 and v(n, "kubelet_active_pods", static="") == 1
    assert v(n, "kubelet_mirror_pods") == 2
    assert v(n, "kubelet_managed_ephemeral_containers") == 2  # in the pod's spec, whether they run or not
    assert v(n, "kubelet_working_pods", lifecycle="sync", config="desired", static="true") == 1
    assert v(n, "kubelet_working_pods", lifecycle="sync", config="desired", static="") == 1
    working = [labels for name, labels, _ in scrape(n.metrics.registry)["kubelet_working_pods"].samples]
    assert len(working) == 15  # every valid (lifecycle, config, static) triple, as upstream sets them
    # the API pod is deleted from its source: its worker terminates it and is an orphan until it finishes
    n.config.set_source_pods("api", [])
    await n.settle()
    set_pod_gauges(n.metrics, n.manager.desired, n.manager.active_pods(), n.workers, n.manager.runtime_only, 0)
    assert v(n, "kubelet_desired_pods", static="") == 0
    orphan = sum(v(n, "kubelet_working_pods", lifecycle=lc, config="orphan", static="") or 0
                 for lc in ("sync", "terminating", "terminated"))
    assert orphan == 1 and "uid-a" in n.workers


async def test_a_runtime_pod_no_source_knows_is_an_orphaned_runtime_pod(tmp_path: Path) -> None:
    first = FakeNode(tmp_path)
    first.config.set_source_pods("file", [make_pod()])
    await first.settle()
    await first.workers.shutdown()
    successor = FakeNode(tmp_path, runtime=first.runtime)
    try:
        await successor.pleg.relist()
        adopted = successor.manager.adopt_orphans(successor.pleg.runtime_uids)
        assert adopted == 1 and successor.manager.runtime_only == {"uid-1"}
        set_pod_gauges(successor.metrics, successor.manager.desired, successor.manager.active_pods(),
                       successor.workers, successor.manager.runtime_only, 0)
        live = sum(value(successor.metrics.registry, "kubelet_working_pods", lifecycle=lc, config="runtime_only",
                         static="unknown") or 0 for lc in ("sync", "terminating", "terminated"))
        assert live == 1
        await successor.advance(5)
        assert "uid-1" in successor.finished and not successor.manager.runtime_only
    finally:
        await successor.close()
        await first.close()


async def test_a_static_pod_back_while_it_was_stopping_is_restarted_and_counted(node: FakeNode) -> None:
    n = node
    n.runtime.program("slow", Program(ignore_stop_signal=True))
    pod = make_pod(containers=[{"name": "slow", "image": IMAGE}])
    n.config.set_source_pods("file", [pod])
    await n.settle()
    first = n.runtime.container_id("slow")
    n.config.set_source_pods("file", [])
    await n.settle()
    n.config.set_source_pods("file", [pod])  # the same manifest again, the same uid, before the old one stopped
    await n.settle()
    n.manager.restart_unknown()
    assert "uid-1" in n.workers  # still the stopping worker: nothing to restart yet
    await n.advance(40)
    assert n.finished == ["uid-1"] and "uid-1" not in n.workers
    assert v(n, "kubelet_restarted_pods_total", static="true") == 0
    n.manager.restart_unknown()  # the next housekeeping pass
    await n.settle()
    assert v(n, "kubelet_restarted_pods_total", static="true") == 1 and v(n, "kubelet_restarted_pods_total", static="") == 0
    assert n.phase() == "Running" and n.runtime.container_id("slow") != first
    n.manager.restart_unknown()
    assert v(n, "kubelet_restarted_pods_total", static="true") == 1

"""The pod log layout the kubelet keeps: directories, legacy links, and their removal."""

from __future__ import annotations

import os
from pathlib import Path

from cri.fake import Program
from minikubelet.worker.log_files import (
    LogFiles,
    container_id_from_legacy_symlink,
    legacy_log_symlink,
    pod_uid_from_log_dir,
)
from tests.unit.fake_node import FakeNode, make_pod


def test_legacy_link_names_as_upstream() -> None:
    assert legacy_log_symlink("/var/log/containers", "abc123def456", "app", "web", "prod") == (
        "/var/log/containers/web_prod_app-abc123def456.log")
    long = legacy_log_symlink("/d", "f" * 64, "c" * 63, "p" * 253, "n" * 63)
    assert len(os.path.basename(long)) == 255 and long.endswith(".log")
    assert container_id_from_legacy_symlink("/d/web_prod_my-app-abc123def456.log") == "abc123def456"
    assert container_id_from_legacy_symlink("/d/web_prod_app-abc.log") == ""
    assert container_id_from_legacy_symlink("/d/web_prod_app-abc123def456.txt") == ""
    assert pod_uid_from_log_dir("kube-system_my_pod_0f3c-uid") == "0f3c-uid"


async def test_a_running_pod_has_its_log_files_and_links(node: FakeNode, tmp_path: Path) -> None:
    node.runtime.program("app", Program(logs=b"hello\n"))
    node.config.set_source_pods("file", [make_pod(containers=[{"name": "app", "image": "busybox:1.36"},
                                                              {"name": "quiet", "image": "busybox:1.36"}])])
    await node.settle()
    pod_dir = tmp_path / "logs" / "default_p_uid-1"
    assert sorted(p.name for p in pod_dir.iterdir()) == ["app", "quiet"]
    assert (pod_dir / "app" / "0.log").read_bytes() == b"hello\n"
    link = tmp_path / "containers" / f"p_default_app-{node.runtime.container_id('app')}.log"
    assert os.readlink(link) == str(pod_dir / "app" / "0.log")
    assert link.read_bytes() == b"hello\n"


async def test_removing_the_pod_removes_its_logs_and_links(node: FakeNode, tmp_path: Path) -> None:
    node.runtime.program("app", Program(exit_on_start=1, logs=b"x\n"))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert len(list((tmp_path / "containers").iterdir())) == 2
    node.config.set_source_pods("file", [])
    await node.settle()
    assert node.finished == ["uid-1"]
    assert list((tmp_path / "containers").iterdir()) == []
    assert list((tmp_path / "logs").iterdir()) == []


def test_no_legacy_link_without_a_log_at_the_container_path(tmp_path: Path) -> None:
    # as with Docker's journald driver: nothing at the path, so the link would only dangle
    logs = LogFiles(str(tmp_path / "pods"), str(tmp_path / "containers"))
    target = tmp_path / "pods" / "default_p_u" / "app" / "0.log"
    logs.link_legacy("abc123def456", "app", "p", "default", str(target))
    assert not (tmp_path / "containers").exists()
    logs.ensure_container_dir("default", "p", "u", "app")
    target.write_bytes(b"x\n")
    logs.link_legacy("abc123def456", "app", "p", "default", str(target))
    assert (tmp_path / "containers" / "p_default_app-abc123def456.log").read_bytes() == b"x\n"


async def test_a_log_directory_that_cannot_be_made_fails_the_sandbox(node: FakeNode, tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("not a directory")
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    assert [r for r, _ in node.events()] == ["FailedCreatePodSandBox"]
    assert "failed to create log directory for pod" in node.events()[0][1]
    assert node.runtime.running() == []

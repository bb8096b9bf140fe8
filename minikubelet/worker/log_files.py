"""The kubelet's container log files (upstream kuberuntime helpers.go, legacy.go, removeContainerLog).

Layout: `<podLogsDir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`, written (containerd) or
symlinked to the engine's own file (cri-dockerd) by the runtime, plus the legacy symlink
`<legacyDir>/<pod>_<namespace>_<container>-<containerID>.log` -> that path for log shippers.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil

from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.types import LABEL_POD_NAME, LABEL_POD_NAMESPACE, ContainerState, ContainerStatus
from minikubelet.runtime.state import name_of

log = logging.getLogger("minikubelet.worker.log_files")

LEGACY_CONTAINER_LOGS_DIR = "/var/log/containers"
LEGACY_LOG_SUFFIX = ".log"
_EXT4_MAX_FILE_NAME = 255
_MIN_CONTAINER_ID = 6  # the runtime resolves ids this short


def pod_log_dir(pod_logs_dir: str, namespace: str, name: str, uid: str) -> str:
    return os.path.join(pod_logs_dir, f"{namespace}_{name}_{uid}")


def pod_uid_from_log_dir(dirname: str) -> str:
    return dirname.rsplit("_", 1)[-1]


def legacy_log_symlink(legacy_dir: str, container_id: str, container: str, pod: str, namespace: str) -> str:
    name = f"{pod}_{namespace}_{container}-{container_id}"
    # ext4 limits a file name to 255 bytes; upstream truncates before the suffix.
    return os.path.join(legacy_dir, name[: _EXT4_MAX_FILE_NAME - len(LEGACY_LOG_SUFFIX)] + LEGACY_LOG_SUFFIX)


def container_id_from_legacy_symlink(path: str) -> str:
    """'' when the name carries no plausible container id."""
    last = path.rsplit("-", 1)[-1]
    if not last.endswith(LEGACY_LOG_SUFFIX):
        return ""
    cid = last.removesuffix(LEGACY_LOG_SUFFIX)
    return cid if len(cid) >= _MIN_CONTAINER_ID else ""


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


class LogFiles:
    """Creates and removes the kubelet's side of the log layout. `legacy_dir` '' turns the legacy links off."""

    def __init__(self, pod_logs_dir: str, legacy_dir: str = "") -> None:
        self.pod_logs_dir = pod_logs_dir
        self.legacy_dir = legacy_dir

    def ensure_pod_dir(self, namespace: str, name: str, uid: str) -> None:
        os.makedirs(pod_log_dir(self.pod_logs_dir, namespace, name, uid), mode=0o755, exist_ok=True)

    def ensure_container_dir(self, namespace: str, name: str, uid: str, container: str) -> None:
        os.makedirs(os.path.join(pod_log_dir(self.pod_logs_dir, namespace, name, uid), container), mode=0o755,
                    exist_ok=True)

    def remove_pod_dir(self, namespace: str, name: str, uid: str) -> None:
        shutil.rmtree(pod_log_dir(self.pod_logs_dir, namespace, name, uid), ignore_errors=True)

    def link_legacy(self, container_id: str, container: str, pod: str, namespace: str, log_path: str) -> None:
        """After start. Skipped when the runtime left no log at `log_path`: the link would only dangle."""
        if not self.legacy_dir or not log_path or not os.path.exists(log_path):
            return
        link = legacy_log_symlink(self.legacy_dir, container_id, container, pod, namespace)
        try:
            os.makedirs(self.legacy_dir, mode=0o755, exist_ok=True)
            _remove(link)
            os.symlink(log_path, link)
        except OSError as e:
            log.warning("cannot create the legacy log symlink", extra={"kv": {"path": link, "err": str(e)}})

    def _legacy_link(self, status: ContainerStatus) -> str:
        return legacy_log_symlink(self.legacy_dir, status.id, name_of(status), status.labels.get(LABEL_POD_NAME, ""),
                                  status.labels.get(LABEL_POD_NAMESPACE, ""))

    def remove_container_logs(self, status: ContainerStatus) -> None:
        """The container's log (and rotated siblings) and its legacy link (upstream removeContainerLog)."""
        if status.log_path:
            for path in [status.log_path, *glob.glob(glob.escape(status.log_path) + ".*")]:
                _remove(path)
        if self.legacy_dir:
            _remove(self._legacy_link(status))

    async def remove_container(self, runtime: Runtime, status: ContainerStatus) -> None:
        """Logs first, then the container, as upstream removeContainer."""
        try:
            self.remove_container_logs(status)
        except OSError as e:
            log.warning("cannot remove container logs", extra={"kv": {"container": status.id, "err": str(e)}})
        await runtime.remove_container(status.id)

    def remove_stale_pod_dirs(self, existing: set[str]) -> None:
        """The log directories of pods whose uid is not in `existing`."""
        try:
            names = os.listdir(self.pod_logs_dir)
        except FileNotFoundError:
            return
        for n in names:
            if pod_uid_from_log_dir(n) not in existing:
                shutil.rmtree(os.path.join(self.pod_logs_dir, n), ignore_errors=True)

    async def remove_dangling_legacy_links(self, runtime: Runtime) -> None:
        """Links whose target is gone, unless their container still runs (its log may be mid-rotation)."""
        if not self.legacy_dir:
            return
        for link in glob.glob(os.path.join(glob.escape(self.legacy_dir), "*" + LEGACY_LOG_SUFFIX)):
            if os.path.exists(link):
                continue
            cid = container_id_from_legacy_symlink(link)
            if cid:
                try:
                    status: ContainerStatus | None = await runtime.container_status(cid)
                except RuntimeError_:
                    status = None
                if status is not None and status.state is not ContainerState.EXITED:
                    continue
            _remove(link)

"""Static pod manifests from a directory: watched with inotify, re-listed every fileCheckFrequency."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable

import watchfiles

from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.metrics import Metrics
from minikubelet.sources.static_pod import ManifestError, make_static_pod, parse_manifest, should_read

log = logging.getLogger("minikubelet.static_pods")

MAX_MANIFEST_BYTES = 10 * 1024 * 1024
SOURCE = "file"


class StaticPodSource:
    def __init__(self, path: str, node_name: str, clock: Clock, metrics: Metrics,
                 publish: Callable[[str, list[Pod]], None], check_frequency: float = 20.0) -> None:
        self.path = path
        self.node_name = node_name
        self._clock = clock
        self._metrics = metrics
        self._publish = publish
        self.check_frequency = check_frequency
        self._reported: dict[str, str] = {}  # file -> digest of the content last reported bad
        self._seen: dict[str, tuple[str, Pod]] = {}  # file -> (content digest, pod) keeps config.seen stable

    def _read_one(self, fpath: str) -> Pod | None:
        try:
            with open(fpath, "rb") as f:
                data = f.read(MAX_MANIFEST_BYTES + 1)
        except OSError as e:
            self._bad(fpath, "unreadable", f"cannot read file: {e}", "")
            return None
        digest = hashlib.sha256(data).hexdigest()
        cached = self._seen.get(fpath)
        if cached is not None and cached[0] == digest:
            return cached[1]
        if len(data) > MAX_MANIFEST_BYTES:
            self._bad(fpath, "too_large", f"manifest is larger than {MAX_MANIFEST_BYTES} bytes", digest)
            return None
        try:
            pod = make_static_pod(parse_manifest(data, fpath), self.node_name, fpath, seen=self._clock.now())
        except ManifestError as e:
            self._bad(fpath, "invalid", str(e), digest)
            return None
        for warning in pod.warnings:  # once per file version: the pod is cached by content digest
            log.warning("static pod manifest", extra={"kv": {"file": fpath, "warning": warning}})
        self._reported.pop(fpath, None)
        self._seen[fpath] = (digest, pod)
        return pod

    def _bad(self, fpath: str, reason: str, message: str, digest: str) -> None:
        self._seen.pop(fpath, None)
        if self._reported.get(fpath) == digest and digest:
            return  # one line per bad version of a file, not one per re-list
        self._reported[fpath] = digest
        self._metrics.static_pod_manifest_errors.labels(reason).inc()
        log.error("rejected static pod manifest", extra={"kv": {"file": fpath, "error": message}})

    def list_once(self) -> list[Pod]:
        try:
            names = sorted(os.listdir(self.path))
        except FileNotFoundError:
            names = []
        except OSError as e:
            log.error("cannot list static pod path", extra={"kv": {"path": self.path, "err": str(e)}})
            names = []
        pods: list[Pod] = []
        seen_names: dict[str, str] = {}
        present = set()
        for n in names:
            fpath = os.path.join(self.path, n)
            if not should_read(n) or not os.path.isfile(fpath):
                continue
            present.add(fpath)
            pod = self._read_one(fpath)
            if pod is None:
                continue
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            if key in seen_names:
                self._bad(fpath, "duplicate", f"pod {key} is already defined by {seen_names[key]}", "dup:" + key)
                continue
            seen_names[key] = fpath
            pods.append(pod)
        for gone in set(self._seen) - present:
            del self._seen[gone]
        return pods

    def sync(self) -> None:
        self._publish(SOURCE, self.list_once())

    async def run(self) -> None:
        self.sync()
        watcher = asyncio.create_task(self._watch())
        try:
            while True:
                await self._clock.sleep(self.check_frequency)
                self.sync()
        finally:
            watcher.cancel()

    async def _watch(self) -> None:
        while True:
            if not os.path.isdir(self.path):
                await self._clock.sleep(self.check_frequency)
                continue
            try:
                async for _changes in watchfiles.awatch(self.path, debounce=50, step=25, recursive=False):
                    self.sync()
            except (OSError, RuntimeError) as e:
                log.warning("watching static pod path failed", extra={"kv": {"path": self.path, "err": str(e)}})
                await self._clock.sleep(1.0)

"""Image pulls for a container, by its pull policy, with the image backoff (upstream images.imageManager)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from cri.errors import ImagePullError
from cri.runtime import ImageService
from minikubelet import events as ev
from minikubelet.base.clock import Clock
from minikubelet.base.durations import go_duration_ms
from minikubelet.base.podview import ContainerView, PodView
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics, image_size_bucket
from minikubelet.worker.backoff import Backoff
from minikubelet.worker.pod_state import ImageFailure, PodSyncState


@dataclass(frozen=True)
class ImageResult:
    ok: bool
    stop_signal: str = ""  # the image's STOPSIGNAL, when it has one
    user: str = ""  # the image's USER (runAsNonRoot checks it; the container runs as it by default)
    failure: tuple[str, str] | None = None  # (reason, message) of a failed pull, recorded as a start failure


class ImagePuller:
    def __init__(self, images: ImageService, backoff: Backoff, recorder: EventRecorder, metrics: Metrics,
                 clock: Clock, serialize: bool = True) -> None:
        self._images = images
        # serializeImagePulls (default true): one pull at a time on the node; otherwise no limit
        self._serial: contextlib.AbstractAsyncContextManager[object] = (
            asyncio.Lock() if serialize else contextlib.nullcontext())
        self._backoff = backoff
        self._recorder = recorder
        self._metrics = metrics
        self._clock = clock

    @staticmethod
    def key(pod_uid: str, c: ContainerView) -> str:
        return f"{pod_uid}_{c.image}"

    async def ensure_image(self, view: PodView, c: ContainerView, st: PodSyncState) -> ImageResult:
        pod, uid, name, image = view.raw, view.uid, c.name, c.image
        policy = c.image_pull_policy or "IfNotPresent"
        present = await self._images.image_status(image)
        local = "true" if present is not None else "false"
        if present is not None and policy != "Always":
            self._metrics.ensure_image_requests.labels(policy.lower(), local, "false").inc()
            self._recorder.pod_event(
                pod, "Normal", ev.PULLED,
                f'Container image "{image}" already present on machine and can be accessed by the pod', name)
            return ImageResult(True, present.stop_signal, present.user)
        if policy == "Never":
            self._metrics.ensure_image_requests.labels("never", local, "unknown").inc()
            msg = f'Container image "{image}" is not present with pull policy of Never'
            st.reasons[name] = ("ErrImageNeverPull", msg)
            self._recorder.pod_event(pod, "Warning", ev.ERR_IMAGE_NEVER_PULL, msg, name)
            return ImageResult(False)
        self._metrics.ensure_image_requests.labels(policy.lower(), local, "true").inc()
        key = self.key(uid, c)
        failure = st.image_errors.get(key)
        if failure is not None and self._backoff.in_backoff_since(key, failure.at):
            st.reasons[name] = ("ImagePullBackOff", f'Back-off pulling image "{image}": ErrImagePull: {failure.message}')
            self._recorder.pod_event(pod, "Normal", ev.BACKOFF, f'Back-off pulling image "{image}"', name)
            return ImageResult(False)
        self._metrics.pod_startup.image_pull_started(uid)
        self._recorder.pod_event(pod, "Normal", ev.PULLING, f'Pulling image "{image}"', name)
        t0 = time.monotonic()
        try:
            async with self._serial:
                t_pull = time.monotonic()
                await self._images.pull_image(image)
                pulled_in = time.monotonic() - t_pull
        except ImagePullError as e:
            now = self._clock.now()
            self._backoff.next(key, now)
            st.image_errors[key] = ImageFailure(str(e), now)
            self._recorder.pod_event(pod, "Warning", ev.FAILED, f'Failed to pull image "{image}": {e}', name)
            return ImageResult(False, failure=("ErrImagePull", str(e)))
        took = time.monotonic() - t0
        self._metrics.pod_startup.image_pull_finished(uid)
        st.image_errors.pop(key, None)
        info = await self._images.image_status(image)
        self._metrics.image_pull_duration.labels(image_size_bucket(info.size if info is not None else 0)).observe(took)
        self._recorder.pod_event(
            pod, "Normal", ev.PULLED,
            f'Successfully pulled image "{image}" in {go_duration_ms(pulled_in)} ({go_duration_ms(took)} including'
            f" waiting). Image size: {info.size if info is not None else 0} bytes.", name,
        )
        return ImageResult(True, info.stop_signal if info is not None else "", info.user if info is not None else "")

    def backoff_remaining(self, uid: str, c: ContainerView, st: PodSyncState) -> float:
        key = self.key(uid, c)
        failure = st.image_errors.get(key)
        return self._backoff.remaining(key, failure.at) if failure is not None else 0.0

    def backoff_delay(self, uid: str, c: ContainerView) -> float:
        """The current pull back-off of this pod's image (0: none)."""
        return self._backoff.get(self.key(uid, c))

    def forget_pod(self, uid: str) -> None:
        self._backoff.forget_prefix(f"{uid}_")

"""What a pod from the API server reads through the node: its ConfigMaps and Secrets (upstream's configmap and
secret managers over the watch-based object cache), its service account tokens (the token manager) and the
Services of its environment (the kubelet's service informer). Each sync takes a `PodObjects` snapshot, from which
its env and volumes are built."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from minikubelet.api.pod_objects import (
    CONFIGMAP,
    SECRET,
    ObjectUnavailable,
    PodObjects,
    references,
    standalone,
    token_key,
    token_sources,
)
from minikubelet.api.service_env import service_env_map
from minikubelet.base import podview
from minikubelet.base.podview import Pod, PodView
from minikubelet.kubeapi.informer import Informer
from minikubelet.kubeapi.object_cache import CacheError, ObjectCache
from minikubelet.kubeapi.token_manager import TokenError, TokenManager, TokenSpec

API_SOURCE = "api"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
SERVICES_NOT_SYNCED = "services have not yet been read at least once, cannot construct envvars"


def from_api_server(pod: Pod) -> bool:
    annotations = podview.meta(pod).get("annotations")
    return isinstance(annotations, dict) and annotations.get(CONFIG_SOURCE_ANNOTATION) == API_SOURCE


def _enable_service_links(pod: Pod) -> bool:
    return podview.spec(pod).get("enableServiceLinks") is not False  # defaulted to true


class PodObjectSource:
    def __init__(self, configmaps: ObjectCache, secrets: ObjectCache, services: Informer | None,
                 tokens: TokenManager | None = None) -> None:
        self.configmaps = configmaps
        self.secrets = secrets
        self.services = services
        self.tokens = tokens
        # pod uid -> (namespace, ConfigMap names, Secret names) it holds references to
        self._registered: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {}

    def register(self, pod: Pod) -> None:
        """Upstream RegisterPod: reference what this version of the pod uses, then release what the previous
        version used (in that order, so that a name both use keeps its watch)."""
        uid = podview.uid(pod)
        ns = podview.namespace(pod)
        cms, secrets = references(pod)
        new = (ns, cms, secrets)
        old = self._registered.get(uid)
        if old == new:
            return
        for name in cms:
            self.configmaps.add_reference(ns, name, uid)
        for name in secrets:
            self.secrets.add_reference(ns, name, uid)
        self._registered[uid] = new
        if old is not None:
            self._release(uid, old)

    def release(self, uid: str) -> None:
        """Upstream UnregisterPod: the pod is gone; watches nothing else needs stop."""
        old = self._registered.pop(uid, None)
        if old is not None:
            self._release(uid, old)
        if self.tokens is not None:
            self.tokens.delete_pod_tokens(uid)

    def _release(self, uid: str, refs: tuple[str, frozenset[str], frozenset[str]]) -> None:
        ns, cms, secrets = refs
        for name in cms:
            self.configmaps.delete_reference(ns, name, uid)
        for name in secrets:
            self.secrets.delete_reference(ns, name, uid)

    def close(self) -> None:
        self.configmaps.close()
        self.secrets.close()

    def registered(self) -> list[str]:
        return sorted(self._registered)

    def pods_referencing(self, kind: str, namespace: str, name: str) -> list[str]:
        cache = self.configmaps if kind == CONFIGMAP else self.secrets
        return cache.referenced_by(namespace, name)

    async def snapshot(self, view: PodView) -> PodObjects:
        pod = view.raw
        service_env, service_error = self._service_env(pod)
        if not from_api_server(pod):
            # static pods cannot reference API objects (the API server refuses such mirror pods)
            base = standalone(pod)
            return PodObjects(base.namespace, service_env=service_env, service_env_error=service_error)
        self.register(pod)
        ns = view.namespace
        cms, secrets = references(pod)
        return PodObjects(ns, configmaps={n: await _get(self.configmaps, ns, n) for n in sorted(cms)},
                          secrets={n: await _get(self.secrets, ns, n) for n in sorted(secrets)},
                          service_env=service_env, service_env_error=service_error,
                          tokens=await self._tokens(view))

    async def _tokens(self, view: PodView) -> dict[tuple[str, int], str | ObjectUnavailable]:
        """A token for every (audience, expirationSeconds) its projected volumes ask for (upstream: one
        TokenRequest per source, answered from the token manager's cache until it needs a refresh)."""
        if self.tokens is None:
            return {}
        sa = podview.spec(view.raw).get("serviceAccountName")
        out: dict[tuple[str, int], str | ObjectUnavailable] = {}
        for source in token_sources(view.raw):
            key = token_key(source)
            if key in out:
                continue
            spec = TokenSpec(view.namespace, sa if isinstance(sa, str) and sa else "default", key[0], key[1],
                             view.name, view.uid)
            try:
                out[key] = await self.tokens.get(spec)
            except TokenError as e:
                out[key] = ObjectUnavailable(str(e))
        return out

    def _service_env(self, pod: Pod) -> tuple[Mapping[str, str] | None, str]:
        if self.services is None:
            return None, ""
        if not self.services.synced:
            # upstream waits for the service informer for pods from the API server only
            return ({}, SERVICES_NOT_SYNCED) if from_api_server(pod) else ({}, "")
        return service_env_map(self.services.list(), podview.namespace(pod), _enable_service_links(pod)), ""


async def _get(cache: ObjectCache, ns: str, name: str) -> Mapping[str, Any] | ObjectUnavailable:
    try:
        return await cache.get(ns, name)
    except CacheError as e:
        return ObjectUnavailable(str(e), e.not_found)


def waker(source: Callable[[], PodObjectSource | None], wake: Callable[[str], None],
          kind: str) -> Callable[[str, str], None]:
    """An ObjectCache's on_change: wake every pod that references the object, so that its volumes are
    rewritten (and a pod waiting for it starts) without waiting for the sync period."""
    def on_change(namespace: str, name: str) -> None:
        objects = source()
        if objects is not None:
            for uid in objects.pods_referencing(kind, namespace, name):
                wake(uid)
    return on_change


__all__ = ["CONFIGMAP", "SECRET", "PodObjectSource", "from_api_server", "waker"]

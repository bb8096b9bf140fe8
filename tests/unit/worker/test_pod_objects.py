"""The pod's view of the API objects (upstream configmap/secret managers' RegisterPod / UnregisterPod, the
service lister and the token manager) against the test API server: references follow the pod's spec, are
released with the pod, and each sync gets one snapshot; static pods read nothing."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from minikubelet.api.pod_objects import ObjectUnavailable
from minikubelet.base.clock import RealClock
from minikubelet.base.podview import PodView
from minikubelet.kubeapi.informer import Informer
from minikubelet.kubeapi.object_cache import ObjectCache
from minikubelet.kubeapi.token_manager import TokenManager
from minikubelet.worker.pod_objects import SERVICES_NOT_SYNCED, PodObjectSource
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.kubeapi.helpers import client_for, eventually


def api_pod(created: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API source hands it on."""
    md = dict(created["metadata"])
    md["annotations"] = {**(md.get("annotations") or {}), "kubernetes.io/config.source": "api"}
    return {**created, "metadata": md}


def pod_spec(name: str, configmaps: list[str], secret: str = "") -> dict[str, Any]:
    env = [{"name": f"C{i}", "valueFrom": {"configMapKeyRef": {"name": c, "key": "k"}}} for i, c in enumerate(configmaps)]
    volumes: list[dict[str, Any]] = [{"name": "s", "secret": {"secretName": secret}}] if secret else []
    volumes.append({"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "n1", "automountServiceAccountToken": False, "volumes": volumes,
                     "containers": [{"name": "c", "image": "busybox", "env": env}]}}


async def test_references_follow_the_spec_and_go_with_the_pod(api_server: ApiServer,  # noqa: F811
                                                              tmp_path: Path) -> None:
    admin = api_server.admin()
    for name in ("a", "b"):
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
                            "data": {"k": name}})
    await admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
                        "data": {"k": base64.b64encode(b"v").decode()}})
    created = await admin.create(pod_spec("p", ["a", "b"], "s"))
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    clock = RealClock()
    services = Informer(client, "/api/v1/services", clock, field_selector="spec.clusterIP!=None")
    source = PodObjectSource(ObjectCache(client, "configmaps", "configmap", clock),
                             ObjectCache(client, "secrets", "secret", clock), services, TokenManager(client, clock))
    view = PodView.of(api_pod(created))
    task: asyncio.Task[None] | None = None
    try:
        early = await source.snapshot(view)  # the Service informer has not listed yet
        assert early.service_env_error == SERVICES_NOT_SYNCED
        task = asyncio.create_task(services.run())
        await eventually(lambda: services.synced, what="the services list")
        snap = await source.snapshot(view)
        assert snap.service_env is not None and snap.service_env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
        assert snap.configmap("a")["data"] == {"k": "a"} and snap.secret("s")["data"]["k"] == "dg=="
        token = snap.tokens[("", 3600)]
        assert isinstance(token, str) and api_server.tokens.claims(token) is not None
        assert source.configmaps.watched() == {("default", "a"): True, ("default", "b"): True}

        # a new version of the pod that no longer uses "a" and now uses "c" (which does not exist)
        uid = view.uid
        newer = api_pod(created)
        newer["spec"]["containers"][0]["env"] = pod_spec("p", ["b", "c"])["spec"]["containers"][0]["env"]
        snap = await source.snapshot(PodView.of(newer))
        assert set(source.configmaps.watched()) == {("default", "b"), ("default", "c")}
        missing = snap.configmaps["c"]
        # the stored pod does not reference "c": the Node authorizer refuses it, the cache cannot list it
        assert isinstance(missing, ObjectUnavailable) and not missing.not_found

        source.release(uid)
        assert source.configmaps.watched() == {} and source.secrets.watched() == {} and source.registered() == []
    finally:
        if task is not None:
            task.cancel()
        source.close()
        await client.close()


async def test_static_pods_read_no_objects(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    clock = RealClock()
    source = PodObjectSource(ObjectCache(client, "configmaps", "configmap", clock),
                             ObjectCache(client, "secrets", "secret", clock), None, TokenManager(client, clock))
    try:
        static = pod_spec("s", ["a"])
        static["metadata"]["uid"] = "static-uid"
        snap = await source.snapshot(PodView.of(static))
        assert snap.configmaps == {} and snap.tokens == {} and source.registered() == []
        assert source.configmaps.watched() == {}
    finally:
        source.close()
        await client.close()

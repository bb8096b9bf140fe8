"""Cluster states the recorded exchanges imply, built through the API as admin and nodes would."""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver import ApiServer, Client
from tests.unit.apiserver.replay import load

Json = dict[str, Any]


def stored_as_request(obj: Json) -> Json:
    """A recorded object as a create request: system metadata and status taken out."""
    out = copy.deepcopy(obj)
    md = out["metadata"]
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                "deletionGracePeriodSeconds", "managedFields"):
        md.pop(key, None)
    out.pop("status", None)
    return out


class World:
    """uids: recorded uid -> this run's uid, for substitute()."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.admin = api.admin()
        self.uids: dict[str, str] = {}
        self.nodes: dict[str, Client] = {}

    async def node(self, name: str, recorded_uid: str = "") -> Client:
        client = self.api.node_client(name)
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}}
        reply = await client.request("POST", "/api/v1/nodes", body)
        assert reply.status == 201, reply.body
        if recorded_uid:
            self.uids[recorded_uid] = reply.body["metadata"]["uid"]
        self.nodes[name] = client
        return client

    async def create(self, obj: Json, recorded_uid: str = "") -> Json:
        created = await self.admin.create(obj)
        if recorded_uid:
            self.uids[recorded_uid] = created["metadata"]["uid"]
        return created

    async def recorded(self, obj: Json) -> Json:
        """Create a recorded object again, mapping its recorded uid to the new one."""
        return await self.create(stored_as_request(obj), obj["metadata"].get("uid", ""))

    async def rich_pod(self) -> Json:
        """fx-node-1, fx-node-2, rich-config, rich-secret and rich-pod as pod-rich-create.json made it."""
        await self.node("fx-node-1", "3969a5dc-d6c5-4aae-9fce-f4ae98a1e795")
        await self.node("fx-node-2")
        await self.recorded(load("node-get-referenced-secret.json")["response"]["body"])
        await self.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rich-config", "namespace": "default"},
                           "data": {"greeting": "hello", "level": "debug"}})
        fx = load("pod-rich-create.json")
        return await self.create(fx["request"]["body"], fx["response"]["body"]["metadata"]["uid"])

    async def simple_pod(self, name: str, node: str, recorded_uid: str = "", **labels: str) -> Json:
        body: Json = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                      "spec": {"nodeName": node, "containers": [
                          {"name": "c", "image": "local/busybox:latest", "command": ["sleep", "3600"]}]}}
        if labels:
            body["metadata"]["labels"] = labels
        return await self.create(body, recorded_uid)

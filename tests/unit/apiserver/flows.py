"""Replaying kubelet-flows/*.json: the node's (or bootstrap user's) own requests, in order, with the
other actors' steps done through the admin client, and each answer's status code compared."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tests.apiserver import ApiServer, Client, Identity
from tests.unit.apiserver.replay import load, shape, substitute

Json = dict[str, Any]
_METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH",
            "delete": "DELETE"}
# Resources a real kubelet touches that this server does not serve (CSI, DRA, RuntimeClass).
UNSERVED = ("/apis/storage.k8s.io/", "/apis/resource.k8s.io/", "/apis/node.k8s.io/")


@dataclass
class Replay:
    api: ApiServer
    clients: dict[str, Client]
    mapping: dict[str, str] = field(default_factory=dict)
    other: Callable[[Json], Awaitable[None]] | None = None
    results: list[tuple[str, str, int, int]] = field(default_factory=list)  # verb, uri, recorded, ours
    last: dict[str, Json] = field(default_factory=dict)  # path -> our last answer about that object

    async def run(self, flow: str) -> list[Json]:
        entries: list[Json] = load(f"kubelet-flows/{flow}")
        answers = []
        for entry in entries:
            user = entry["user"]
            if user not in self.clients:
                if self.other is not None:
                    await self.other(entry)
                continue
            if any(entry["requestURI"].startswith(p) for p in UNSERVED):
                continue
            answers.append(await self.step(self.clients[user], entry))
        return answers

    async def step(self, client: Client, entry: Json) -> Json:
        verb, uri = entry["verb"], substitute(entry["requestURI"], self.mapping)
        uri = re.sub(r"timeoutSeconds=\d+", "timeoutSeconds=0", uri)
        uri = re.sub(r"([?&])resourceVersion=\d+", rf"\g<1>resourceVersion={self.api.store.rv}", uri)
        if verb == "watch" and "watch=" not in uri:
            uri += "&watch=true"
        body = substitute(entry.get("requestObject"), self.mapping)
        path = uri.split("?")[0]
        if verb == "update" and isinstance(body, dict) and path in self.last:
            body["metadata"]["resourceVersion"] = self.last[path]["metadata"]["resourceVersion"]
        if verb == "patch" and body is None:
            body = {}
        ctype = "application/strategic-merge-patch+json" if verb == "patch" else "application/json"
        reply = await client.request(_METHODS[verb], uri, body, content_type=ctype)
        want = entry["responseStatus"]["code"]
        self.results.append((verb, entry["requestURI"], want, reply.status))
        answer: Json = reply.body if isinstance(reply.body, dict) else {}
        if reply.status < 300 and answer.get("metadata", {}).get("name"):
            name_path = path if verb != "create" or path.endswith(("/eviction", "/token")) else f"{path}/{answer['metadata']['name']}"
            self.last[name_path] = answer
            recorded_md = (entry.get("responseObject") or {}).get("metadata", {})
            if verb == "create" and recorded_md.get("generateName") and recorded_md.get("name"):
                self.mapping.setdefault(recorded_md["name"], answer["metadata"]["name"])
            recorded_uid = recorded_md.get("uid")
            if recorded_uid and answer["metadata"].get("uid") and verb in ("create", "get"):
                self.mapping.setdefault(recorded_uid, answer["metadata"]["uid"])
        return answer

    def mismatches(self) -> list[tuple[str, str, int, int]]:
        return [r for r in self.results if r[2] != r[3]]


def node_clients(api: ApiServer, node: str) -> dict[str, Client]:
    return {f"system:node:{node}": api.node_client(node)}


def bootstrap_client(api: ApiServer, identity: Identity) -> Client:
    return api.client(identity)


def same_shape(ours: Json, recorded: Json) -> bool:
    return bool(shape(ours) == shape(recorded))

"""A small HTTPS client for tests: admin operations like kubectl's, and raw requests as any identity."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.apiserver.resources import BY_PLURAL

Json = dict[str, Any]


@dataclass(frozen=True)
class Identity:
    name: str
    cert_file: Path | None = None
    key_file: Path | None = None
    token: str = ""


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class ApiStatusError(Exception):
    def __init__(self, reply: Reply) -> None:
        super().__init__(f"{reply.status}: {reply.body}")
        self.reply = reply


def _path(api_version: str, plural: str, namespace: str = "", name: str = "", sub: str = "") -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
    if sub:
        parts.append(sub)
    return "/".join(parts)


_BY_KIND = {r.kind: r for r in BY_PLURAL.values()}


class Client:
    def __init__(self, url: str, ca_pem: bytes, identity: Identity | None) -> None:
        self.url = url
        self.identity = identity
        self._ssl = ssl.create_default_context(cadata=ca_pem.decode())
        if identity is not None and identity.cert_file is not None and identity.key_file is not None:
            self._ssl.load_cert_chain(identity.cert_file, identity.key_file)

    def _headers(self, content_type: str = "application/json") -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if self.identity is not None and self.identity.token:
            headers["Authorization"] = f"Bearer {self.identity.token}"
        return headers

    async def request(self, method: str, path: str, body: object = None, *,
                      content_type: str = "application/json", timeout: float = 10.0) -> Reply:
        data = json.dumps(body).encode() if body is not None else None
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, session.request(
            method, self.url + path, data=data, headers=self._headers(content_type), ssl=self._ssl
        ) as resp:
            raw = await resp.read()
            try:
                parsed: Any = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode(errors="replace")
            return Reply(resp.status, parsed, dict(resp.headers))

    async def watch(self, path: str, *, timeout: float = 30.0) -> AsyncIterator[Json]:
        """The events of a watch request (`path` with its query), until the server ends the stream."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, session.get(
            self.url + path, headers=self._headers(), ssl=self._ssl
        ) as resp:
            if resp.status != 200:
                raise ApiStatusError(Reply(resp.status, await resp.json(), dict(resp.headers)))
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)

    async def _ok(self, method: str, path: str, body: object = None, content_type: str = "application/json") -> Json:
        reply = await self.request(method, path, body, content_type=content_type)
        if reply.status >= 300:
            raise ApiStatusError(reply)
        result: Json = reply.body
        return result

    # kubectl-like helpers ------------------------------------------------------------------------
    async def create(self, obj: Json) -> Json:
        res = _BY_KIND[obj["kind"]]
        ns = obj.get("metadata", {}).get("namespace", "default") if res.namespaced else ""
        return await self._ok("POST", _path(obj.get("apiVersion", "v1"), res.plural, ns), obj)

    async def get(self, plural: str, name: str, namespace: str = "", api_version: str = "v1") -> Json:
        return await self._ok("GET", _path(api_version, plural, namespace, name))

    async def list(self, plural: str, namespace: str = "", api_version: str = "v1", query: str = "") -> Json:
        return await self._ok("GET", _path(api_version, plural, namespace) + (f"?{query}" if query else ""))

    async def delete(self, plural: str, name: str, namespace: str = "", *, grace: int | None = None,
                     api_version: str = "v1") -> Json:
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace  # type: ignore[assignment]
        return await self._ok("DELETE", _path(api_version, plural, namespace, name), body)

    async def patch(self, plural: str, name: str, patch: Json, namespace: str = "", *, sub: str = "",
                    strategic: bool = True, api_version: str = "v1") -> Json:
        ctype = "application/strategic-merge-patch+json" if strategic else "application/merge-patch+json"
        return await self._ok("PATCH", _path(api_version, plural, namespace, name, sub), patch, ctype)

    async def evict(self, name: str, namespace: str = "default") -> Json:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        return await self._ok("POST", _path("v1", "pods", namespace, name, "eviction"), body)

    async def bind(self, name: str, node: str, namespace: str = "default") -> Json:
        """The scheduler's pods/binding."""
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        return await self._ok("POST", _path("v1", "pods", namespace, name, "binding"), body)

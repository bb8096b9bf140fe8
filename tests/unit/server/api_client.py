"""The 10250 API's routes served by the real listener on loopback, with an aiohttp client session bound to it
(plain HTTP: what is under test is the API; TLS is the listener's, tested in test_serving.py)."""

from __future__ import annotations

from typing import Any

import aiohttp

from minikubelet.server.kubelet_api import KubeletAPI
from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite


class ApiClient:
    def __init__(self, site: HttpSite) -> None:
        self.site = site
        self.session = aiohttp.ClientSession(base_url=f"http://127.0.0.1:{site.port}")

    @property
    def port(self) -> int:
        return self.site.port

    def get(self, path: str, **kw: Any) -> Any:
        return self.session.get(path, **kw)

    def post(self, path: str, **kw: Any) -> Any:
        return self.session.post(path, **kw)

    def request(self, method: str, path: str, **kw: Any) -> Any:
        return self.session.request(method, path, **kw)

    def ws_connect(self, path: str, **kw: Any) -> Any:
        return self.session.ws_connect(path, **kw)

    async def close(self) -> None:
        await self.session.close()
        await self.site.stop()


async def serve_api(api: KubeletAPI, limits: ServingLimits | None = None) -> ApiClient:
    site = HttpSite(api.routes(), "127.0.0.1", 0, limits or api.base.limits)
    await site.start()
    return ApiClient(site)

"""A thin layer over aiodocker's request helpers that speaks in `cri.errors`.

aiodocker's high-level objects hide status codes and buffer whole bodies; the runtime needs
both (404 -> NotFoundError, bounded reads of archives), so it goes through the raw helpers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import aiodocker
import aiohttp

from cri.errors import NotFoundError, RuntimeError_, RuntimeUnavailableError

# aiodocker reports "cannot connect" as a DockerError with this pseudo status.
_CONNECT_FAILED = 900
Params = Mapping[str, str | int | bool]


class DockerAPIError(RuntimeError_):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@contextmanager
def translate_errors(kind: type[RuntimeError_] = DockerAPIError) -> Iterator[None]:
    """404 -> NotFoundError, unreachable daemon -> RuntimeUnavailableError, else `kind`."""
    try:
        yield
    except aiodocker.DockerError as exc:
        if exc.status == 404:
            raise NotFoundError(exc.message) from exc
        if exc.status == _CONNECT_FAILED:
            raise RuntimeUnavailableError(exc.message) from exc
        if kind is DockerAPIError:
            raise DockerAPIError(exc.status, exc.message) from exc
        raise kind(exc.message) from exc
    except (aiohttp.ClientConnectionError, ConnectionError, FileNotFoundError) as exc:
        raise RuntimeUnavailableError(f"Docker Engine unreachable: {exc}") from exc


def label_filters(labels: Mapping[str, str], must_have: tuple[str, ...] = ()) -> str:
    return json.dumps({"label": [*must_have, *(f"{key}={value}" for key, value in labels.items())]})


class DockerClient:
    def __init__(self, endpoint: str, connect_timeout: float = 10.0) -> None:
        # No total timeout: waits, pulls, event and exec streams are legitimately long.
        self._docker = aiodocker.Docker(
            url=endpoint, timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)
        )

    @property
    def raw(self) -> aiodocker.Docker:
        return self._docker

    async def close(self) -> None:
        await self._docker.close()

    async def get(self, path: str, params: Params | None = None) -> Any:
        with translate_errors():
            return await self._docker._query_json(path, "GET", params=dict(params or {}))

    async def get_bytes(self, path: str, params: Params | None = None) -> bytes:
        """The undecoded body, for a caller that can tell from the bytes whether it needs decoding at all."""
        with translate_errors():
            async with self._docker._query(path, "GET", params=dict(params or {})) as response:
                return await response.read()

    async def post(
        self,
        path: str,
        body: Any = None,
        params: Params | None = None,
        kind: type[RuntimeError_] = DockerAPIError,
    ) -> Any:
        with translate_errors(kind):
            return await self._docker._query_json(path, "POST", params=dict(params or {}), data=body)

    async def delete(self, path: str, params: Params | None = None) -> Any:
        with translate_errors():
            return await self._docker._query_json(path, "DELETE", params=dict(params or {}))

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        method: str = "GET",
        params: Params | None = None,
        headers: Mapping[str, str] | None = None,
        kind: type[RuntimeError_] = DockerAPIError,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        with translate_errors(kind):
            response = await self._docker._do_query(
                path, method, params=dict(params or {}), headers=dict(headers or {}), timeout=None
            )
        try:
            with translate_errors(kind):
                yield response
        finally:
            response.close()

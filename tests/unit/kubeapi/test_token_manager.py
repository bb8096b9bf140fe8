"""Service account tokens (upstream token_manager.go): the TokenRequest as the recordings show it, the cache,
the refresh at 80 % of the lifetime or after 24 h on the injected clock, a failed refresh keeping a valid token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.kubeapi.token_manager import Token, TokenError, TokenManager, TokenSpec, requires_refresh
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.kubeapi.helpers import client_for

HOUR = 3600


@pytest.mark.parametrize(("age", "seconds", "jitter", "refresh"), [
    (0, HOUR, 0, False),
    (0.8 * HOUR - 1, HOUR, 0, False),
    (0.8 * HOUR + 1, HOUR, 0, True),  # past 80 % of its lifetime
    (0.8 * HOUR - 5, HOUR, 10, True),  # the jitter brings it forward
    (24 * HOUR - 1, 48 * HOUR, 0, False),
    (24 * HOUR + 1, 48 * HOUR, 0, True),  # older than 24 h, whatever its lifetime
])
def test_requires_refresh(age: float, seconds: int, jitter: float, refresh: bool) -> None:
    issued = 1_000_000.0
    assert requires_refresh(Token("t", issued + seconds, seconds), issued + age, jitter) is refresh


async def _pod(api: ApiServer, name: str = "p") -> dict[str, Any]:
    pod: dict[str, Any] = await api.admin().create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "n1", "automountServiceAccountToken": False,
                 "containers": [{"name": "c", "image": "busybox"}],
                 # NodeRestriction lets a node ask only for the audiences the pod's volumes name
                 "volumes": [{"name": "v", "projected": {"sources": [
                     {"serviceAccountToken": {"audience": "vault", "path": "t"}}]}}]}})
    return pod


def spec_for(pod: dict[str, Any], audience: str = "", seconds: int = 3607) -> TokenSpec:
    return TokenSpec("default", "default", audience, seconds, pod["metadata"]["name"], pod["metadata"]["uid"])


async def test_a_bound_token_is_requested_once_then_refreshed_at_80_percent(api_server: ApiServer,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    pod = await _pod(api_server)
    clock = FakeClock(start=__import__("time").time())
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    tokens = TokenManager(client, clock, jitter=lambda: 0.0)
    try:
        first = await tokens.get(spec_for(pod))
        claims = api_server.tokens.claims(first)
        assert claims is not None and claims["sub"] == "system:serviceaccount:default:default"
        assert claims["kubernetes.io"]["pod"]["uid"] == pod["metadata"]["uid"]
        posts = [(m, p) for _, m, p in api_server.handler.requests if p.endswith("/serviceaccounts/default/token")]
        assert posts == [("POST", "/api/v1/namespaces/default/serviceaccounts/default/token")]
        assert await tokens.get(spec_for(pod)) == first and tokens.requests == 1
        clock.advance(0.8 * 3607 - 60)
        assert await tokens.get(spec_for(pod)) == first and tokens.requests == 1
        clock.advance(120)
        second = await tokens.get(spec_for(pod))
        assert tokens.requests == 2 and second != first
        # another audience is another token
        other = await tokens.get(spec_for(pod, "vault"))
        other_claims = api_server.tokens.claims(other)
        assert other_claims is not None and other_claims["aud"] == ["vault"] and tokens.requests == 3
        tokens.delete_pod_tokens(pod["metadata"]["uid"])
        await tokens.get(spec_for(pod))
        assert tokens.requests == 4
    finally:
        await client.close()


async def test_a_failed_refresh_keeps_a_valid_token_and_fails_once_it_expired(api_server: ApiServer,  # noqa: F811
                                                                            tmp_path: Path) -> None:
    pod = await _pod(api_server)
    clock = FakeClock(start=__import__("time").time())
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    tokens = TokenManager(client, clock, jitter=lambda: 0.0)
    try:
        token = await tokens.get(spec_for(pod))
        await api_server.admin().delete("pods", "p", "default", grace=0)  # the node may no longer ask
        clock.advance(0.9 * 3607)
        assert await tokens.get(spec_for(pod)) == token
        clock.advance(0.2 * 3607)
        with pytest.raises(TokenError, match="expired and refresh failed"):
            await tokens.get(spec_for(pod))
        with pytest.raises(TokenError, match=r"^failed to fetch token: "):
            await tokens.get(spec_for(pod, "vault"))
    finally:
        await client.close()

"""Service account tokens for projected volumes (upstream pkg/kubelet/token/token_manager.go): TokenRequests
through `serviceaccounts/<name>/token`, bound to the pod, cached, and requested again once a token is older
than 80 % of its lifetime or than 24 hours (minus up to 10 s of jitter), as upstream."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError

log = logging.getLogger("minikubelet.kubeapi.token_manager")

MAX_TTL = 24 * 3600.0
MAX_JITTER = 10.0


class TokenError(Exception):
    pass


@dataclass(frozen=True)
class TokenSpec:
    namespace: str
    service_account: str
    audience: str  # "" asks for the API server's audiences (`audiences: null`, as upstream)
    expiration_seconds: int
    pod_name: str
    pod_uid: str

    @property
    def key(self) -> str:
        """Non-confidential, safe to log (upstream keyFunc)."""
        return (f'"{self.service_account}"/"{self.namespace}"/[{self.audience}]/{self.expiration_seconds}/'
                f"Pod/{self.pod_name}/{self.pod_uid}")

    def body(self) -> dict[str, object]:
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", "metadata": {},
                "spec": {"audiences": [self.audience] if self.audience else None,
                         "expirationSeconds": self.expiration_seconds,
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": self.pod_name,
                                            "uid": self.pod_uid}}}


@dataclass(frozen=True)
class Token:
    token: str
    expires: float  # unix time
    expiration_seconds: int


def requires_refresh(token: Token, now: float, jitter: float) -> bool:
    """Upstream requiresRefresh: older than 24 h, or within 20 % of its lifetime of expiring (minus jitter)."""
    issued = token.expires - token.expiration_seconds
    if now > issued + MAX_TTL - jitter:
        return True
    return now > token.expires - (token.expiration_seconds * 20 // 100) - jitter


def _parse_time(value: object) -> float:
    if not isinstance(value, str):
        raise TokenError("TokenRequest answer without status.expirationTimestamp")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise TokenError(f"TokenRequest answer with a bad expirationTimestamp {value!r}") from None


class TokenManager:
    def __init__(self, client: RestClient, clock: Clock,
                 jitter: Callable[[], float] = lambda: random.random() * MAX_JITTER) -> None:
        self.client = client
        self.clock = clock
        self.jitter = jitter
        self._cache: dict[str, tuple[TokenSpec, Token]] = {}
        self.requests = 0  # TokenRequests sent (for tests and metrics)

    async def get(self, spec: TokenSpec) -> str:
        """Upstream GetServiceAccountToken: the cached token unless it needs a refresh; a failed refresh of a
        token that has not expired yet keeps it."""
        cached = self._cache.get(spec.key)
        now = self.clock.now()
        if cached is not None and not requires_refresh(cached[1], now, self.jitter()):
            return cached[1].token
        try:
            fresh = await self._request(spec)
        except (ApiError, TransportError, TokenError) as e:
            if cached is None:
                raise TokenError(f"failed to fetch token: {_message(e)}") from e
            if now > cached[1].expires:
                raise TokenError(f"token {spec.key} expired and refresh failed: {_message(e)}") from e
            log.warning("couldn't update token", extra={"kv": {"cacheKey": spec.key, "err": _message(e)}})
            return cached[1].token
        self._cache[spec.key] = (spec, fresh)
        return fresh.token

    async def _request(self, spec: TokenSpec) -> Token:
        self.requests += 1
        path = f"/api/v1/namespaces/{spec.namespace}/serviceaccounts/{spec.service_account}/token"
        answer = await self.client.create(path, spec.body())
        status = answer.get("status") if isinstance(answer.get("status"), dict) else {}
        token = status.get("token") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token:
            raise TokenError("TokenRequest answer without status.token")
        expires = _parse_time(status.get("expirationTimestamp") if isinstance(status, dict) else None)
        answered = answer.get("spec")
        seconds = answered.get("expirationSeconds") if isinstance(answered, dict) else None
        return Token(token, expires, seconds if isinstance(seconds, int) and seconds > 0
                     else spec.expiration_seconds)

    def delete_pod_tokens(self, pod_uid: str) -> None:
        """Upstream DeleteServiceAccountToken: the pod is gone."""
        self._cache = {k: v for k, v in self._cache.items() if v[0].pod_uid != pod_uid}

    def cleanup(self) -> None:
        """Drop expired tokens (upstream runs it every minute)."""
        now = self.clock.now()
        self._cache = {k: v for k, v in self._cache.items() if v[1].expires >= now}


def _message(e: Exception) -> str:
    return (e.message or str(e)) if isinstance(e, ApiError) else str(e)

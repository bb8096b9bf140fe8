"""Who may call the kubelet API (upstream `pkg/kubelet/server/auth.go` and the filter in `server.go`).

Authentication: an x509 client certificate the TLS layer verified against `authentication.x509.clientCAFile`
(user = CN, groups = O), else a bearer token checked by a TokenReview when `authentication.webhook.enabled`,
else anonymous (`system:anonymous`) when `authentication.anonymous.enabled`, else 401 `Unauthorized`.

Authorization: one attribute set per request, `nodes/<subresource>` named after this node, verb from the HTTP
method. With KubeletFineGrainedAuthz (on in 1.36) /pods, /healthz, /configz and /runningpods/ are asked first
as their own subresource and then as `proxy`; any allowed attribute admits the request. Denied: 403 with
`Forbidden (user=…, verb=…, resource=nodes, subresource(s)=[…])`.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from minikubelet.node import x509der
from minikubelet.server.auth_metrics import AuthMetrics

Json = dict[str, Any]
ReviewPoster = Callable[[str, Json], Awaitable[Json]]  # (API path, object) -> the created object

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ANONYMOUS = "system:anonymous"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
MAX_TOKEN = 16 * 1024

_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Attributes:
    user: User
    verb: str
    subresource: str
    node: str

    def review(self) -> Json:
        """The SubjectAccessReview the kubelet creates for these attributes (recorded in kubelet-flows)."""
        spec: Json = {
            "resourceAttributes": {"verb": self.verb, "version": "v1", "resource": "nodes",
                                   "subresource": self.subresource, "name": self.node},
            "user": self.user.name,
            "groups": list(self.user.groups),
        }
        if self.user.extra:
            spec["extra"] = {k: list(v) for k, v in self.user.extra}
        return {"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1", "metadata": {}, "spec": spec}


def _is_subpath(path: str, base: str) -> bool:
    base = base.rstrip("/")
    return path == base or (path.startswith(base) and path[len(base):len(base) + 1] == "/")


_FINE_GRAINED = (("/pods", "pods"), ("/runningpods/", "pods"), ("/healthz", "healthz"), ("/configz", "configz"))
_COARSE = (("/stats/", "stats"), ("/metrics", "metrics"), ("/logs/", "log"), ("/checkpoint/", "checkpoint"),
           ("/statusz", "statusz"), ("/flagz", "configz"))


def _first_subresource(path: str, table: tuple[tuple[str, str], ...]) -> str | None:
    return next((sub for prefix, sub in table if _is_subpath(path, prefix)), None)


def request_attributes(user: User, method: str, path: str, node: str) -> list[Attributes]:
    verb = _VERBS.get(method.upper(), "")
    # upstream GetRequestAttributes: a fine-grained subresource (1.32+) when one applies, then the coarse one
    fine = _first_subresource(path, _FINE_GRAINED)
    coarse = _first_subresource(path, _COARSE) or "proxy"
    subresources = [fine, coarse] if fine else [coarse]
    return [Attributes(user, verb, sub, node) for sub in subresources]


def forbidden_message(attrs: list[Attributes]) -> str:
    first = attrs[0]
    subs = " ".join(a.subresource for a in attrs)
    return f"Forbidden (user={first.user.name}, verb={first.verb}, resource=nodes, subresource(s)=[{subs}])\n"


def x509_user(der: bytes) -> User | None:
    """The user of a verified client certificate: CN, the Os as groups, and its SHA-256 as credential id."""
    try:
        attributes = x509der.subject(der)
    except ValueError:
        return None
    cns = [v for oid, v in attributes if oid == x509der.COMMON_NAME]
    name = cns[0] if cns else ""
    if not name:
        return None
    groups = tuple(v for oid, v in attributes if oid == x509der.ORGANIZATION_NAME)
    fingerprint = hashlib.sha256(der).hexdigest()
    return User(name, (*groups, AUTHENTICATED), ((CREDENTIAL_ID, (f"X509SHA256={fingerprint}",)),))


class _TTLCache:
    """Bounded: reviews are cached as upstream does (the webhook would otherwise see every request)."""

    def __init__(self, size: int = 1024) -> None:
        self._items: OrderedDict[object, tuple[float, Any]] = OrderedDict()
        self._size = size

    def get(self, key: object) -> Any:
        hit = self._items.get(key)
        if hit is None or hit[0] < time.monotonic():
            self._items.pop(key, None)
            return None
        return hit[1]

    def put(self, key: object, value: Any, ttl: float) -> None:
        self._items[key] = (time.monotonic() + ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass
class Authenticator:
    anonymous: bool = False
    token_review: ReviewPoster | None = None  # authentication.webhook.enabled
    cache_ttl: float = 120.0  # authentication.webhook.cacheTTL default
    metrics: AuthMetrics | None = None
    _cache: _TTLCache = field(default_factory=_TTLCache)

    async def authenticate(self, peer_cert_der: bytes | None, authorization: str) -> User | None:
        if peer_cert_der:
            user = x509_user(peer_cert_der)
            if user is not None:
                if self.metrics is not None:
                    not_after = x509der.validity(peer_cert_der)[1]
                    self.metrics.client_cert_expiration.observe(not_after - time.time())
                return user
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token and self.token_review is not None:
            return await self._review_token(token[:MAX_TOKEN + 1])
        if self.anonymous:
            return User(ANONYMOUS, (UNAUTHENTICATED,))
        return None

    async def _review_token(self, token: str) -> User | None:
        if len(token) > MAX_TOKEN or self.token_review is None:
            return None
        key = hashlib.sha256(token.encode()).digest()
        t0 = time.monotonic()
        cached = self._cache.get(key)
        if self.metrics is not None:
            hit = "hit" if cached is not None else "miss"
            self.metrics.cache_requests.labels(hit).inc()
            self.metrics.cache_duration.labels(hit).observe(time.monotonic() - t0)
        if cached is not None:
            return cached if isinstance(cached, User) else None
        body = {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {},
                "spec": {"token": token}}
        status = (await self._fetch(body)).get("status") or {}
        user: User | bool = False
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = tuple((str(k), tuple(str(x) for x in v)) for k, v in (info.get("extra") or {}).items())
            user = User(str(info.get("username", "")), tuple(str(g) for g in info.get("groups") or ()), extra)
        self._cache.put(key, user, self.cache_ttl)
        return user if isinstance(user, User) else None

    async def _fetch(self, body: Json) -> Json:
        assert self.token_review is not None
        if self.metrics is None:
            return await self.token_review(TOKEN_REVIEWS, body)
        in_flight = self.metrics.cache_active_fetches.labels("in_flight")
        in_flight.inc()
        ok = False
        try:
            answer = await self.token_review(TOKEN_REVIEWS, body)
            ok = True
            return answer
        finally:
            in_flight.dec()
            self.metrics.cache_fetches.labels("ok" if ok else "error").inc()


class AlwaysAllow:
    async def allowed(self, attrs: Attributes) -> bool:
        return True


@dataclass
class WebhookAuthorizer:
    """authorization.mode Webhook: a SubjectAccessReview per attribute set, cached (5 min allowed, 30 s
    denied: the cacheAuthorizedTTL / cacheUnauthorizedTTL defaults)."""

    post: ReviewPoster
    authorized_ttl: float = 300.0
    unauthorized_ttl: float = 30.0
    _cache: _TTLCache = field(default_factory=_TTLCache)

    async def allowed(self, attrs: Attributes) -> bool:
        cached = self._cache.get(attrs)
        if cached is not None:
            return bool(cached)
        status = (await self.post(SUBJECT_ACCESS_REVIEWS, attrs.review())).get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        self._cache.put(attrs, allowed, self.authorized_ttl if allowed else self.unauthorized_ttl)
        return allowed


Authorizer = AlwaysAllow | WebhookAuthorizer


async def authorize(authorizer: Authorizer, attrs: list[Attributes]) -> bool:
    for a in attrs:
        if await authorizer.allowed(a):
            return True
    return False

"""HTTP: request info from the path, authentication, authorization, fault injection, dispatch."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.apiserver import discovery, errors, reviews, selectors
from tests.apiserver.auth import ANONYMOUS, User, from_certificate
from tests.apiserver.authz import Attributes
from tests.apiserver.resources import BY_PATH, Resource
from tests.apiserver.watch import WatchParams, dumps

if TYPE_CHECKING:
    from tests.apiserver.harness import ApiServer

Json = dict[str, Any]
VERSION: Json = {
    "major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "36", "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "35", "gitVersion": "v1.36.2", "gitCommit": "98b35193b2ac7a23a673325f5e9b830ecd5ba406",
    "gitTreeState": "clean", "buildDate": "2026-11-22T06:22:11Z", "goVersion": "go1.27.3-X:nojsonv2",
    "compiler": "gc", "platform": "linux/amd64",
}
_TRUE = ("1", "true")
_NODE_PROXY = re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)/proxy(?P<rest>/.*)?$")
_POD_KUBELET = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/(?P<sub>log|exec|attach|portforward)$")


@dataclass
class FaultRule:
    """Answer `status` to requests whose method and path match, `times` times (None: always)."""

    status: int
    method: str = ""
    path: str = ""  # a regular expression searched in the path + query
    retry_after: int = 1
    times: int | None = None
    hits: int = 0

    def matches(self, request: web.Request) -> bool:
        if self.method and request.method != self.method:
            return False
        if self.path and not re.search(self.path, request.path_qs):
            return False
        return self.times is None or self.hits < self.times


@dataclass
class Faults:
    delay: float = 0.0
    rules: list[FaultRule] = field(default_factory=list)

    def fail(self, status: int, method: str = "", path: str = "", *, times: int | None = None,
             retry_after: int = 1) -> FaultRule:
        rule = FaultRule(status, method, path, retry_after, times)
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        self.delay = 0.0
        self.rules.clear()

    def pick(self, request: web.Request) -> errors.ApiError | None:
        for rule in self.rules:
            if rule.matches(request):
                rule.hits += 1
                if rule.status == 429:
                    return errors.too_many_requests(rule.retry_after)
                if rule.status == 500:
                    return errors.internal("injected by the test harness")
                reason = {503: "ServiceUnavailable", 504: "Timeout"}.get(rule.status, "InternalError")
                return errors.ApiError(errors.status(rule.status, reason, "injected by the test harness"))
        return None


@dataclass
class RequestInfo:
    verb: str
    res: Resource | None = None
    namespace: str = ""
    name: str = ""
    sub: str = ""


def parse_path(method: str, path: str, query: dict[str, str]) -> RequestInfo | None:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    ns = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and (group, version, rest[2]) in BY_PATH:
        ns, rest = rest[1], rest[2:]
    if not rest or (group, version, rest[0]) not in BY_PATH:
        return None
    res = BY_PATH[(group, version, rest[0])]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3 or (sub and sub not in res.subresources):
        return None
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "get")
    if method == "GET" and not name:
        verb = "watch" if query.get("watch", "") in _TRUE else "list"
    if method == "DELETE" and not name:
        verb = "deletecollection"
    if method == "POST" and name and not sub:
        return None
    return RequestInfo(verb, res, ns, name, sub)


def json_response(body: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=dumps(body) + b"\n", status=status, content_type="application/json",
                        headers={"Cache-Control": "no-cache, private", "Audit-Id": str(uuid.uuid4()),
                                 **(headers or {})})


class Handler:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.requests: list[tuple[str, str, str]] = []  # (user, method, path_qs): what tests can assert on
        self.request_times: list[float] = []  # time.monotonic() of each entry of `requests`

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            if self.api.faults.delay:
                await asyncio.sleep(self.api.faults.delay)
            user = self.authenticate(request)
            self.requests.append((user.name, request.method, request.path_qs))
            self.request_times.append(time.monotonic())
            if (fault := self.api.faults.pick(request)) is not None:
                raise fault
            return await self.dispatch(request, user)
        except errors.ApiError as exc:
            return json_response(exc.body, exc.code, exc.headers)

    def authenticate(self, request: web.Request) -> User:
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            user = self.api.tokens.authenticate(header[len("Bearer "):].strip())
            if user is None:
                raise errors.unauthorized()
            return user
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        cert = ssl_object.getpeercert() if ssl_object is not None else None
        return from_certificate(cert) or ANONYMOUS

    def authorize(self, a: Attributes) -> None:
        allowed, reason = self.api.authorizer.authorize(a)
        if not allowed:
            message = a.forbidden_message() + (f": {reason}" if reason else "")
            res = BY_PATH.get((a.group, "v1", a.resource)) if a.resource else None
            raise errors.forbidden(res, a.name, message)

    async def dispatch(self, request: web.Request, user: User) -> web.StreamResponse:
        if (m := _NODE_PROXY.match(request.path)) is not None:
            return await self.api.kubelet_proxy.node_proxy(request, user, m["name"], m["rest"] or "", self.authorize)
        if (m := _POD_KUBELET.match(request.path)) is not None:
            if m["sub"] == "log":
                if request.method != "GET":
                    raise errors.method_not_allowed()
                return await self.api.kubelet_proxy.pod_log(request, user, m["ns"], m["name"], self.authorize)
            return await self.api.kubelet_proxy.pod_stream(request, user, m["ns"], m["name"], m["sub"],
                                                           self.authorize)
        query = dict(request.query)
        info = parse_path(request.method, request.path, query)
        if info is None or info.res is None:
            return await self.non_resource(request, user)
        res = info.res
        fields = selectors.field_selector(res.plural, query.get("fieldSelector", "")) if info.verb in (
            "list", "watch") else ((lambda _o: True), {})
        name = info.name or (fields[1].get("metadata.name", "") if info.verb in ("list", "watch") else "")
        self.authorize(Attributes(user, info.verb, request.path, res.plural, info.sub, res.group, info.namespace,
                                  name, fields[1]))
        return await self.resource(request, user, info, res, query, fields[0])

    async def non_resource(self, request: web.Request, user: User) -> web.StreamResponse:
        path = request.path
        self.authorize(Attributes(user, request.method.lower(), path))
        if path == "/version":
            return web.Response(text=json.dumps(VERSION, indent=2), content_type="application/json",
                                headers={"Cache-Control": "no-cache, private"})
        if request.method == "GET" and (doc := discovery.document(path, request.host)) is not None:
            return json_response(doc)
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok", content_type="text/plain",
                                headers={"Cache-Control": "no-cache, private", "X-Content-Type-Options": "nosniff"})
        raise errors.ApiError(errors.status(404, "NotFound", "the server could not find the requested resource", {}))

    async def resource(self, request: web.Request, user: User, info: RequestInfo, res: Resource,
                       query: dict[str, str], field_match: Any) -> web.StreamResponse:
        reg = self.api.registry
        ns, name, path = info.namespace, info.name, request.path
        label_match = selectors.label_selector(query.get("labelSelector", ""))

        def matches(obj: Json) -> bool:
            return bool(field_match(obj)) and label_match(obj)

        if info.verb == "get":
            return json_response(reg.get(res, ns, name))
        if info.verb == "list":
            return json_response(reg.list_objects(res, ns, matches, query.get("resourceVersion", ""),
                                          query.get("resourceVersionMatch", "")))
        if info.verb == "watch":
            timeout = float(query.get("timeoutSeconds", self.api.max_watch_seconds))
            params = WatchParams(query.get("resourceVersion", ""), query.get("sendInitialEvents", "") in _TRUE,
                                 query.get("allowWatchBookmarks", "") in _TRUE, min(timeout, self.api.max_watch_seconds))
            return await self.api.watches.serve(request, self.api.store, res, ns, matches, params,
                                                {"Audit-Id": str(uuid.uuid4())})
        body = await self.read_body(request)
        if info.verb == "create":
            if info.sub:
                return json_response(*reviews.subresource_create(self.api, user, res, ns, name, info.sub, body))
            if not res.stored:
                return json_response(reviews.review(self.api, user, res, body), 201)
            result = reg.create(user, res, ns, body, path)
            return json_response(result.obj, 201, _warning_headers(result.warnings))
        if info.verb == "update":
            result = reg.update(user, res, ns, name, body, info.sub, path)
            return json_response(result.obj, 200, _warning_headers(result.warnings))
        if info.verb == "patch":
            ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
            result = reg.patch(user, res, ns, name, body, ctype, info.sub, path)
            return json_response(result.obj, 200, _warning_headers(result.warnings))
        if info.verb == "delete":
            options = body if isinstance(body, dict) else {}
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            return json_response(reg.delete(user, res, ns, name, options))
        raise errors.method_not_allowed()

    async def read_body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from exc


def _warning_headers(warnings: list[str]) -> dict[str, str]:
    if not warnings:
        return {}
    return {"Warning": ",".join(f'299 - "{w.replace(chr(34), chr(92) + chr(34))}"' for w in warnings)}

"""Status bodies as k8s.io/apimachinery/pkg/api/errors builds them (checked against status-*.json)."""

from __future__ import annotations

from typing import Any

from tests.apiserver.resources import Resource

Json = dict[str, Any]


class ApiError(Exception):
    def __init__(self, body: Json, headers: dict[str, str] | None = None) -> None:
        super().__init__(body.get("message", ""))
        self.body = body
        self.headers = headers or {}

    @property
    def code(self) -> int:
        return int(self.body["code"])


def status(code: int, reason: str, message: str, details: Json | None = None) -> Json:
    body: Json = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def success(code: int) -> Json:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def _details(res: Resource, name: str, kind: str | None = None) -> Json:
    details: Json = {"name": name} if name else {}
    if res.group:
        details["group"] = res.group
    details["kind"] = kind or res.plural
    return details


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(status(404, "NotFound", f'{res.qualified} "{name}" not found', _details(res, name)))


def already_exists(res: Resource, name: str) -> ApiError:
    return ApiError(status(409, "AlreadyExists", f'{res.qualified} "{name}" already exists', _details(res, name)))


def conflict(res: Resource, name: str) -> ApiError:
    msg = (
        f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    return ApiError(status(409, "Conflict", msg, _details(res, name)))


def uid_precondition(res: Resource, name: str, wanted: str, actual: str) -> ApiError:
    # The registry names the Kind here, not the resource (status-409-delete-precondition-uid.json).
    msg = (
        f'Operation cannot be fulfilled on {res.kind} "{name}": the UID in the precondition ({wanted}) '
        f"does not match the UID in record ({actual}). The object might have been deleted and then recreated"
    )
    return ApiError(status(409, "Conflict", msg, {"name": name, "kind": res.kind}))


def rv_precondition(res: Resource, name: str, wanted: str, actual: str) -> ApiError:
    msg = (
        f'Operation cannot be fulfilled on {res.kind} "{name}": the ResourceVersion in the precondition '
        f"({wanted}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
    )
    return ApiError(status(409, "Conflict", msg, {"name": name, "kind": res.kind}))


def forbidden(res: Resource | None, name: str, reason: str) -> ApiError:
    """NewForbidden: `<resource> "<name>" is forbidden: <reason>`."""
    if res is None:
        return ApiError(status(403, "Forbidden", f"forbidden: {reason}", {}))
    prefix = f'{res.qualified} "{name}"' if name else res.qualified
    return ApiError(status(403, "Forbidden", f"{prefix} is forbidden: {reason}", _details(res, name)))


def invalid(res: Resource, name: str, causes: list[Json]) -> ApiError:
    """causes: [{reason, message, field}]; the message lists `field: message` as ErrorList does."""
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = _details(res, name, kind=res.kind)
    details["causes"] = causes
    kind = f"{res.kind}.{res.group}" if res.group else res.kind
    return ApiError(status(422, "Invalid", f'{kind} "{name}" is invalid: {joined}', details))


def bad_request(message: str) -> ApiError:
    return ApiError(status(400, "BadRequest", message))


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(status(405, "MethodNotAllowed", message, {}))


def unauthorized() -> ApiError:
    return ApiError(status(401, "Unauthorized", "Unauthorized"))


def expired(message: str) -> ApiError:
    return ApiError(status(410, "Expired", message))


def too_many_requests(retry_after: int) -> ApiError:
    body = status(429, "TooManyRequests", "Too many requests, please try again later.", {"retryAfterSeconds": retry_after})
    return ApiError(body, {"Retry-After": str(retry_after)})


def internal(message: str) -> ApiError:
    body = status(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})
    return ApiError(body)

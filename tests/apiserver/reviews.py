"""One-shot requests: TokenRequest (serviceaccounts/token), pods/eviction, TokenReview,
SubjectAccessReview, SelfSubjectReview (node-create-sa-token-*.json, kubelet-flows/kubelet-api-subjectaccessreviews.json)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from tests.apiserver import admission, errors
from tests.apiserver.auth import API_AUDIENCE, User
from tests.apiserver.authz import Attributes
from tests.apiserver.resources import Resource, resource

if TYPE_CHECKING:
    from tests.apiserver.harness import ApiServer

Json = dict[str, Any]


def subresource_create(api: ApiServer, user: User, res: Resource, ns: str, name: str, sub: str,
                       body: Json) -> tuple[Json, int]:
    if res.plural == "pods" and sub == "eviction":
        return api.registry.evict(user, ns, name, body), 201
    if res.plural == "serviceaccounts" and sub == "token":
        return token_request(api, user, ns, name, body), 201
    if res.plural == "pods" and sub == "binding":
        return api.registry.bind(ns, name, body), 201
    raise errors.method_not_allowed()


def _rfc3339(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_request(api: ApiServer, user: User, ns: str, name: str, body: Json) -> Json:
    sa_res = resource("serviceaccounts")
    sa = api.registry.get(sa_res, ns, name)
    spec = dict((body or {}).get("spec") or {})
    ref = spec.get("boundObjectRef")
    node_name = user.node_name()
    pod = None
    if ref is not None:
        if ref.get("kind") == "Pod":
            pod = api.store.get("pods", ns, ref.get("name", ""))
    if node_name is not None:
        if (reason := admission.token_request(node_name, body, pod, ref or {})) is not None:
            raise errors.forbidden(sa_res, name, reason)
    if ref is not None and ref.get("kind") == "Pod":
        if pod is None:
            raise errors.not_found(resource("pods"), ref.get("name", ""))
        if ref.get("uid") and ref["uid"] != pod["metadata"]["uid"]:
            msg = (f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
                   "The object might have been deleted and then recreated")
            raise errors.ApiError(errors.status(409, "Conflict", msg, {"name": name, "kind": "serviceaccounts"}))
    seconds = int(spec.get("expirationSeconds") or 3600)
    if seconds < 600:
        cause = {"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                 "message": f"Invalid value: {seconds}: may not specify a duration less than 10 minutes"}
        raise errors.invalid(resource("serviceaccounts"), name, [cause])
    audiences = spec.get("audiences") or [API_AUDIENCE]
    node = None
    if pod is not None and (pod.get("spec") or {}).get("nodeName"):
        node = api.store.get("nodes", "", pod["spec"]["nodeName"])
    token, exp = api.tokens.issue(ns, sa, audiences, seconds, pod, node)
    out_ref: Json | None = None
    if ref is not None:
        out_ref = {"kind": ref.get("kind"), "apiVersion": ref.get("apiVersion"), "name": ref.get("name")}
        if pod is not None:
            out_ref["uid"] = pod["metadata"]["uid"]
    out_spec: Json = {"audiences": audiences, "expirationSeconds": seconds}
    if out_ref is not None:
        out_spec["boundObjectRef"] = out_ref
    return {
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "uid": sa["metadata"]["uid"],
                     "creationTimestamp": sa["metadata"]["creationTimestamp"]},
        "spec": out_spec,
        "status": {"token": token, "expirationTimestamp": _rfc3339(exp)},
    }


def review(api: ApiServer, user: User, res: Resource, body: Json) -> Json:
    if res.plural == "selfsubjectreviews":
        return self_subject_review(user)
    spec = (body or {}).get("spec") or {}
    out: Json = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {}, "spec": spec}
    if res.plural == "tokenreviews":
        out["status"] = _token_review(api, spec)
    elif res.plural == "subjectaccessreviews":
        out["status"] = _subject_access_review(api, spec)
    return out


def self_subject_review(user: User) -> Json:
    """Who the caller is, as the authenticator saw it (pkg/registry/authentication/selfsubjectreview)."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": now}, "status": {"userInfo": user.as_json()}}


def _token_review(api: ApiServer, spec: Json) -> Json:
    token = spec.get("token", "")
    wanted = spec.get("audiences") or [API_AUDIENCE]
    claims = api.tokens.claims(token)
    if claims is None or not set(wanted) & set(claims.get("aud", [])):
        bootstrap = api.tokens.bootstrap_user(token)
        if bootstrap is not None:
            return {"authenticated": True, "user": bootstrap.as_json(), "audiences": wanted}
        return {"user": {}, "error": "[invalid bearer token, service account token has been invalidated]"}
    user = api.tokens.user_of(claims)
    return {"authenticated": True, "user": user.as_json(), "audiences": [a for a in wanted if a in claims["aud"]]}


def _subject_access_review(api: ApiServer, spec: Json) -> Json:
    user = User(spec.get("user", ""), tuple(spec.get("groups") or ()), spec.get("uid", ""))
    if (attrs := spec.get("resourceAttributes")) is not None:
        a = Attributes(user, attrs.get("verb", ""), "", attrs.get("resource", ""), attrs.get("subresource", ""),
                       attrs.get("group", ""), attrs.get("namespace", ""), attrs.get("name", ""))
    else:
        non = spec.get("nonResourceAttributes") or {}
        a = Attributes(user, non.get("verb", ""), non.get("path", ""))
    allowed, reason = api.authorizer.authorize(a)
    out: Json = {"allowed": allowed}
    if not allowed and reason:
        out["reason"] = reason
    return out

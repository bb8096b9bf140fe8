"""The kubelet's SubjectAccessReview mapping and 403 text, against the recorded exchanges."""

from __future__ import annotations

from pathlib import Path

from minikubelet.server.auth import (
    Attributes,
    Authenticator,
    User,
    WebhookAuthorizer,
    authorize,
    forbidden_message,
    request_attributes,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "kubernetes"
NOPERM = User("fixture-noperm", ("system:authenticated",))


def subs(method: str, path: str) -> tuple[str, list[str]]:
    attrs = request_attributes(NOPERM, method, path, "node")
    return attrs[0].verb, [a.subresource for a in attrs]


def test_mapping_follows_the_path_and_method() -> None:
    assert subs("GET", "/pods") == ("get", ["pods", "proxy"])
    assert subs("GET", "/healthz") == ("get", ["healthz", "proxy"])
    assert subs("GET", "/configz") == ("get", ["configz", "proxy"])
    assert subs("GET", "/runningpods/") == ("get", ["pods", "proxy"])
    assert subs("GET", "/stats/summary") == ("get", ["stats"])
    assert subs("GET", "/metrics/cadvisor") == ("get", ["metrics"])
    assert subs("GET", "/logs/") == ("get", ["log"])
    assert subs("POST", "/exec/ns/pod/c") == ("create", ["proxy"])
    assert subs("GET", "/exec/ns/pod/c") == ("get", ["proxy"])
    assert subs("GET", "/containerLogs/ns/pod/c") == ("get", ["proxy"])
    assert subs("GET", "/podsx") == ("get", ["proxy"])


def test_forbidden_text_is_the_recorded_one() -> None:
    raw = (FIXTURES / "kubelet-api" / "direct-forbidden" / "s2c.bin").read_bytes()
    body = raw.split(b"\r\n\r\n", 1)[1]
    assert forbidden_message(request_attributes(NOPERM, "GET", "/pods", "node")).encode() == body


async def test_webhook_sends_the_recorded_review_and_caches() -> None:
    sent: list[dict[str, object]] = []

    async def post(path: str, body: dict[str, object]) -> dict[str, object]:
        sent.append(body)
        spec = body["spec"]
        assert isinstance(spec, dict)
        return {"status": {"allowed": spec["resourceAttributes"]["subresource"] == "proxy"}}

    authz = WebhookAuthorizer(post)
    attrs = request_attributes(NOPERM, "GET", "/pods", "k8slab-kubelet")
    assert await authorize(authz, attrs)
    assert [s["spec"]["resourceAttributes"]["subresource"] for s in sent] == ["pods", "proxy"]  # type: ignore[index]
    assert sent[0]["spec"] == {"resourceAttributes": {"verb": "get", "version": "v1", "resource": "nodes",
                                                      "subresource": "pods", "name": "k8slab-kubelet"},
                               "user": "fixture-noperm", "groups": ["system:authenticated"]}
    assert await authorize(authz, attrs)
    assert len(sent) == 2  # cached


async def test_authentication_modes() -> None:
    async def review(path: str, body: dict[str, object]) -> dict[str, object]:
        spec = body["spec"]
        assert isinstance(spec, dict)
        ok = spec["token"] == "good"
        return {"status": {"authenticated": ok, "user": {"username": "alice", "groups": ["g"]}}}

    authn = Authenticator(token_review=review)
    assert await authn.authenticate(None, "") is None
    assert await authn.authenticate(None, "Bearer bad") is None
    assert await authn.authenticate(None, "Bearer good") == User("alice", ("g",))
    assert (await Authenticator(anonymous=True).authenticate(None, "")) == User("system:anonymous",
                                                                                 ("system:unauthenticated",))
    assert Attributes(NOPERM, "get", "proxy", "n").review()["kind"] == "SubjectAccessReview"

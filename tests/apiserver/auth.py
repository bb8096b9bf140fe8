"""Authentication: client certificates, bootstrap tokens, service account JWTs; and token issuing.

Bootstrap tokens live where kubeadm puts them: Secrets `kube-system/bootstrap-token-<id>` of type
`bootstrap.kubernetes.io/token`. Service account tokens are RS256 JWTs with the claims
kube-apiserver writes (node-create-sa-token-*.json).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.apiserver.store import Store

Json = dict[str, Any]
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
ISSUER = API_AUDIENCE
WARN_ONLY_EXPIRATION = 3607  # the kube-api-access volume's expirationSeconds: extended to a year
EXTENDED_EXPIRATION = 365 * 24 * 3600
_BOOTSTRAP = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)

    def node_name(self) -> str | None:
        """The node this user is, as the Node authorizer recognises one."""
        if "system:nodes" in self.groups and self.name.startswith("system:node:"):
            return self.name[len("system:node:"):]
        return None

    def as_json(self) -> Json:
        out: Json = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = self.extra
        return out


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def from_certificate(peercert: dict[str, Any] | None) -> User | None:
    if not peercert:
        return None
    cn, orgs = "", []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    return User(cn, (*orgs, "system:authenticated")) if cn else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenAuthority:
    """Signs and verifies service account tokens; reads bootstrap tokens from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        der = self._key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.kid = _b64(hashlib.sha256(der).digest())

    # issuing ------------------------------------------------------------------------------------
    def issue(self, namespace: str, sa: Json, audiences: list[str], seconds: int, pod: Json | None,
              node: Json | None) -> tuple[str, int]:
        """(JWT, expiry as epoch seconds reported in status.expirationTimestamp)."""
        now = int(time.time())
        exp = now + seconds
        claims: Json = {"aud": audiences}
        private: Json = {"namespace": namespace}
        if node is not None:
            private["node"] = {"name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}
        if pod is not None:
            private["pod"] = {"name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        private["serviceaccount"] = {"name": sa["metadata"]["name"], "uid": sa["metadata"]["uid"]}
        jwt_exp = exp
        if seconds == WARN_ONLY_EXPIRATION and API_AUDIENCE in audiences:
            jwt_exp = now + EXTENDED_EXPIRATION
            private["warnafter"] = exp
        claims.update({"exp": jwt_exp, "iat": now, "iss": ISSUER, "jti": str(uuid.uuid4())})
        claims["kubernetes.io"] = private
        claims.update({"nbf": now, "sub": f"system:serviceaccount:{namespace}:{sa['metadata']['name']}"})
        header = {"alg": "RS256", "kid": self.kid}
        signing_input = _b64(json.dumps(header, separators=(",", ":")).encode()) + "." + _b64(
            json.dumps(claims, separators=(",", ":")).encode()
        )
        sig = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(sig)}", exp

    # verifying ----------------------------------------------------------------------------------
    def claims(self, token: str) -> Json | None:
        """The claims of a token this server signed and that is still valid, else None."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            self._key.public_key().verify(
                _unb64(parts[2]), f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
            claims: Json = json.loads(_unb64(parts[1]))
        except (InvalidSignature, ValueError):
            return None
        now = time.time()
        if not claims.get("nbf", 0) - 60 <= now <= claims.get("exp", 0):
            return None
        private = claims.get("kubernetes.io", {})
        pod_ref = private.get("pod")
        if pod_ref is not None:
            pod = self.store.get("pods", private.get("namespace", ""), pod_ref["name"])
            if pod is None or pod["metadata"]["uid"] != pod_ref["uid"]:
                return None
        sa = self.store.get("serviceaccounts", private.get("namespace", ""), private["serviceaccount"]["name"])
        if sa is None or sa["metadata"]["uid"] != private["serviceaccount"]["uid"]:
            return None
        return claims

    def user_of(self, claims: Json) -> User:
        private = claims["kubernetes.io"]
        ns, sa = private["namespace"], private["serviceaccount"]
        extra: dict[str, list[str]] = {"authentication.kubernetes.io/credential-id": [f"JTI={claims['jti']}"]}
        if "node" in private:
            extra["authentication.kubernetes.io/node-name"] = [private["node"]["name"]]
            extra["authentication.kubernetes.io/node-uid"] = [private["node"]["uid"]]
        if "pod" in private:
            extra["authentication.kubernetes.io/pod-name"] = [private["pod"]["name"]]
            extra["authentication.kubernetes.io/pod-uid"] = [private["pod"]["uid"]]
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated")
        return User(f"system:serviceaccount:{ns}:{sa['name']}", groups, sa["uid"], extra)

    def bootstrap_user(self, token: str) -> User | None:
        m = _BOOTSTRAP.match(token)
        if not m:
            return None
        secret = self.store.get("secrets", "kube-system", f"bootstrap-token-{m.group(1)}")
        if secret is None or secret.get("type") != "bootstrap.kubernetes.io/token":
            return None
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        if data.get("token-secret") != m.group(2) or data.get("usage-bootstrap-authentication") != "true":
            return None
        extra_groups = [g for g in data.get("auth-extra-groups", "").split(",") if g]
        return User(f"system:bootstrap:{m.group(1)}", ("system:bootstrappers", *extra_groups, "system:authenticated"))

    def authenticate(self, token: str) -> User | None:
        if (user := self.bootstrap_user(token)) is not None:
            return user
        claims = self.claims(token)
        if claims is None or API_AUDIENCE not in claims.get("aud", []):
            return None
        return self.user_of(claims)


def bootstrap_token_secret(token_id: str, secret: str, extra_groups: str = "") -> Json:
    def enc(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    data = {"token-id": enc(token_id), "token-secret": enc(secret), "usage-bootstrap-authentication": enc("true"),
            "usage-bootstrap-signing": enc("true")}
    if extra_groups:
        data["auth-extra-groups"] = enc(extra_groups)
    return {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"}, "data": data}

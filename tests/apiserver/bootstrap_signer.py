"""`kube-public/cluster-info` as `kubeadm init` creates it, signed as kube-controller-manager's bootstrap signer does.

kubeadm writes a kubeconfig with one cluster (server, certificate-authority-data) and no users into the
ConfigMap's `kubeconfig` key, and an RBAC Role lets `system:anonymous` get exactly that ConfigMap. The
signer (pkg/controller/bootstrap/bootstrapsigner.go) adds `jws-kubeconfig-<token id>` for every bootstrap
token Secret with `usage-bootstrap-signing: true` that has not expired, and drops signatures of tokens
that are gone. Signing is written here on its own (HS256 keyed by the token secret, `kid` = token id,
payload cut out), not borrowed from the agent, so the double checks the agent's verification independently.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

from tests.apiserver.registry import typed
from tests.apiserver.resources import resource
from tests.apiserver.store import Store

Json = dict[str, Any]
NAMESPACE = "kube-public"
NAME = "cluster-info"
JWS_PREFIX = "jws-kubeconfig-"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def detached_jws(content: str, token_id: str, secret: str) -> str:
    header = _b64url(b'{"alg":"HS256","kid":"' + token_id.encode() + b'"}')
    mac = hmac.new(secret.encode(), f"{header}.{_b64url(content.encode())}".encode(), hashlib.sha256).digest()
    return f"{header}..{_b64url(mac)}"


def cluster_info_kubeconfig(server: str, ca_pem: bytes) -> str:
    """What clientcmd.Write prints for kubeadm's cluster-info Config (keys sorted, the cluster named "")."""
    return ("apiVersion: v1\nclusters:\n- cluster:\n"
            f"    certificate-authority-data: {base64.b64encode(ca_pem).decode()}\n"
            f"    server: {server}\n"
            '  name: ""\ncontexts: null\ncurrent-context: ""\nkind: Config\npreferences: {}\nusers: null\n')


def _secret_value(secret: Json, key: str) -> str:
    raw = (secret.get("data") or {}).get(key)
    return base64.b64decode(raw).decode() if raw else ""


def _signing_tokens(store: Store) -> dict[str, str]:
    out: dict[str, str] = {}
    for secret in store.list_objects("secrets", "kube-system"):
        if secret.get("type") != "bootstrap.kubernetes.io/token":
            continue
        if _secret_value(secret, "usage-bootstrap-signing") != "true":
            continue
        expiration = _secret_value(secret, "expiration")
        if expiration and datetime.fromisoformat(expiration.replace("Z", "+00:00")) < datetime.now(UTC):
            continue
        token_id, token_secret = _secret_value(secret, "token-id"), _secret_value(secret, "token-secret")
        if token_id and token_secret and secret["metadata"]["name"] == f"bootstrap-token-{token_id}":
            out[token_id] = token_secret
    return out


class BootstrapSigner:
    def __init__(self, store: Store) -> None:
        self.store = store

    def publish(self, server: str, ca_pem: bytes) -> None:
        """kubeadm init's bootstrap-token phase: the unsigned ConfigMap, then the signer's pass."""
        if self.store.get("configmaps", NAMESPACE, NAME) is None:
            self.store.create("configmaps", typed(resource("configmaps"), {
                "metadata": {"name": NAME, "namespace": NAMESPACE},
                "data": {"kubeconfig": cluster_info_kubeconfig(server, ca_pem)}}))
        self.sync()

    def sync(self) -> None:
        cm = self.store.get("configmaps", NAMESPACE, NAME)
        if cm is None:
            return
        data: dict[str, str] = dict(cm.get("data") or {})
        content = data.get("kubeconfig", "")
        wanted = {k: v for k, v in data.items() if not k.startswith(JWS_PREFIX)}
        for token_id, secret in _signing_tokens(self.store).items():
            # the signer keeps a signature that is still valid, so the object does not churn
            current = data.get(JWS_PREFIX + token_id, "")
            fresh = detached_jws(content, token_id, secret)
            wanted[JWS_PREFIX + token_id] = current if current == fresh else fresh
        if wanted != data:
            cm["data"] = wanted
            self.store.update("configmaps", cm)

    def tamper(self, token_id: str) -> None:
        """Tests: a man in the middle's signature (valid form, wrong key)."""
        cm = self.store.get("configmaps", NAMESPACE, NAME)
        assert cm is not None
        cm["data"][JWS_PREFIX + token_id] = detached_jws(cm["data"]["kubeconfig"], token_id, "x" * 16)
        self.store.update("configmaps", cm)


"""Bootstrap tokens (`<id>.<secret>`) and the detached JWS the bootstrap signer puts in `cluster-info`.

The signer (upstream cluster-bootstrap `token/jws`) signs the ConfigMap's `kubeconfig` value with HS256,
keyed by the token's *secret* (not the whole token), with the token id as `kid`, and stores the compact
serialisation with its payload cut out: `<protected header>..<signature>`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass

_TOKEN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
JWS_KEY_PREFIX = "jws-kubeconfig-"


class TokenError(ValueError):
    pass


@dataclass(frozen=True)
class BootstrapToken:
    id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.id}.{self.secret}"


def parse_token(text: str) -> BootstrapToken:
    m = _TOKEN.match(text)
    if m is None:
        # the message kubeadm gives for a malformed --token
        raise TokenError(f'the bootstrap token "{text}" was not of the form "{_TOKEN.pattern}"')
    return BootstrapToken(m.group(1), m.group(2))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def detached_signature(content: str, token: BootstrapToken) -> str:
    # go-jose marshals the protected header with sorted keys and no spaces
    header = _b64(json.dumps({"alg": "HS256", "kid": token.id}, separators=(",", ":"), sort_keys=True).encode())
    signing_input = f"{header}.{_b64(content.encode())}".encode()
    return f"{header}..{_b64(hmac.digest(token.secret.encode(), signing_input, hashlib.sha256))}"


def signature_valid(detached: str, content: str, token: BootstrapToken) -> bool:
    """The detached JWS signs `content` with HS256 under this token (alg and kid checked, constant-time compare)."""
    parts = detached.split(".")
    if len(parts) != 3 or parts[1]:
        return False
    try:
        header = json.loads(_unb64(parts[0]))
        signature = _unb64(parts[2])
    except (ValueError, binascii.Error):
        return False
    if not isinstance(header, dict) or header.get("alg") != "HS256" or header.get("kid") != token.id:
        return False
    signing_input = f"{parts[0]}.{_b64(content.encode())}".encode()
    return hmac.compare_digest(signature, hmac.digest(token.secret.encode(), signing_input, hashlib.sha256))

"""The kube-controller-manager's certificate controllers, in the harness: csrapproving then
csrsigning, each a separate write as in kubelet-flows/tls-bootstrap.json (approval, then status).

Real kube-controller-manager approves only client CSRs (`kube-apiserver-client-kubelet`);
`kubelet-serving` CSRs wait for a person or another approver. `approve_serving` plays that part.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

from tests.apiserver.pki import CertificateAuthority, csr_sans, csr_subject
from tests.apiserver.store import Store, now_rfc3339

Json = dict[str, Any]
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING_SIGNER = "kubernetes.io/kubelet-serving"
_CLIENT_USAGES = {"digital signature", "key encipherment", "client auth"}
_SERVING_USAGES = {"digital signature", "key encipherment", "server auth"}


def _node_subject(csr_pem: bytes) -> str | None:
    cn, orgs = csr_subject(csr_pem)
    if orgs != ["system:nodes"] or not cn.startswith("system:node:") or len(cn) == len("system:node:"):
        return None
    return cn


def approvable(csr: Json, approve_serving: bool) -> str | None:
    """The approval message, or None when this CSR is left alone."""
    spec = csr.get("spec") or {}
    try:
        pem = base64.b64decode(spec.get("request", ""))
        cn = _node_subject(pem)
    except ValueError:
        return None
    usages = set(spec.get("usages") or [])
    if cn is None:
        return None
    if spec.get("signerName") == CLIENT_SIGNER and usages <= _CLIENT_USAGES and "client auth" in usages:
        groups = spec.get("groups") or []
        if spec.get("username") == cn or "system:bootstrappers" in groups or "system:nodes" in groups:
            return "Auto approving kubelet client certificate after SubjectAccessReview."
    if approve_serving and spec.get("signerName") == SERVING_SIGNER and usages <= _SERVING_USAGES:
        dns, ips = csr_sans(pem)
        if "server auth" in usages and (dns or ips) and spec.get("username") == cn:
            return "Auto approving kubelet serving certificate (test harness)."
    return None


class CsrController:
    def __init__(self, store: Store, ca: CertificateAuthority, *, approve_serving: bool = True) -> None:
        self.store = store
        self.ca = ca
        self.approve_serving = approve_serving
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        watch = self.store.open_watch("certificatesigningrequests", None, lambda _o: True, since=None)
        for csr in self.store.list_objects("certificatesigningrequests"):
            watch.queue.put_nowait(("ADDED", csr))
        self._task = asyncio.get_running_loop().create_task(self._run(watch.queue))
        self._watch = watch

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self.store.close_watch(self._watch)
            self._task = None

    async def _run(self, queue: asyncio.Queue[tuple[str, Json] | None]) -> None:
        while (item := await queue.get()) is not None:
            kind, csr = item
            if kind == "DELETED":
                continue
            self.reconcile(csr["metadata"]["name"])

    def reconcile(self, name: str) -> None:
        csr = self.store.get("certificatesigningrequests", "", name)
        if csr is None:
            return
        status = csr.setdefault("status", {})
        conditions = status.get("conditions") or []
        types = {c.get("type") for c in conditions}
        if not types & {"Approved", "Denied", "Failed"}:
            message = approvable(csr, self.approve_serving)
            if message is None:
                return
            now = now_rfc3339()
            status["conditions"] = [*conditions, {
                "type": "Approved", "status": "True", "reason": "AutoApproved", "message": message,
                "lastUpdateTime": now, "lastTransitionTime": now}]
            self.store.update("certificatesigningrequests", csr)
            return
        if "Approved" in types and not status.get("certificate"):
            spec = csr["spec"]
            if spec.get("signerName") not in (CLIENT_SIGNER, SERVING_SIGNER):
                return
            seconds = spec.get("expirationSeconds")
            days = max(1, int(seconds) // 86400) if seconds else 30
            cert = self.ca.sign_csr(base64.b64decode(spec["request"]), list(spec.get("usages") or []), days=days)
            status["certificate"] = base64.b64encode(cert).decode()
            self.store.update("certificatesigningrequests", csr)

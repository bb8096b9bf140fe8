"""Builds and starts the kubelet API (port 10250) from the configuration, for the agent.

Off unless `port` is set, or the agent joined a cluster (then 10250, as upstream). Authentication by client
certificate (`authentication.x509.clientCAFile`), TokenReview (`authentication.webhook.enabled`, joined only)
and anonymous (`authentication.anonymous.enabled`); authorization `Webhook` (SubjectAccessReview, the default
when joined) or `AlwaysAllow` (the default standalone, where there is no API server to ask).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from cri.runtime import Runtime
from cri.streaming import StreamingRuntime
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.kubeapi.rest import RestClient
from minikubelet.server.app import KubeletServer
from minikubelet.server.auth import AlwaysAllow, Authenticator, Json, ReviewPoster, WebhookAuthorizer
from minikubelet.server.kubelet_api import KubeletAPI
from minikubelet.server.tls import serving_context

log = logging.getLogger("minikubelet.server")

DEFAULT_PORT = 10250
REVIEW_TIMEOUT = 10.0


def _poster(client: RestClient) -> ReviewPoster:
    async def post(path: str, body: Json) -> Json:
        return await client.create(path, body, timeout=REVIEW_TIMEOUT)

    return post


async def start_kubelet_api(cfg: KubeletConfig, server: KubeletServer, *, joined: bool, client: RestClient | None,
                            node_name: str, host_ip: str, pods: Callable[[], Iterable[Pod]], runtime: Runtime,
                            streaming: StreamingRuntime | None) -> KubeletAPI | None:
    port = cfg.port if cfg.port >= 0 else (DEFAULT_PORT if joined else 0)
    if not port:
        return None
    mode = cfg.authorization_mode or ("Webhook" if client is not None else "AlwaysAllow")
    if mode == "Webhook" and client is None:
        raise ValueError("authorization: mode Webhook needs an API server (--kubeconfig)")
    authn = Authenticator(anonymous=cfg.authentication.anonymous_enabled,
                          token_review=_poster(client) if client is not None and cfg.authentication.webhook_enabled
                          else None)
    authz = WebhookAuthorizer(_poster(client)) if mode == "Webhook" and client is not None else AlwaysAllow()
    ctx = serving_context(cfg.tls_cert_file, cfg.tls_private_key_file, cfg.authentication.client_ca_file,
                          root_dir=cfg.root_dir, host=node_name, ips=[host_ip])
    api = KubeletAPI(server, node_name, pods, runtime, streaming, authn, authz,
                     idle_timeout=cfg.streaming_connection_idle_timeout)
    await server.serve(cfg.address, port, api.app(), ctx)
    log.info("kubelet API serving", extra={"kv": {"address": cfg.address, "port": port, "authorization": mode}})
    return api

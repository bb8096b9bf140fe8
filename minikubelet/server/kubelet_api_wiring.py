"""Builds and starts the kubelet API (port 10250) from the configuration, for the agent.

Off unless `port` is set, or the agent joined a cluster (then 10250, as upstream). Authentication by client
certificate (`authentication.x509.clientCAFile`), TokenReview (`authentication.webhook.enabled`, joined only)
and anonymous (`authentication.anonymous.enabled`); authorization `Webhook` (SubjectAccessReview, the default
when joined) or `AlwaysAllow` (the default standalone, where there is no API server to ask). The serving
certificate comes from a CSR when `serverTLSBootstrap` is set (joined only; renewed before it expires), else
from `tlsCertFile`/`tlsPrivateKeyFile`, else a self-signed pair under the root dir.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from cri.runtime import Runtime
from cri.streaming import StreamingRuntime
from minikubelet.base.clock import Clock, RealClock
from minikubelet.base.podview import Pod
from minikubelet.config.configz import served_config
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.kubeapi.rest import ApiError, RestClient
from minikubelet.node.serving_certificate import ServingCertificateManager
from minikubelet.server.app import KubeletServer
from minikubelet.server.auth import AlwaysAllow, Authenticator, Json, ReviewPoster, WebhookAuthorizer
from minikubelet.server.auth_metrics import ERROR_CODE, AuthMetrics, auth_metrics
from minikubelet.server.kubelet_api import KubeletAPI, SurfaceOptions
from minikubelet.server.tls import serving_context

log = logging.getLogger("minikubelet.server")

DEFAULT_PORT = 10250
REVIEW_TIMEOUT = 10.0


def _poster(client: RestClient, metrics: AuthMetrics | None = None, kind: str = "authz") -> ReviewPoster:
    async def post(path: str, body: Json) -> Json:
        t0, code = time.monotonic(), ERROR_CODE
        try:
            status, doc = await client.request_with_code("POST", path, body=body, timeout=REVIEW_TIMEOUT)
            code = str(status)
            return doc
        except ApiError as e:
            code = str(e.code)
            raise
        finally:
            if metrics is not None:
                metrics.review(kind, code, time.monotonic() - t0)

    return post


def effective_port(cfg: KubeletConfig, joined: bool) -> int:
    return cfg.port if cfg.port >= 0 else (DEFAULT_PORT if joined else 0)


def _serve_certificate_from(ctx: ssl.SSLContext) -> Callable[[str], None]:
    def load(bundle: str) -> None:
        # New handshakes use the new pair; connections already open keep theirs, as upstream.
        ctx.load_cert_chain(bundle)

    return load


def _log_end(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("serving certificate manager stopped", exc_info=exc)


async def start_kubelet_api(cfg: KubeletConfig, server: KubeletServer, *, joined: bool, client: RestClient | None,
                            node_name: str, host_ip: str, pods: Callable[[], Iterable[Pod]], runtime: Runtime,
                            streaming: StreamingRuntime | None, clock: Clock | None = None) -> KubeletAPI | None:
    port = effective_port(cfg, joined)
    if not port:
        return None
    mode = cfg.authorization_mode or ("Webhook" if client is not None else "AlwaysAllow")
    if mode == "Webhook" and client is None:
        raise ValueError("authorization: mode Webhook needs an API server (--kubeconfig)")
    metrics = auth_metrics(server.registry)
    authn = Authenticator(anonymous=cfg.authentication.anonymous_enabled,
                          token_review=_poster(client, metrics, "authn")
                          if client is not None and cfg.authentication.webhook_enabled else None,
                          cache_ttl=cfg.authentication.webhook_cache_ttl, metrics=metrics)
    authz = WebhookAuthorizer(_poster(client, metrics)) if mode == "Webhook" and client is not None else AlwaysAllow()
    # As upstream, serverTLSBootstrap wins over tlsCertFile; standalone there is nobody to send a CSR to.
    bootstrap = cfg.server_tls_bootstrap and client is not None
    ctx = serving_context(cfg.tls_cert_file, cfg.tls_private_key_file, cfg.authentication.client_ca_file,
                          root_dir=cfg.root_dir, host=node_name, ips=[host_ip], min_version=cfg.tls_min_version,
                          cipher_suites=cfg.tls_cipher_suites, bootstrap=bootstrap)
    served = replace(cfg, port=port, authorization_mode=mode)
    surface = SurfaceOptions(config=served_config(served), health=server.health)
    api = KubeletAPI(server, node_name, pods, runtime, streaming, authn, authz, surface,
                     idle_timeout=cfg.streaming_connection_idle_timeout)
    if bootstrap and client is not None:
        manager = ServingCertificateManager(os.path.join(cfg.root_dir, "pki"), node_name,
                                            lambda: [("InternalIP", host_ip), ("Hostname", node_name)],
                                            clock or RealClock(), client, _serve_certificate_from(ctx))
        if manager.current() is not None:
            ctx.load_cert_chain(manager.store.current_path)
        task = asyncio.create_task(manager.run(), name="serving-certificate")
        task.add_done_callback(_log_end)
        api.background.append(task)
        api.serving_certificates = manager
    await server.serve(cfg.address, port, api.routes(), ssl_context=ctx)
    log.info("kubelet API serving", extra={"kv": {"address": cfg.address, "port": port, "authorization": mode,
                                                  "serverTLSBootstrap": bootstrap}})
    return api

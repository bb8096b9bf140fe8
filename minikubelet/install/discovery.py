"""Token discovery of the cluster CA, as `kubeadm join --discovery-token-ca-cert-hash` does it.

1. GET `kube-public/cluster-info` anonymously over TLS *without* verifying the server (we do not know the CA yet),
   polling until the bootstrap signer has added `jws-kubeconfig-<token id>`.
2. The JWS proves the kubeconfig in it came from someone who knows the token; the CA in it must match a pin.
3. GET it again, now verifying the server against that CA, and require the same bytes.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import yaml

from minikubelet.base.clock import Clock
from minikubelet.install.bootstrap_token import JWS_KEY_PREFIX, BootstrapToken, signature_valid
from minikubelet.install.ca_pin import PinError, check_any
from minikubelet.kubeapi.kubeconfig import ClientConfig

CLUSTER_INFO_PATH = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
RETRY_INTERVAL = 5.0  # kubeadm's DiscoveryRetryInterval
DEFAULT_TIMEOUT = 300.0  # kubeadm's default discovery timeout (5m)


class DiscoveryError(Exception):
    pass


@dataclass(frozen=True)
class ClusterInfo:
    server: str  # the API server the cluster-info kubeconfig names (what the node then talks to)
    ca_pem: bytes


def normalise_endpoint(endpoint: str) -> str:
    """`API:6443` (kubeadm's form) or `https://API:6443`."""
    if endpoint.startswith("http://"):
        raise DiscoveryError(f"API server endpoint {endpoint!r}: discovery needs https")
    base = endpoint if endpoint.startswith("https://") else f"https://{endpoint}"
    return base.rstrip("/")


async def _get(cfg: ClientConfig, clock: Clock) -> dict[str, Any]:
    # The REST client (h11, TLS) is loaded when a join runs, not by every `minikubelet run` (issue 19: memory).
    from minikubelet.kubeapi.rest import RestClient, RetryPolicy

    client = RestClient(cfg, clock, retry=RetryPolicy(attempts=1), timeout=10.0)
    try:
        return await client.get(CLUSTER_INFO_PATH)
    finally:
        await client.close()


async def _poll(cfg: ClientConfig, token: BootstrapToken, clock: Clock, timeout: float) -> dict[str, str]:
    from minikubelet.kubeapi.rest import ApiError, TransportError

    deadline = clock.now() + timeout
    while True:
        try:
            data = (await _get(cfg, clock)).get("data") or {}
            if JWS_KEY_PREFIX + token.id in data:
                return {str(k): str(v) for k, v in data.items()}
            last = f'could not find a JWS signature in the cluster-info ConfigMap for token ID "{token.id}"'
        except (ApiError, TransportError) as e:
            last = f"failed to request the cluster-info ConfigMap: {e}"
        if clock.now() + RETRY_INTERVAL > deadline:
            raise DiscoveryError(last)
        await clock.sleep(RETRY_INTERVAL)


def _cluster(kubeconfig: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(kubeconfig)
    except yaml.YAMLError as e:
        raise DiscoveryError(f"couldn't parse the kubeconfig file in the cluster-info ConfigMap: {e}") from None
    clusters = doc.get("clusters") if isinstance(doc, dict) else None
    if not isinstance(clusters, list) or not clusters or not isinstance(clusters[-1], dict):
        raise DiscoveryError("malformed kubeconfig in the cluster-info ConfigMap: no cluster")
    cluster = clusters[-1].get("cluster")
    if not isinstance(cluster, dict) or not cluster.get("server"):
        raise DiscoveryError("malformed kubeconfig in the cluster-info ConfigMap: the cluster has no server")
    return cluster


async def discover(endpoint: str, token: BootstrapToken, pins: set[str], clock: Clock, *,
                   timeout: float = DEFAULT_TIMEOUT) -> ClusterInfo:
    """The validated API server and cluster CA; `pins` empty means the unsafe skip of CA verification."""
    from minikubelet.kubeapi.rest import ApiError, TransportError

    base = normalise_endpoint(endpoint)
    data = await _poll(ClientConfig(server=base, insecure=True), token, clock, timeout)
    kubeconfig = data.get("kubeconfig", "")
    if not kubeconfig:
        raise DiscoveryError("there is no kubeconfig key in the cluster-info ConfigMap. This API Server isn't set "
                             "up for token bootstrapping, can't connect")
    if not signature_valid(data[JWS_KEY_PREFIX + token.id], kubeconfig, token):
        raise DiscoveryError("failed to verify JWS signature of received cluster info object, can't trust this "
                             "API Server")
    cluster = _cluster(kubeconfig)
    try:
        ca_pem = base64.b64decode(str(cluster.get("certificate-authority-data") or ""), validate=True)
    except (binascii.Error, ValueError):
        raise DiscoveryError("malformed kubeconfig in the cluster-info ConfigMap: certificate-authority-data "
                             "is not base64") from None
    if not pins:
        return ClusterInfo(str(cluster["server"]).rstrip("/"), ca_pem)
    try:
        check_any(ca_pem, pins)
    except PinError as e:
        raise DiscoveryError(str(e)) from None
    try:
        secure = await _get(ClientConfig(server=base, ca_pem=ca_pem), clock)
    except (ApiError, TransportError) as e:
        raise DiscoveryError(f"failed to request the cluster-info ConfigMap with the pinned CA: {e}") from None
    if str((secure.get("data") or {}).get("kubeconfig", "")) != kubeconfig:
        raise DiscoveryError("the second kubeconfig from the cluster-info ConfigMap (using validated TLS) was "
                             "different from the first")
    return ClusterInfo(str(cluster["server"]).rstrip("/"), ca_pem)

"""Runs one probe spec (a Kubernetes Probe dict) with the handler its action names."""

from __future__ import annotations

import logging

from cri.runtime import RuntimeService
from minikubelet.base.podview import ContainerView, ProbeSpec
from probes.addresses import PortError, resolve_port
from probes.exec import probe_exec
from probes.result import ProbeOutcome, Result
from probes.tcp import probe_tcp

log = logging.getLogger(__name__)


async def run_probe(
    runtime: RuntimeService,
    spec: ProbeSpec,
    container: ContainerView,
    pod_ip: str,
    container_id: str,
) -> ProbeOutcome:
    """One diagnostic; never raises for a failing or unreachable target."""
    timeout = float(spec.timeout_seconds)
    try:
        if spec.handler == "exec":
            return await probe_exec(runtime, container_id, list(spec.command), timeout)
        if spec.handler == "httpGet":
            # The HTTP client (and the ssl module) only for a pod with an httpGet probe.
            from probes.http import probe_headers, probe_http, probe_url

            port = resolve_port(spec.port, container.ports)
            url = probe_url(spec.scheme, spec.host or pod_ip, port, spec.path)
            return await probe_http(url, probe_headers(spec.http_headers), timeout)
        if spec.handler == "tcpSocket":
            port = resolve_port(spec.port, container.ports)
            return await probe_tcp(spec.host or pod_ip, port, timeout)
        if spec.handler == "grpc":
            port = resolve_port(spec.port, container.ports)
            # grpc brings its own TLS stack and core (~19 MiB): load it only when a pod uses a grpc probe.
            from probes.grpc import probe_grpc

            return await probe_grpc(pod_ip, port, spec.service, timeout)
    except PortError as err:
        return ProbeOutcome(Result.UNKNOWN, str(err))
    except Exception as err:
        log.exception("probe handler crashed")
        return ProbeOutcome(Result.UNKNOWN, f"probe handler error: {err}")
    return ProbeOutcome(Result.UNKNOWN, f"missing probe handler for container {container.name}")

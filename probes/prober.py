"""Runs one probe spec (a Kubernetes Probe dict) with the handler its action names."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cri.runtime import RuntimeService
from probes.addresses import PortError, resolve_port
from probes.exec import probe_exec
from probes.http import probe_headers, probe_http, probe_url
from probes.result import ProbeOutcome, Result
from probes.tcp import probe_tcp

log = logging.getLogger(__name__)


async def run_probe(
    runtime: RuntimeService,
    spec: Mapping[str, Any],
    container: Mapping[str, Any],
    pod_ip: str,
    container_id: str,
) -> ProbeOutcome:
    """One diagnostic; never raises for a failing or unreachable target."""
    timeout = float(spec.get("timeoutSeconds") or 1)
    try:
        if (action := spec.get("exec")) is not None:
            return await probe_exec(runtime, container_id, list(action.get("command") or []), timeout)
        if (action := spec.get("httpGet")) is not None:
            port = resolve_port(action.get("port"), container)
            url = probe_url(
                str(action.get("scheme") or "HTTP"), action.get("host") or pod_ip, port, action.get("path") or ""
            )
            return await probe_http(url, probe_headers(action.get("httpHeaders") or []), timeout)
        if (action := spec.get("tcpSocket")) is not None:
            port = resolve_port(action.get("port"), container)
            return await probe_tcp(action.get("host") or pod_ip, port, timeout)
        if (action := spec.get("grpc")) is not None:
            port = resolve_port(int(action.get("port", 0)), container)
            # grpc brings its own TLS stack and core (~19 MiB): load it only when a pod uses a grpc probe.
            from probes.grpc import probe_grpc

            return await probe_grpc(pod_ip, port, str(action.get("service") or ""), timeout)
    except PortError as err:
        return ProbeOutcome(Result.UNKNOWN, str(err))
    except Exception as err:
        log.exception("probe handler crashed")
        return ProbeOutcome(Result.UNKNOWN, f"probe handler error: {err}")
    return ProbeOutcome(Result.UNKNOWN, f"missing probe handler for container {container.get('name', '')}")

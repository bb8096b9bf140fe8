"""The API server's core/v1 Pod defaults (pkg/apis/core/v1/defaults.go) over plain pod dicts.

Checked against fixtures/pod-rich-create.json (request vs response). Values of the wrong JSON
type are left alone: validation reports them, defaulting never raises.
"""

from __future__ import annotations

import copy
import re
from typing import Any

DEFAULT_MODE = 0o644  # 420, volume file mode for configMap/secret/downwardAPI/projected
_CONTAINER_KINDS = ("initContainers", "containers", "ephemeralContainers")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def apply_defaults(pod: dict[str, Any]) -> dict[str, Any]:
    """A defaulted deep copy of `pod`; unknown fields are kept as they are."""
    out = copy.deepcopy(pod)
    if not isinstance(out, dict):
        return out
    metadata = out.get("metadata")
    if isinstance(metadata, dict) and not metadata.get("namespace"):
        metadata["namespace"] = "default"
    spec = out.get("spec")
    if isinstance(spec, dict):
        _default_spec(spec)
    return out


def _default_spec(spec: dict[str, Any]) -> None:
    _set_if_missing(spec, "restartPolicy", "Always")
    _set_if_missing(spec, "terminationGracePeriodSeconds", 30)
    _set_if_missing(spec, "dnsPolicy", "ClusterFirst")
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    _set_if_missing(spec, "schedulerName", "default-scheduler")
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    # Set by the Priority admission plugin when no PriorityClass applies; kept here so a
    # static pod reads like the mirror pod the API server stores.
    if spec.get("priority") is None and not spec.get("priorityClassName"):
        spec["priority"] = 0
    _set_if_missing(spec, "preemptionPolicy", "PreemptLowerPriority")
    host_network = spec.get("hostNetwork") is True
    for kind in _CONTAINER_KINDS:
        for container in _dicts(spec.get(kind)):
            _default_container(container, host_network=host_network)
            if kind != "ephemeralContainers":
                _default_requests_from_limits(container)
    for volume in _dicts(spec.get("volumes")):
        _default_volume(volume)


def _set_if_missing(obj: dict[str, Any], key: str, value: object) -> None:
    if obj.get(key) in (None, ""):
        obj[key] = value


def _is_int(value: object, expected: int) -> bool:
    return type(value) is int and value == expected


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _default_container(c: dict[str, Any], *, host_network: bool) -> None:
    if c.get("imagePullPolicy") in (None, ""):
        image = c.get("image")
        c["imagePullPolicy"] = pull_policy_for(image if isinstance(image, str) else "")
    _set_if_missing(c, "terminationMessagePath", "/dev/termination-log")
    _set_if_missing(c, "terminationMessagePolicy", "File")
    if c.get("resources") is None:
        c["resources"] = {}
    for port in _dicts(c.get("ports")):
        _set_if_missing(port, "protocol", "TCP")
        if host_network and (port.get("hostPort") is None or _is_int(port.get("hostPort"), 0)):
            port["hostPort"] = port.get("containerPort")
    for probe_key in _PROBES:
        probe = c.get(probe_key)
        if isinstance(probe, dict):
            # Upstream these are plain int32 fields: 0 means unset and is defaulted too.
            for key, default in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
                if probe.get(key) is None or _is_int(probe.get(key), 0):
                    probe[key] = default
            _default_http_get(probe.get("httpGet"))
    lifecycle = c.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict):
                _default_http_get(handler.get("httpGet"))
    for env in _dicts(c.get("env")):
        value_from = env.get("valueFrom")
        if isinstance(value_from, dict):
            _default_field_ref(value_from.get("fieldRef"))
            _default_resource_field_ref(value_from.get("resourceFieldRef"))


def _default_http_get(action: object) -> None:
    if isinstance(action, dict):
        _set_if_missing(action, "path", "/")
        _set_if_missing(action, "scheme", "HTTP")


def _default_field_ref(ref: object) -> None:
    if isinstance(ref, dict):
        _set_if_missing(ref, "apiVersion", "v1")


def _default_resource_field_ref(ref: object) -> None:
    # divisor is a non-pointer Quantity upstream: an absent one serialises as "0".
    if isinstance(ref, dict) and ref.get("divisor") is None:
        ref["divisor"] = "0"


def _default_requests_from_limits(c: dict[str, Any]) -> None:
    resources = c.get("resources")
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return
    requests = resources.get("requests")
    if requests is None:
        requests = resources["requests"] = {}
    if not isinstance(requests, dict):
        return
    for name, value in limits.items():
        requests.setdefault(name, copy.deepcopy(value))


# In the order upstream validateVolumeSource checks them: the first one present is the source.
_VOLUME_SOURCES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs", "iscsi",
    "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc",
    "azureFile", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO",
    "configMap", "storageos", "csi", "projected", "ephemeral", "image",
)  # fmt: skip


def volume_sources(volume: dict[str, Any]) -> list[str]:
    """The volume source keys present (non-null) on a volume."""
    return [k for k in _VOLUME_SOURCES if volume.get(k) is not None]


def _default_volume(v: dict[str, Any]) -> None:
    if not volume_sources(v):
        v["emptyDir"] = {}
        return
    host_path = v.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") is None:
        host_path["type"] = ""
    for key in ("secret", "configMap", "downwardAPI", "projected"):
        source = v.get(key)
        if isinstance(source, dict) and source.get("defaultMode") is None:
            source["defaultMode"] = DEFAULT_MODE
    downward = v.get("downwardAPI")
    if isinstance(downward, dict):
        _default_downward_items(downward)
    projected = v.get("projected")
    if isinstance(projected, dict):
        for source in _dicts(projected.get("sources")):
            token = source.get("serviceAccountToken")
            if isinstance(token, dict) and token.get("expirationSeconds") is None:
                token["expirationSeconds"] = 3600
            inner = source.get("downwardAPI")
            if isinstance(inner, dict):
                _default_downward_items(inner)


def _default_downward_items(source: dict[str, Any]) -> None:
    for item in _dicts(source.get("items")):
        _default_field_ref(item.get("fieldRef"))
        _default_resource_field_ref(item.get("resourceFieldRef"))


# Image reference grammar (distribution/reference), enough to find the tag and digest.
_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$")
_DOMAIN = re.compile(r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?$")


def parse_image_tag(image: str) -> tuple[str, str] | None:
    """(tag, digest) of an image reference; tag is "latest" when neither is given; None if invalid."""
    name, digest = image, ""
    if "@" in image:
        name, digest = image.split("@", 1)
        if not _DIGEST.match(digest):
            return None
    tag = ""
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name[: len(name) - len(last)] + last.split(":", 1)[0], last.split(":", 1)[1]
        if not _TAG.match(tag):
            return None
    parts = name.split("/")
    if len(parts) > 1 and (("." in parts[0] or ":" in parts[0] or parts[0] == "localhost") or parts[0] != parts[0].lower()):
        if not _DOMAIN.match(parts[0]):
            return None
        parts = parts[1:]
    if not parts or not all(_PATH_COMPONENT.match(p) for p in parts) or len(name) > 255:
        return None
    if not tag and not digest:
        tag = "latest"
    return tag, digest


def pull_policy_for(image: str) -> str:
    """Upstream SetDefaults_Container: Always for ":latest" (or no tag and no digest), else IfNotPresent."""
    parsed = parse_image_tag(image)
    if parsed is None:
        return "IfNotPresent"
    return "Always" if parsed[0] == "latest" else "IfNotPresent"

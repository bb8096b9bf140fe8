"""What the API server does to a Pod beyond storing it: defaulting, the admission plugins that
change it (ServiceAccount, DefaultTolerationSeconds, Priority), validation, the status it starts
with, status-update validation (pod-rich-create.json, status-422-*.json).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import secrets
from typing import Any

from cgroups.qos import compute_qos_class
from minikubelet.api.defaults import apply_defaults
from minikubelet.api.field import FieldError, forbidden
from minikubelet.api.validation import validate_pod
from minikubelet.base.podview import PodView

Json = dict[str, Any]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SA_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet (no vowels, no 0/1/3)


def random_suffix(n: int = 5) -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(n))


def is_mirror(pod: Json) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def kube_api_access_volume() -> Json:
    return {
        "name": f"kube-api-access-{random_suffix()}",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [
                    {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
                ]}},
            ],
            "defaultMode": 420,
        },
    }


def admit_service_account(pod: Json) -> None:
    """The ServiceAccount admission plugin: default SA name, and the kube-api-access volume mounted
    into every container that does not mount something at the token path already. Mirror pods skip it."""
    if is_mirror(pod):
        return
    spec = pod["spec"]
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
    spec["serviceAccount"] = spec["serviceAccountName"]
    if spec.get("automountServiceAccountToken") is False:
        return
    volume = kube_api_access_volume()
    mount = {"name": volume["name"], "readOnly": True, "mountPath": SA_MOUNT_PATH}
    used = False
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or []:
            mounts = c.setdefault("volumeMounts", [])
            if any(m.get("mountPath") == SA_MOUNT_PATH for m in mounts):
                continue
            mounts.append(dict(mount))
            used = True
    if used:
        spec.setdefault("volumes", []).append(volume)


def admit_default_tolerations(pod: Json) -> None:
    """DefaultTolerationSeconds: NoExecute not-ready/unreachable for 300 s unless already tolerated."""
    tolerations = pod["spec"].setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if any(_tolerates(t, key) for t in tolerations):
            continue
        tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})


def _tolerates(t: Json, key: str) -> bool:
    effect_ok = t.get("effect") in (None, "", "NoExecute")
    if t.get("operator") == "Exists" and not t.get("key"):
        return effect_ok
    return t.get("key") == key and effect_ok


def qos_class(pod: Json) -> str:
    """v1qos.ComputePodQOS (PodLevelResources on): pod-level resources when set, else the containers'; quantities
    compared by value."""
    return compute_qos_class(PodView.of(pod))


def prepare_create(pod: Json) -> Json:
    """Defaulted and admitted copy of a Pod being created (before validation)."""
    out = apply_defaults(pod)
    out.setdefault("spec", {})
    admit_service_account(out)
    admit_default_tolerations(out)
    out["metadata"]["generation"] = 1
    out["status"] = {"phase": "Pending", "qosClass": qos_class(out)}
    return out


def causes(errs: list[FieldError]) -> list[Json]:
    return [{"reason": e.reason, "message": e.message, "field": e.path} for e in errs]


def validate_create(pod: Json) -> list[Json]:
    errs = validate_pod(pod)
    if (pod.get("spec") or {}).get("ephemeralContainers"):
        # ValidatePodCreate: they are added only through pods/ephemeralcontainers
        errs.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    return causes(errs)


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def ephemeral_containers_update(old: Json, new: Json) -> Json:
    """podEphemeralContainersStrategy.PrepareForUpdate: of the written Pod only spec.ephemeralContainers is
    kept (defaulted as a create defaults them); the rest of the spec, the status and the metadata stay the
    stored ones; metadata.generation moves with the spec (updatePodGeneration)."""
    out = copy.deepcopy(old)
    written = ((new.get("spec") or {}).get("ephemeralContainers")) if isinstance(new.get("spec"), dict) else None
    spec = out.setdefault("spec", {})
    if written:
        spec["ephemeralContainers"] = apply_defaults({"spec": {"ephemeralContainers": written}})["spec"][
            "ephemeralContainers"]
    else:
        spec.pop("ephemeralContainers", None)
    if spec != old.get("spec"):
        out["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
    return out


def validate_ephemeral_update(new: Json, old: Json) -> list[Json]:
    """ValidatePodEphemeralContainersUpdate: the whole pod validates; static (mirror) pods take no ephemeral
    container; existing ones may be neither removed nor changed (each compared by name: a patch may reorder)."""
    if MIRROR_ANNOTATION in (old["metadata"].get("annotations") or {}):
        return causes([forbidden("", "static pods do not support ephemeral containers")])
    errs = validate_pod(new)
    path = "spec.ephemeralContainers"
    written = {str(c.get("name")): c for c in (new.get("spec") or {}).get("ephemeralContainers") or []}
    for c in (old.get("spec") or {}).get("ephemeralContainers") or []:
        name = str(c.get("name"))
        if name not in written:
            errs.append(forbidden(path, f"existing ephemeral containers {json.dumps(name)} may not be removed\n"))
        elif written[name] != c:
            errs.append(forbidden(path, f"existing ephemeral containers {json.dumps(name)} may not be changed\n"))
    return causes(errs)


def validate_status(status: Json) -> list[Json]:
    """ValidatePodStatusUpdate's IP checks (status-422-invalid-status-patch.json); phase is not validated."""
    out: list[Json] = []
    for field in ("podIPs", "hostIPs"):
        ips = status.get(field) or []
        bad = False
        for i, entry in enumerate(ips):
            ip = entry.get("ip", "")
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                bad = True
                out.append({"reason": "FieldValueInvalid", "field": f"status.{field}[{i}]",
                            "message": f'Invalid value: "{ip}": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'})
        if bad:
            first = next(i for i, e in enumerate(ips) if not _is_ip(e.get("ip", "")))
            out.append({"reason": "InternalError", "field": f"status.{field}",
                        "message": f"Internal error: failed to check for dual stack with error:invalid IP[{first}]: "
                                   f"{ips[first].get('ip', '')}"})
        if len(ips) > 2 or (len(ips) == 2 and (bad or _same_family(ips))):
            shown = json.dumps([{"IP": e.get("ip", "")} for e in ips], separators=(",", ":"))
            out.append({"reason": "FieldValueInvalid", "field": f"status.{field}",
                        "message": f"Invalid value: {shown}: may specify no more than one IP for each IP family"})
    return out


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _same_family(ips: list[Json]) -> bool:
    versions = [ipaddress.ip_address(e["ip"]).version for e in ips]
    return len(set(versions)) < len(versions)


def generate_name(prefix: str) -> str:
    return prefix + random_suffix()

"""Pod-level rules of ValidatePodCreate that are not about one container: metadata, DNS, host
aliases, readiness gates, tolerations, the pod security context.

Inputs are plain dicts that may still hold wrong JSON types; a value of the wrong type is skipped
here (the schema check reports it).
"""

from __future__ import annotations

import re
from typing import Any

from minikubelet.api.field import (
    FieldError,
    invalid,
    not_supported,
    required,
    too_long,
)
from minikubelet.api.names import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    inclusive_range,
    ip_sloppy_errors,
    label_value_errors,
    qualified_name_errors,
)

TOTAL_ANNOTATION_SIZE = 256 * (1 << 10)
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
MAX_ID = 2**31 - 1
# A uid names directories (pods/<uid>/volumes) and is one '_'-separated part of container names.
_UID = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?")
MAX_UID_BYTES = 128
_UID_MSG = (f"must be at most {MAX_UID_BYTES} characters of alphanumerics, '-' or '.', starting and ending with an "
            "alphanumeric character (a uid names directories and containers)")
_DNS1123_US_FMT = r"_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*"
_DNS1123_US = re.compile(_DNS1123_US_FMT)


def _str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _dict(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = obj.get(key)
    return value if isinstance(value, dict) else None


def _items(obj: dict[str, Any], key: str) -> list[tuple[int, Any]]:
    value = obj.get(key)
    return list(enumerate(value)) if isinstance(value, list) else []


def _int(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if type(value) is int else None


def label_errors(values: object, path: str) -> list[FieldError]:
    """metav1validation.ValidateLabels: qualified-name keys, label values; the path is the map's."""
    errs: list[FieldError] = []
    for key, value in values.items() if isinstance(values, dict) else ():
        errs.extend(invalid(path, key, m) for m in qualified_name_errors(key))
        if isinstance(value, str):
            errs.extend(invalid(path, value, m) for m in label_value_errors(value))
    return errs


def annotation_errors(values: object, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not isinstance(values, dict):
        return errs
    size = 0
    for key, value in values.items():
        errs.extend(invalid(path, key, m) for m in qualified_name_errors(key.lower()))
        size += len(key.encode("utf-8", "surrogatepass"))
        if isinstance(value, str):
            size += len(value.encode("utf-8", "surrogatepass"))
    if size > TOTAL_ANNOTATION_SIZE:
        errs.append(too_long(path, TOTAL_ANNOTATION_SIZE))
    return errs


def uid(md: dict[str, Any]) -> list[FieldError]:
    value = _str(md, "uid")
    if not value:
        return []
    if len(value.encode("utf-8", "surrogatepass")) > MAX_UID_BYTES or not _UID.fullmatch(value):
        return [invalid("metadata.uid", value, _UID_MSG)]
    return []


def metadata_extras(md: dict[str, Any]) -> list[FieldError]:
    return (label_errors(md.get("labels"), "metadata.labels")
            + annotation_errors(md.get("annotations"), "metadata.annotations") + uid(md))


def spec_extras(spec: dict[str, Any]) -> list[FieldError]:
    """The pod-level rules, in ValidatePodSpec's order."""
    errs = label_errors(spec.get("nodeSelector"), "spec.nodeSelector")
    errs += security_context(spec)
    errs += dns_config(spec)
    for i, gate in _items(spec, "readinessGates"):
        if isinstance(gate, dict):
            ctype = _str(gate, "conditionType") or ""
            errs += [invalid(f"spec.readinessGates[{i}].conditionType", ctype, m) for m in qualified_name_errors(ctype)]
    for key in ("hostname", "subdomain"):
        value = _str(spec, key)
        if value:
            errs += [invalid(f"spec.{key}", value, m) for m in dns1123_label_errors(value)]
    errs += tolerations(spec)
    errs += host_aliases(spec)
    pcn = _str(spec, "priorityClassName")
    if pcn:
        errs += [invalid("spec.priorityClassName", pcn, m) for m in dns1123_subdomain_errors(pcn)]
    preemption = _str(spec, "preemptionPolicy")
    if preemption is not None and preemption not in ("PreemptLowerPriority", "Never"):
        errs.append(not_supported("spec.preemptionPolicy", preemption, ("PreemptLowerPriority", "Never"))
                    if preemption else required("spec.preemptionPolicy"))
    return errs


def ids(sc: dict[str, Any], path: str, keys: tuple[str, ...]) -> list[FieldError]:
    """IsValidUserID / IsValidGroupID: 0..MaxInt32."""
    errs = []
    for key in keys:
        value = _int(sc, key)
        if value is not None and not 0 <= value <= MAX_ID:
            errs.append(invalid(f"{path}.{key}", value, inclusive_range(0, MAX_ID)))
    return errs


def security_context(spec: dict[str, Any]) -> list[FieldError]:
    sc = _dict(spec, "securityContext")
    if sc is None:
        return []
    path = "spec.securityContext"
    errs = ids(sc, path, ("fsGroup", "runAsUser", "runAsGroup"))
    for g, gid in _items(sc, "supplementalGroups"):
        if type(gid) is int and not 0 <= gid <= MAX_ID:
            errs.append(invalid(f"{path}.supplementalGroups[{g}]", gid, inclusive_range(0, MAX_ID)))
    if sc.get("shareProcessNamespace") is True and spec.get("hostPID") is True:
        errs.append(invalid(f"{path}.shareProcessNamespace", True, "ShareProcessNamespace and HostPID cannot both be enabled"))
    return errs


def dns_config(spec: dict[str, Any]) -> list[FieldError]:
    path = "spec.dnsConfig"
    config = _dict(spec, "dnsConfig")
    nameservers = [ns for _, ns in _items(config, "nameservers")] if config is not None else []
    if spec.get("dnsPolicy") == "None":
        if config is None:
            return [required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not nameservers:
            return [required(f"{path}.nameservers", "must provide at least one DNS nameserver when `dnsPolicy` is None")]
    if config is None:
        return []
    errs = []
    if len(nameservers) > MAX_DNS_NAMESERVERS:
        errs.append(invalid(f"{path}.nameservers", nameservers, f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"))
    for i, ns in enumerate(nameservers):
        if isinstance(ns, str):
            errs += [invalid(f"{path}.nameservers[{i}]", ns, m) for m in ip_sloppy_errors(ns)]
    searches = [s for _, s in _items(config, "searches") if isinstance(s, str)]
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        errs.append(invalid(f"{path}.searches", searches, f"must not have more than {MAX_DNS_SEARCH_PATHS} search paths"))
    if len(" ".join(searches)) > MAX_DNS_SEARCH_LIST_CHARS:
        errs.append(invalid(f"{path}.searches", searches,
                            f"must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) in the search list"))
    for i, search in _items(config, "searches"):
        if isinstance(search, str) and search != ".":
            errs += [invalid(f"{path}.searches[{i}]", search.removesuffix("."), m)
                     for m in _dns1123_subdomain_with_underscore(search.removesuffix("."))]
    for i, option in _items(config, "options"):
        if isinstance(option, dict) and not _str(option, "name"):
            errs.append(required(f"{path}.options[{i}]", "must not be empty"))
    return errs


def _dns1123_subdomain_with_underscore(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 bytes")
    if not _DNS1123_US.fullmatch(value):
        errs.append("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or "
                    f"'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                    f"validation is '{_DNS1123_US_FMT}')")
    return errs


def host_aliases(spec: dict[str, Any]) -> list[FieldError]:
    errs = []
    for i, alias in _items(spec, "hostAliases"):
        if not isinstance(alias, dict):
            continue
        ip = _str(alias, "ip") or ""
        errs += [invalid(f"spec.hostAliases[{i}].ip", ip, m) for m in ip_sloppy_errors(ip)]
        for j, host in _items(alias, "hostnames"):
            if isinstance(host, str):
                errs += [invalid(f"spec.hostAliases[{i}].hostnames[{j}]", host, m) for m in dns1123_subdomain_errors(host)]
    return errs


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def tolerations(spec: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, tol in _items(spec, "tolerations"):
        if not isinstance(tol, dict):
            continue
        path = f"spec.tolerations[{i}]"
        key, operator = _str(tol, "key") or "", _str(tol, "operator") or ""
        value, effect = _str(tol, "value") or "", _str(tol, "effect") or ""
        if key:
            errs += [invalid(f"{path}.key", key, m) for m in qualified_name_errors(key)]
        if not key and operator != "Exists":
            errs.append(invalid(f"{path}.operator", operator,
                                "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid(f"{path}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            msgs = label_value_errors(value)
            if msgs:
                errs.append(invalid(f"{path}.operator", value, ";".join(msgs)))
        elif operator == "Exists":
            if value:
                errs.append(invalid(f"{path}.operator", value, "value must be empty when `operator` is 'Exists'"))
        elif operator in ("Lt", "Gt"):
            errs.append(not_supported(f"{path}.operator", operator, ("Equal", "Exists", "Lt", "Gt")))
        else:
            errs.append(not_supported(f"{path}.operator", operator, ("Equal", "Exists")))
        if effect and effect not in _EFFECTS:
            errs.append(not_supported(f"{path}.effect", effect, _EFFECTS))
    return errs


def container_security_context(c: dict[str, Any], path: str) -> list[FieldError]:
    sc = _dict(c, "securityContext")
    if sc is None:
        return []
    errs = ids(sc, f"{path}.securityContext", ("runAsUser", "runAsGroup"))
    if sc.get("privileged") is True and sc.get("allowPrivilegeEscalation") is False:
        errs.append(invalid(f"{path}.securityContext", sc,
                            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
    return errs


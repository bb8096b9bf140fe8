"""$(VAR) expansion for env values, command and args, with the kubelet's semantics.

Follows upstream `third_party/forked/golang/expansion` exactly: `$(NAME)` is replaced when
NAME is known and left as written otherwise, `$$` is an escaped `$`, every other `$` is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from minikubelet.api.pod_objects import ObjectUnavailable, PodObjects, configmap_data, secret_data, standalone
from minikubelet.api.resource_fields import ResourceFieldError, resource_field_value

_OPERATOR = "$"
_OPENER = "("
_CLOSER = ")"


class EnvSourceError(ValueError):
    """An env var whose value comes from a source this function cannot resolve.

    The caller reports it as CreateContainerConfigError, like the kubelet does when a
    referenced ConfigMap/Secret/resource cannot be read.
    """


def expand(s: str, mapping: Mapping[str, str] | Sequence[Mapping[str, str]]) -> str:
    """Expand `$(VAR)` references in `s`; several mappings are searched in order."""
    contexts: Sequence[Mapping[str, str]] = [mapping] if isinstance(mapping, Mapping) else mapping
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    n = len(s)
    while cursor < n:
        if s[cursor] == _OPERATOR and cursor + 1 < n:
            out.append(s[checkpoint:cursor])
            read, is_var, advance = _read_variable_name(s, cursor + 1)
            out.append(_lookup(read, contexts) if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(s[checkpoint:])
    return "".join(out)


def _lookup(name: str, contexts: Sequence[Mapping[str, str]]) -> str:
    for ctx in contexts:
        if name in ctx:
            return ctx[name]
    return f"{_OPERATOR}{_OPENER}{name}{_CLOSER}"


def _read_variable_name(s: str, start: int) -> tuple[str, bool, int]:
    """What follows a `$` at s[start:]: (text, is a variable name, characters consumed)."""
    first = s[start]
    if first == _OPERATOR:
        return _OPERATOR, False, 1
    if first == _OPENER:
        close = s.find(_CLOSER, start + 1)
        if close != -1:
            return s[start + 1 : close], True, close - start + 1
        return _OPERATOR + _OPENER, False, 1
    return _OPERATOR + first, False, 1


# Env var fieldRef paths the API server allows, resolved from the pod (upstream
# podFieldSelectorRuntimeValue); labels['k'] and annotations['k'] are handled apart.
_SIMPLE_FIELD_PATHS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "metadata.uid": ("metadata", "uid"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.hostIP": ("status", "hostIP"),
    "status.podIP": ("status", "podIP"),
}


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def field_ref_value(field_path: str, pod: Mapping[str, Any], field_values: Mapping[str, str]) -> str:
    """The runtime value of a downward-API fieldRef for an env var."""
    if field_path in field_values:
        return field_values[field_path]
    if field_path in _SIMPLE_FIELD_PATHS:
        section, key = _SIMPLE_FIELD_PATHS[field_path]
        return _str(_dict(pod.get(section)).get(key))
    if field_path in ("status.podIPs", "status.hostIPs"):
        entries = _dict(pod.get("status")).get(field_path.split(".")[1])
        ips = [_str(_dict(e).get("ip")) for e in entries] if isinstance(entries, list) else []
        return ",".join(ip for ip in ips if ip)
    for prefix in ("metadata.labels", "metadata.annotations"):
        if field_path.startswith(prefix + "['") and field_path.endswith("']"):
            key = field_path[len(prefix) + 2 : -2]
            values = _dict(_dict(pod.get("metadata")).get(prefix.split(".")[1]))
            return _str(values.get(key))
    raise EnvSourceError(f"unsupported fieldRef fieldPath {field_path!r}")


def container_env(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    field_values: Mapping[str, str] | None = None,
    allocatable: Mapping[str, Fraction] | None = None,
    objects: PodObjects | None = None,
) -> list[tuple[str, str]]:
    """The container's environment, as upstream makeEnvironmentVariables computes it.

    envFrom first (ConfigMap/Secret keys with their prefix, in key order), then `env` in declaration order:
    literal values are expanded against the variables so far and the Service variables; fieldRef values come
    from `field_values` (e.g. the live "status.podIP") or else from the pod itself; configMapKeyRef and
    secretKeyRef from `objects`. A later entry with the same name replaces the earlier value but keeps its
    position. Service variables the container does not set itself come last. What cannot be resolved raises
    EnvSourceError (CreateContainerConfigError).
    """
    fields = field_values or {}
    alloc = allocatable or {}
    objs = objects if objects is not None else standalone(pod)
    if objs.service_env_error:
        raise EnvSourceError(objs.service_env_error)
    service_env = objs.service_env or {}
    resolved: dict[str, str] = {}
    env_from = container.get("envFrom")
    for source in env_from if isinstance(env_from, list) else []:
        if isinstance(source, dict):
            resolved.update(_env_from(source, objs))
    env = container.get("env")
    for item in env if isinstance(env, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name: str = item["name"]
        value = item.get("value")
        if isinstance(value, str) and value != "":
            resolved[name] = expand(value, [resolved, service_env])
            continue
        value_from = item.get("valueFrom")
        if isinstance(value_from, dict) and value_from:
            got = _value_from(name, value_from, pod, container, fields, alloc, objs)
            if got is not None:
                resolved[name] = got
        else:
            resolved[name] = ""
    for k, v in service_env.items():
        resolved.setdefault(k, v)
    return list(resolved.items())


def _optional(ref: Mapping[str, Any]) -> bool:
    return ref.get("optional") is True


def _ref_name(ref: Mapping[str, Any]) -> str:
    name = ref.get("name")
    return name if isinstance(name, str) else ""


def _env_from(source: Mapping[str, Any], objs: PodObjects) -> dict[str, str]:
    """One envFrom entry's variables ({} for an optional source that does not exist). As v1.36 (relaxed
    environment variable names), every key is passed on; the API server has validated keys and prefix."""
    prefix = source.get("prefix")
    prefix = prefix if isinstance(prefix, str) else ""
    cm_ref, secret_ref = source.get("configMapRef"), source.get("secretRef")
    try:
        if isinstance(cm_ref, dict):
            values = configmap_data(objs.configmap(_ref_name(cm_ref)))
        elif isinstance(secret_ref, dict):
            values = {k: _text(v) for k, v in secret_data(objs.secret(_ref_name(secret_ref))).items()}
        else:
            return {}
    except ObjectUnavailable as e:
        ref = cm_ref if isinstance(cm_ref, dict) else secret_ref
        if e.not_found and isinstance(ref, dict) and _optional(ref):
            return {}
        raise EnvSourceError(str(e)) from e
    return {prefix + k: values[k] for k in sorted(values)}


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def _key_ref(ref: Mapping[str, Any], objs: PodObjects, secret: bool) -> str | None:
    """configMapKeyRef / secretKeyRef: the value, or None when an optional reference has none."""
    name = _ref_name(ref)
    key = ref.get("key")
    key = key if isinstance(key, str) else ""
    optional = _optional(ref)
    try:
        if secret:
            data: Mapping[str, str] = {k: _text(v) for k, v in secret_data(objs.secret(name)).items()}
        else:
            data = configmap_data(objs.configmap(name))
    except ObjectUnavailable as e:
        if e.not_found and optional:
            return None
        raise EnvSourceError(str(e)) from e
    if key in data:
        return data[key]
    if optional:
        return None
    kind = "Secret" if secret else "ConfigMap"
    raise EnvSourceError(f"couldn't find key {key} in {kind} {objs.namespace}/{name}")


def _value_from(name: str, value_from: Mapping[str, Any], pod: Mapping[str, Any], container: Mapping[str, Any],
                fields: Mapping[str, str], allocatable: Mapping[str, Fraction], objs: PodObjects) -> str | None:
    resource_ref = value_from.get("resourceFieldRef")
    if isinstance(resource_ref, dict):
        try:
            return resource_field_value(resource_ref, pod, container, allocatable)
        except ResourceFieldError as e:
            raise EnvSourceError(f"env {name}: {e}") from e
    field_ref = value_from.get("fieldRef")
    if isinstance(field_ref, dict):
        path = field_ref.get("fieldPath")
        if not isinstance(path, str):
            raise EnvSourceError(f"env {name}: fieldRef.fieldPath must be a string")
        return field_ref_value(path, pod, fields)
    cm_ref = value_from.get("configMapKeyRef")
    if isinstance(cm_ref, dict):
        return _key_ref(cm_ref, objs, secret=False)
    secret_ref = value_from.get("secretKeyRef")
    if isinstance(secret_ref, dict):
        return _key_ref(secret_ref, objs, secret=True)
    kinds = ", ".join(sorted(value_from))
    raise EnvSourceError(f"env {name}: valueFrom source {kinds} is not supported")


def expand_command(container: Mapping[str, Any], env: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The container's command and args with $(VAR) references to its env expanded."""
    mapping = dict(env)

    def expand_all(key: str) -> list[str]:
        value = container.get(key)
        if not isinstance(value, list):
            return []
        return [expand(v, mapping) for v in value if isinstance(v, str)]

    return expand_all("command"), expand_all("args")

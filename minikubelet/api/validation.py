"""Pod validation over plain dicts, with the API server's field paths and messages.

Mirrors pkg/apis/core/validation (ValidatePodCreate) for a pod the agent did not get from the API
server (static pods). `validate_manifest` first checks every field's JSON type against the API's
schema (api/schema.py), as the API server's decoder does, then runs the rules over the defaulted
pod; wrong JSON types become FieldErrors, never exceptions. Unknown fields are kept in the pod and
reported as warnings, in the API server's strict-field-validation wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

from minikubelet.api.defaults import apply_defaults, volume_sources
from minikubelet.api.field import (
    FieldError,
    duplicate,
    forbidden,
    format_errors,
    invalid,
    key_path,
    not_found,
    not_supported,
    required,
    wrong_type,
)
from minikubelet.api.names import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    env_name_errors,
    port_name_errors,
    qualified_name_errors,
)
from minikubelet.api.schema import check_types, covered, format_path, prune
from minikubelet.api.validation_pod import container_security_context, metadata_extras, spec_extras
from minikubelet.base.quantity import QuantityError, parse_quantity

__all__ = ["FieldError", "ValidationReport", "format_errors", "validate_manifest", "validate_pod"]

_INT32_MAX = 2**31 - 1
_STANDARD_RESOURCES = frozenset((
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services",
    "replicationcontrollers", "secrets", "configmaps", "persistentvolumeclaims", "storage", "requests.storage",
    "services.nodeports", "services.loadbalancers",
))  # fmt: skip
_CONTAINER_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage"))
_STOP_SIGNALS_LINUX = frozenset(
    [f"SIG{n}" for n in (
        "ABRT ALRM BUS CHLD CLD CONT FPE HUP ILL INT IO IOT KILL PIPE POLL PROF PWR QUIT SEGV STKFLT STOP SYS "
        "TERM TRAP TSTP TTIN TTOU URG USR1 USR2 VTALRM WINCH XCPU XFSZ RTMIN RTMAX").split()]
    + [f"SIGRTMIN+{i}" for i in range(1, 16)] + [f"SIGRTMAX-{i}" for i in range(1, 15)]
)
_STOP_SIGNALS_WINDOWS = frozenset(("SIGKILL", "SIGTERM"))
_HTTP_HEADER_NAME = re.compile("[-A-Za-z0-9]+")
_HTTP_HEADER_MSG = ("a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', "
                    "regex used for validation is '[-A-Za-z0-9]+')")


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return not _is_native(name) and not name.startswith("requests.") and not qualified_name_errors("requests." + name)


def _quantity(value: object) -> Fraction | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def resource_name_errors(name: str) -> list[str]:
    """validateContainerResourceName's messages for one key of limits/requests."""
    msgs = qualified_name_errors(name)
    if msgs:
        return msgs
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not name.startswith("hugepages-"):
            msgs.append("must be a standard resource type or fully qualified")
        if name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            msgs.append("must be a standard resource for containers")
    elif not _is_native(name) and not _is_extended(name):
        msgs.append("doesn't follow extended resource name standard")
    return msgs


# ---------------------------------------------------------------- the validator


class _Validator:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.os_name: object = None  # spec.os.name: stop signals depend on it

    def add(self, err: FieldError) -> None:
        self.errors.append(err)

    # typed getters: report a type error and return None when the value has the wrong type
    def obj(self, parent: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.add(wrong_type(path, value, "an object"))
            return None
        return value

    def lst(self, parent: dict[str, Any], key: str, path: str) -> list[Any] | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            self.add(wrong_type(path, value, "a list"))
            return None
        return value

    def dict_items(self, parent: dict[str, Any], key: str, path: str) -> list[tuple[int, dict[str, Any]]]:
        items = self.lst(parent, key, path) or []
        out = []
        for i, item in enumerate(items):
            if isinstance(item, dict):
                out.append((i, item))
            else:
                self.add(wrong_type(f"{path}[{i}]", item, "an object"))
        return out

    def _typed(self, parent: dict[str, Any], key: str, path: str, ok: Callable[[object], bool], noun: str) -> Any:
        value = parent.get(key)
        if value is None:
            return None
        if not ok(value):
            self.add(wrong_type(path, value, noun))
            return None
        return value

    def string(self, parent: dict[str, Any], key: str, path: str) -> str | None:
        return cast("str | None", self._typed(parent, key, path, lambda v: isinstance(v, str), "a string"))

    def integer(self, parent: dict[str, Any], key: str, path: str) -> int | None:
        return cast("int | None", self._typed(
            parent, key, path, lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"))

    def boolean(self, parent: dict[str, Any], key: str, path: str) -> bool | None:
        return cast("bool | None", self._typed(parent, key, path, lambda v: isinstance(v, bool), "a boolean"))

    def string_map(self, parent: dict[str, Any], key: str, path: str) -> None:
        value = self.obj(parent, key, path)
        for k, v in (value or {}).items():
            if not isinstance(v, str):
                self.add(wrong_type(key_path(path, k), v, "a string"))

    # ------------------------------------------------------------ pod
    def pod(self, pod: object) -> None:
        if not isinstance(pod, dict):
            self.add(wrong_type("<root>", pod, "an object"))
            return
        metadata = self.obj(pod, "metadata", "metadata")
        self.metadata(metadata or {})
        spec = pod.get("spec")
        if spec is None:
            self.add(required("spec"))
            return
        if not isinstance(spec, dict):
            self.add(wrong_type("spec", spec, "an object"))
            return
        self.spec(spec)

    def metadata(self, md: dict[str, Any]) -> None:
        name = self.string(md, "name", "metadata.name")
        if not name:
            if "name" not in md or name == "":
                self.add(required("metadata.name", "name or generateName is required"))
        else:
            for msg in dns1123_subdomain_errors(name):
                self.add(invalid("metadata.name", name, msg))
        namespace = self.string(md, "namespace", "metadata.namespace")
        if not namespace:
            if "namespace" not in md or namespace == "":
                self.add(required("metadata.namespace"))
        else:
            for msg in dns1123_label_errors(namespace):
                self.add(invalid("metadata.namespace", namespace, msg))
        self.string_map(md, "labels", "metadata.labels")
        self.string_map(md, "annotations", "metadata.annotations")
        self.string(md, "uid", "metadata.uid")
        self.errors += metadata_extras(md)

    def spec(self, spec: dict[str, Any]) -> None:
        pod_os = spec.get("os")
        self.os_name = pod_os.get("name") if isinstance(pod_os, dict) else None
        volumes = self.volumes(spec)

        # Upstream order: volumes, containers, init containers (names checked against the
        # regular ones), ephemeral containers, then the pod-level fields.
        names: set[str] = set()
        containers = spec.get("containers")
        if containers is None or containers == []:
            self.add(required("spec.containers"))
        for i, c in self.dict_items(spec, "containers", "spec.containers"):
            self.container(c, f"spec.containers[{i}]", "regular", volumes, names)
        for i, c in self.dict_items(spec, "initContainers", "spec.initContainers"):
            self.container(c, f"spec.initContainers[{i}]", "init", volumes, names)
        others = set(names)  # an ephemeral container may target only a regular or init container
        for i, c in self.dict_items(spec, "ephemeralContainers", "spec.ephemeralContainers"):
            self.container(c, f"spec.ephemeralContainers[{i}]", "ephemeral", volumes, names)
            self.ephemeral_only(c, f"spec.ephemeralContainers[{i}]", others)
        restart = self.string(spec, "restartPolicy", "spec.restartPolicy")
        if restart is not None or "restartPolicy" not in spec:
            if not restart:
                self.add(required("spec.restartPolicy"))
            elif restart not in ("Always", "OnFailure", "Never"):
                self.add(not_supported("spec.restartPolicy", restart, ("Always", "OnFailure", "Never")))
        dns = self.string(spec, "dnsPolicy", "spec.dnsPolicy")
        policies = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
        if dns is not None and dns not in policies:
            self.add(not_supported("spec.dnsPolicy", dns, policies) if dns else required("spec.dnsPolicy"))
        grace = self.integer(spec, "terminationGracePeriodSeconds", "spec.terminationGracePeriodSeconds")
        if grace is not None and grace < 0:
            self.add(invalid("spec.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"))
        deadline = self.integer(spec, "activeDeadlineSeconds", "spec.activeDeadlineSeconds")
        if deadline is not None and not 1 <= deadline <= _INT32_MAX:
            self.add(invalid("spec.activeDeadlineSeconds", deadline, f"must be between 1 and {_INT32_MAX}, inclusive"))
        for key in ("hostNetwork", "hostPID", "hostIPC", "enableServiceLinks"):
            self.boolean(spec, key, f"spec.{key}")
        for key in ("nodeName", "serviceAccountName", "hostname", "subdomain", "schedulerName"):
            self.string(spec, key, f"spec.{key}")
        self.string_map(spec, "nodeSelector", "spec.nodeSelector")
        self.errors += spec_extras(spec)

    # ------------------------------------------------------------ volumes
    def unique_name(self, obj: dict[str, Any], path: str, names: set[str]) -> None:
        """`obj.name`: required, a DNS-1123 label, unique among `names` (which it joins)."""
        name = self.string(obj, "name", f"{path}.name")
        if not name:
            if name is not None or "name" not in obj:
                self.add(required(f"{path}.name"))
            return
        for msg in dns1123_label_errors(name):
            self.add(invalid(f"{path}.name", name, msg))
        if name in names:
            self.add(duplicate(f"{path}.name", name))
        names.add(name)

    def volumes(self, spec: dict[str, Any]) -> set[str]:
        names: set[str] = set()
        for i, vol in self.dict_items(spec, "volumes", "spec.volumes"):
            path = f"spec.volumes[{i}]"
            self.unique_name(vol, path, names)
            sources = volume_sources(vol)
            if not sources:
                self.add(required(path, "must specify a volume type"))
            for extra in sources[1:]:
                self.add(forbidden(f"{path}.{extra}", "may not specify more than 1 volume type"))
            for src in sources:
                if not isinstance(vol[src], dict):
                    self.add(wrong_type(f"{path}.{src}", vol[src], "an object"))
            empty_dir = vol.get("emptyDir")
            if isinstance(empty_dir, dict) and empty_dir.get("sizeLimit") is not None:
                limit = _quantity(empty_dir["sizeLimit"])
                if limit is not None and limit < 0:
                    self.add(forbidden(f"{path}.emptyDir.sizeLimit", "SizeLimit field must be a valid resource quantity"))
            host_path = vol.get("hostPath")
            if len(sources) == 1 and isinstance(host_path, dict):
                self.host_path(host_path, f"{path}.hostPath")
            for src in ("secret", "configMap", "downwardAPI", "projected"):
                source = vol.get(src)
                if isinstance(source, dict):
                    mode = self.integer(source, "defaultMode", f"{path}.{src}.defaultMode")
                    if mode is not None and not 0 <= mode <= 0o777:
                        self.add(invalid(f"{path}.{src}.defaultMode", mode,
                                         "must be a number between 0 and 0777 (octal), both inclusive"))
        return names

    def host_path(self, hp: dict[str, Any], path: str) -> None:
        p = self.string(hp, "path", f"{path}.path")
        if not p:
            if p is not None or "path" not in hp:
                self.add(required(f"{path}.path"))
            return
        if not p.startswith("/"):
            self.add(invalid(f"{path}.path", p, "must be an absolute path"))
        if ".." in p.split("/"):
            self.add(invalid(f"{path}.path", p, "must not contain '..'"))
        kinds = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice")
        kind = self.string(hp, "type", f"{path}.type")
        if kind is not None and kind not in kinds:
            self.add(not_supported(f"{path}.type", kind, kinds))

    # ------------------------------------------------------------ containers
    def ephemeral_only(self, c: dict[str, Any], path: str, others: set[str]) -> None:
        """Upstream validateEphemeralContainers' own rules: the target exists and is not ephemeral; no subPath
        (its bind mounts would outlive the container)."""
        target = self.string(c, "targetContainerName", f"{path}.targetContainerName")
        if target and target not in others:
            self.add(not_found(f"{path}.targetContainerName", target))
        for j, mount in enumerate(c.get("volumeMounts") or []):
            for key in ("subPath", "subPathExpr"):
                if isinstance(mount, dict) and mount.get(key):
                    self.add(forbidden(f"{path}.volumeMounts[{j}].{key}", "cannot be set for an Ephemeral Container"))

    def container(self, c: dict[str, Any], path: str, kind: str, volumes: set[str], names: set[str]) -> None:
        self.unique_name(c, path, names)
        image = self.string(c, "image", f"{path}.image")
        if image is None or image.strip() == "":
            if image is not None or "image" not in c:
                self.add(required(f"{path}.image"))
        elif image != image.strip():
            self.add(invalid(f"{path}.image", image, "must not have leading or trailing whitespace"))
        for key in ("command", "args"):
            for j, item in enumerate(self.lst(c, key, f"{path}.{key}") or []):
                if not isinstance(item, str):
                    self.add(wrong_type(f"{path}.{key}[{j}]", item, "a string"))
        self.string(c, "workingDir", f"{path}.workingDir")
        pull = self.string(c, "imagePullPolicy", f"{path}.imagePullPolicy")
        if pull and pull not in ("Always", "IfNotPresent", "Never"):
            self.add(not_supported(f"{path}.imagePullPolicy", pull, ("Always", "IfNotPresent", "Never")))
        tmp = self.string(c, "terminationMessagePolicy", f"{path}.terminationMessagePolicy")
        if tmp and tmp not in ("File", "FallbackToLogsOnError"):
            self.add(not_supported(f"{path}.terminationMessagePolicy", tmp, ("FallbackToLogsOnError", "File")))
        self.restart_policy(c, path, kind)
        sidecar = kind == "init" and c.get("restartPolicy") == "Always"
        self.ports(c, path, kind)
        self.env(c, path)
        self.resources(c, path, kind)
        self.volume_mounts(c, path, volumes)
        self.errors += container_security_context(c, path)
        for probe_key in ("livenessProbe", "readinessProbe", "startupProbe"):
            if c.get(probe_key) is None:
                continue
            if kind == "ephemeral" or (kind == "init" and not sidecar):
                what = "ephemeral containers" if kind == "ephemeral" else "init containers"
                extra = "" if kind == "ephemeral" else " without restartPolicy=Always"
                self.add(forbidden(f"{path}.{probe_key}", f"may not be set for {what}{extra}"))
                continue
            probe = self.obj(c, probe_key, f"{path}.{probe_key}")
            if probe is not None:
                self.probe(probe, f"{path}.{probe_key}", probe_key)
        if c.get("lifecycle") is not None:
            if kind == "ephemeral" or (kind == "init" and not sidecar):
                what = "ephemeral containers" if kind == "ephemeral" else "init containers"
                extra = "" if kind == "ephemeral" else " without restartPolicy=Always"
                self.add(forbidden(f"{path}.lifecycle", f"may not be set for {what}{extra}"))
            else:
                lifecycle = self.obj(c, "lifecycle", f"{path}.lifecycle") or {}
                for hook in ("postStart", "preStop"):
                    handler = self.obj(lifecycle, hook, f"{path}.lifecycle.{hook}")
                    if handler is not None:
                        self.handler(handler, f"{path}.lifecycle.{hook}", ("exec", "httpGet", "tcpSocket", "sleep"))
                self.stop_signal(lifecycle, f"{path}.lifecycle.stopSignal")

    def stop_signal(self, lifecycle: dict[str, Any], path: str) -> None:
        signal = self.string(lifecycle, "stopSignal", path)
        if signal is None:
            return
        if self.os_name is None:
            self.add(forbidden(path, "may not be set for containers with empty `spec.os.name`"))
            return
        supported = _STOP_SIGNALS_WINDOWS if self.os_name == "windows" else _STOP_SIGNALS_LINUX
        if self.os_name in ("linux", "windows") and signal not in supported:
            self.add(not_supported(path, signal, sorted(supported)))

    def restart_policy(self, c: dict[str, Any], path: str, kind: str) -> None:
        policy = self.string(c, "restartPolicy", f"{path}.restartPolicy")
        if policy is None:
            return
        if kind != "init":
            self.add(forbidden(f"{path}.restartPolicy", "may not be set for non-init containers"))
        elif policy != "Always":
            self.add(not_supported(f"{path}.restartPolicy", policy, ("Always",)))

    def ports(self, c: dict[str, Any], path: str, kind: str) -> None:
        if kind == "ephemeral" and c.get("ports"):
            self.add(forbidden(f"{path}.ports", "cannot be set on ephemeral containers"))
            return
        names: set[str] = set()
        for i, port in self.dict_items(c, "ports", f"{path}.ports"):
            ppath = f"{path}.ports[{i}]"
            name = self.string(port, "name", f"{ppath}.name")
            if name:
                for msg in port_name_errors(name):
                    self.add(invalid(f"{ppath}.name", name, msg))
                if name in names:
                    self.add(duplicate(f"{ppath}.name", name))
                names.add(name)
            container_port = self.integer(port, "containerPort", f"{ppath}.containerPort")
            if container_port is None:
                if "containerPort" not in port or port["containerPort"] is None:
                    self.add(required(f"{ppath}.containerPort"))
            elif not 1 <= container_port <= 65535:
                self.add(invalid(f"{ppath}.containerPort", container_port, "must be between 1 and 65535, inclusive"))
            host_port = self.integer(port, "hostPort", f"{ppath}.hostPort")
            if host_port and not 1 <= host_port <= 65535:
                self.add(invalid(f"{ppath}.hostPort", host_port, "must be between 1 and 65535, inclusive"))
            protocol = self.string(port, "protocol", f"{ppath}.protocol")
            if protocol is None and "protocol" not in port:
                self.add(required(f"{ppath}.protocol"))
            elif protocol is not None and protocol not in ("SCTP", "TCP", "UDP"):
                self.add(not_supported(f"{ppath}.protocol", protocol, ("SCTP", "TCP", "UDP")))

    def env(self, c: dict[str, Any], path: str) -> None:
        for i, env in self.dict_items(c, "env", f"{path}.env"):
            name = env.get("name")
            if (type(name) is str and env.get("valueFrom") is None and type(env.get("value", "")) is str
                    and not env_name_errors(name)):
                continue  # the common `name: value` entry; a pod may hold 100 000 of them
            epath = f"{path}.env[{i}]"
            name = self.string(env, "name", f"{epath}.name")
            if not name:
                if name is not None or "name" not in env:
                    self.add(required(f"{epath}.name"))
            else:
                for msg in env_name_errors(name):
                    self.add(invalid(f"{epath}.name", name, msg))
            value = self.string(env, "value", f"{epath}.value")
            value_from = self.obj(env, "valueFrom", f"{epath}.valueFrom")
            if value_from is None:
                continue
            if value:
                self.add(invalid(f"{epath}.valueFrom", "", "may not be specified when `value` is not empty"))
            present = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
                       if value_from.get(k) is not None]
            if not present:
                self.add(invalid(f"{epath}.valueFrom", "",
                                 "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
            elif len(present) > 1:
                self.add(invalid(f"{epath}.valueFrom", "",
                                 "may not have more than one field specified at a time"))
            field_ref = self.obj(value_from, "fieldRef", f"{epath}.valueFrom.fieldRef")
            if field_ref is not None:
                self.field_ref(field_ref, f"{epath}.valueFrom.fieldRef")
            for key in ("resourceFieldRef", "configMapKeyRef", "secretKeyRef"):
                self.obj(value_from, key, f"{epath}.valueFrom.{key}")
        for i, item in self.dict_items(c, "envFrom", f"{path}.envFrom"):
            if item.get("configMapRef") is None and item.get("secretRef") is None:
                self.add(invalid(f"{path}.envFrom[{i}]", "", "must specify one of: `configMapRef` or `secretRef`"))

    _ENV_FIELD_PATHS = (
        "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
        "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
    )  # fmt: skip

    def field_ref(self, ref: dict[str, Any], path: str) -> None:
        fp = self.string(ref, "fieldPath", f"{path}.fieldPath")
        if fp is None:
            if "fieldPath" not in ref:
                self.add(required(f"{path}.fieldPath"))
            return
        api_version = self.string(ref, "apiVersion", f"{path}.apiVersion")
        if api_version not in (None, "", "v1"):
            self.add(invalid(f"{path}.apiVersion", api_version, "unsupported API version"))
        if fp in self._ENV_FIELD_PATHS:
            return
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", fp)
        if m is None:
            supported = ("metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
                         "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP",
                         "status.hostIPs", "status.podIP", "status.podIPs")
            self.add(not_supported(f"{path}.fieldPath", fp, supported))

    def resources(self, c: dict[str, Any], path: str, kind: str) -> None:
        res = self.obj(c, "resources", f"{path}.resources")
        if res is None:
            return
        if kind == "ephemeral" and (res.get("limits") or res.get("requests")):
            self.add(forbidden(f"{path}.resources", "cannot be set on ephemeral containers"))
            return
        parsed: dict[str, dict[str, Any]] = {}
        for section in ("limits", "requests"):
            values = self.obj(res, section, f"{path}.resources.{section}") or {}
            parsed[section] = {}
            for rname, raw in values.items():
                rpath = key_path(f"{path}.resources.{section}", rname)
                for msg in resource_name_errors(rname):
                    self.add(invalid(rpath, rname, msg))
                try:
                    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
                        raise QuantityError(f"quantity must be a string, got {raw!r}")
                    qty = parse_quantity(raw)
                except QuantityError as exc:
                    self.add(invalid(rpath, raw, str(exc)))
                    continue
                if qty < 0:
                    self.add(invalid(rpath, raw, "must be greater than or equal to 0"))
                    continue
                if _is_extended(rname) and qty.denominator != 1:
                    self.add(invalid(rpath, raw, "must be an integer"))
                parsed[section][rname] = (qty, raw)
        for rname, (req, raw) in parsed["requests"].items():
            if rname not in parsed["limits"]:
                continue
            limit, limit_raw = parsed["limits"][rname]
            overcommit = _is_native(rname) and not rname.startswith("hugepages-")
            if req != limit and not overcommit:
                self.add(invalid(f"{path}.resources.requests", raw, f"must be equal to {rname} limit of {limit_raw}"))
            elif req > limit:
                self.add(invalid(f"{path}.resources.requests", raw, f"must be less than or equal to {rname} limit of {limit_raw}"))

    def volume_mounts(self, c: dict[str, Any], path: str, volumes: set[str]) -> None:
        seen: set[str] = set()
        for i, mount in self.dict_items(c, "volumeMounts", f"{path}.volumeMounts"):
            mpath = f"{path}.volumeMounts[{i}]"
            name = self.string(mount, "name", f"{mpath}.name")
            if not name:
                if name is not None or "name" not in mount:
                    self.add(required(f"{mpath}.name"))
            elif name not in volumes:
                self.add(not_found(f"{mpath}.name", name))
            mount_path = self.string(mount, "mountPath", f"{mpath}.mountPath")
            if not mount_path:
                if mount_path is not None or "mountPath" not in mount:
                    self.add(required(f"{mpath}.mountPath"))
            else:
                if not mount_path.startswith("/"):
                    self.add(invalid(f"{mpath}.mountPath", mount_path, "must be an absolute path"))
                if ":" in mount_path:
                    self.add(invalid(f"{mpath}.mountPath", mount_path, "must not contain ':'"))
                if mount_path in seen:
                    self.add(invalid(f"{mpath}.mountPath", mount_path, "must be unique"))
                seen.add(mount_path)
            sub_path = self.string(mount, "subPath", f"{mpath}.subPath")
            if sub_path:
                if sub_path.startswith("/"):
                    self.add(invalid(f"{mpath}.subPath", sub_path, "must be a relative path"))
                if ".." in re.split(r"[/\\]", sub_path):
                    self.add(invalid(f"{mpath}.subPath", sub_path, "must not contain '..'"))
            self.boolean(mount, "readOnly", f"{mpath}.readOnly")
            self.mount_propagation(c, mount, mpath)

    def mount_propagation(self, c: dict[str, Any], mount: dict[str, Any], mpath: str) -> None:
        mode = self.string(mount, "mountPropagation", f"{mpath}.mountPropagation")
        if mode is None:
            return
        modes = ("Bidirectional", "HostToContainer", "None")
        if mode not in modes:
            self.add(not_supported(f"{mpath}.mountPropagation", mode, modes))
        sc = c.get("securityContext")
        privileged = isinstance(sc, dict) and sc.get("privileged") is True
        if mode == "Bidirectional" and not privileged:
            self.add(forbidden(f"{mpath}.mountPropagation",
                               "Bidirectional mount propagation is available only to privileged containers"))

    # ------------------------------------------------------------ probes and handlers
    def probe(self, probe: dict[str, Any], path: str, probe_key: str) -> None:
        self.handler(probe, path, ("exec", "httpGet", "tcpSocket", "grpc"))
        for key in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
            value = self.integer(probe, key, f"{path}.{key}")
            if value is not None and value < 0:
                self.add(invalid(f"{path}.{key}", value, "must be greater than or equal to 0"))
            elif value is not None and value > _INT32_MAX:
                self.add(invalid(f"{path}.{key}", value, f"must be less than or equal to {_INT32_MAX}"))
        for key in ("periodSeconds", "timeoutSeconds", "failureThreshold", "successThreshold"):
            value = probe.get(key)
            if type(value) is int and value == 0:
                self.add(invalid(f"{path}.{key}", value, "must be greater than or equal to 1"))
        success = probe.get("successThreshold")
        if probe_key in ("livenessProbe", "startupProbe") and type(success) is int and success != 1:
            self.add(invalid(f"{path}.successThreshold", success, "must be 1"))
        grace = self.integer(probe, "terminationGracePeriodSeconds", f"{path}.terminationGracePeriodSeconds")
        if grace is not None:
            if probe_key == "readinessProbe":
                self.add(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must not be set for readinessProbes"))
            elif grace <= 0:
                self.add(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0"))

    def handler(self, h: dict[str, Any], path: str, allowed: tuple[str, ...]) -> None:
        present = [k for k in allowed if h.get(k) is not None]
        if not present:
            self.add(required(path, "must specify a handler type"))
            return
        for extra in present[1:]:
            self.add(forbidden(f"{path}.{extra}", "may not specify more than 1 handler type"))
        kind = present[0]
        action = self.obj(h, kind, f"{path}.{kind}")
        if action is None:
            return
        apath = f"{path}.{kind}"
        if kind == "exec":
            command = self.lst(action, "command", f"{apath}.command")
            if not command:
                self.add(required(f"{apath}.command"))
        elif kind in ("httpGet", "tcpSocket"):
            self.probe_port(action, f"{apath}.port")
            if kind == "httpGet":
                scheme = self.string(action, "scheme", f"{apath}.scheme")
                if scheme and scheme not in ("HTTP", "HTTPS"):
                    self.add(not_supported(f"{apath}.scheme", scheme, ("HTTP", "HTTPS")))
                self.string(action, "path", f"{apath}.path")
                for _, header in self.dict_items(action, "httpHeaders", f"{apath}.httpHeaders"):
                    name = header.get("name")
                    if isinstance(name, str) and not _HTTP_HEADER_NAME.fullmatch(name):
                        self.add(invalid(f"{apath}.httpHeaders", name, _HTTP_HEADER_MSG))
        elif kind == "grpc":
            port = self.integer(action, "port", f"{apath}.port")
            if port is None and "port" not in action:
                self.add(required(f"{apath}.port"))
            elif port is not None and not 1 <= port <= 65535:
                self.add(invalid(f"{apath}.port", port, "must be between 1 and 65535, inclusive"))
        elif kind == "sleep":
            seconds = self.integer(action, "seconds", f"{apath}.seconds")
            if seconds is not None and seconds < 0:
                self.add(invalid(f"{apath}.seconds", seconds, "must be non-negative"))

    def probe_port(self, action: dict[str, Any], path: str) -> None:
        port = action.get("port")
        if port is None:
            self.add(required(path))
        elif isinstance(port, bool) or not isinstance(port, int | str):
            self.add(wrong_type(path, port, "an integer or a port name"))
        elif isinstance(port, int):
            if not 1 <= port <= 65535:
                self.add(invalid(path, port, "must be between 1 and 65535, inclusive"))
        else:
            for msg in port_name_errors(port):
                self.add(invalid(path, port, msg))


def validate_pod(pod: dict[str, Any]) -> list[FieldError]:
    """Every rule-level problem with `pod` (expected to be defaulted first), as FieldErrors."""
    v = _Validator()
    v.pod(pod)
    return v.errors


@dataclass
class ValidationReport:
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def validate_manifest(manifest: object) -> ValidationReport:
    """A Pod manifest as written: type errors, then rule errors of the defaulted pod, on one list.

    A value of the wrong type is taken out before the rules run, so it is reported once (by the
    type check), not again as "Required" or as a rule violation of a coerced value.
    """
    types = check_types(manifest)
    report = ValidationReport(list(types.errors), types.warnings)
    if not isinstance(manifest, dict):
        return report
    defaulted = apply_defaults(manifest)
    prune(defaulted, types.bad_paths)
    bad = {format_path(p) for p in types.bad_paths}
    report.errors += [e for e in validate_pod(defaulted) if not bad or not covered(e.path, bad)]
    return report

"""The container env from ConfigMaps, Secrets and Services (upstream makeEnvironmentVariables): envFrom with
prefixes, key references, optional references, the messages of what is missing, and precedence."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from minikubelet.api.expansion import EnvSourceError, container_env, expand_command
from minikubelet.api.pod_objects import ObjectUnavailable, PodObjects, not_found, references

POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {}}


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


CM = {"metadata": {"name": "cfg"}, "data": {"MODE": "fast", "LEVEL": "3", "dotted.key": "x"},
      "binaryData": {"BIN": b64("not in env")}}
SECRET = {"metadata": {"name": "creds"}, "data": {"PASSWORD": b64("s3cr3t"), "USER": b64("admin")}}


def objects(**kw: Any) -> PodObjects:
    return PodObjects("ns", configmaps={"cfg": CM, "gone": not_found("configmap", "gone")},
                      secrets={"creds": SECRET, "nope": not_found("secret", "nope")}, **kw)


def env_of(container: dict[str, Any], objs: PodObjects | None = None) -> dict[str, str]:
    return dict(container_env(container, POD, objects=objs or objects()))


def test_env_from_configmap_and_secret_with_prefix_in_key_order() -> None:
    env = container_env({"envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "APP_"},
                                     {"secretRef": {"name": "creds"}}]}, POD, objects=objects())
    assert env == [("APP_LEVEL", "3"), ("APP_MODE", "fast"), ("APP_dotted.key", "x"), ("PASSWORD", "s3cr3t"),
                   ("USER", "admin")]


def test_key_refs_and_env_overrides_env_from() -> None:
    c = {"envFrom": [{"configMapRef": {"name": "cfg"}}],
         "env": [{"name": "MODE", "value": "slow"},
                 {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}},
                 {"name": "LVL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "LEVEL"}}},
                 {"name": "BOTH", "value": "$(MODE)-$(LVL)-$(PW)"}]}
    env = env_of(c)
    assert env["MODE"] == "slow" and env["PW"] == "s3cr3t" and env["LVL"] == "3"
    assert env["BOTH"] == "slow-3-s3cr3t"
    assert "BIN" not in env  # binaryData is only for volumes


@pytest.mark.parametrize(("ref", "message"), [
    ({"configMapKeyRef": {"name": "gone", "key": "k"}}, 'configmap "gone" not found'),
    ({"secretKeyRef": {"name": "nope", "key": "k"}}, 'secret "nope" not found'),
    ({"configMapKeyRef": {"name": "cfg", "key": "missing"}}, "couldn't find key missing in ConfigMap ns/cfg"),
    ({"secretKeyRef": {"name": "creds", "key": "missing"}}, "couldn't find key missing in Secret ns/creds"),
    ({"configMapKeyRef": {"name": "unread", "key": "k"}}, "couldn't get configMap ns/unread, no kubeClient defined"),
])
def test_missing_references_fail_with_upstreams_messages(ref: dict[str, Any], message: str) -> None:
    with pytest.raises(EnvSourceError) as e:
        env_of({"env": [{"name": "X", "valueFrom": ref}]})
    assert str(e.value) == message


def test_optional_references_to_missing_objects_or_keys_leave_the_variable_unset() -> None:
    c = {"envFrom": [{"configMapRef": {"name": "gone", "optional": True}},
                     {"secretRef": {"name": "nope", "optional": True}}],
         "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k", "optional": True}}},
                 {"name": "B", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "zz", "optional": True}}},
                 {"name": "C", "value": "c"}]}
    assert env_of(c) == {"C": "c"}


def test_optional_does_not_hide_an_error_other_than_not_found() -> None:
    objs = PodObjects("ns", configmaps={"cfg": ObjectUnavailable("failed to sync configmap cache: timed out "
                                                                  "waiting for the condition")})
    with pytest.raises(EnvSourceError, match="failed to sync configmap cache"):
        env_of({"envFrom": [{"configMapRef": {"name": "cfg", "optional": True}}]}, objs)


def test_service_env_comes_last_expands_values_and_never_replaces_the_containers_own() -> None:
    objs = objects(service_env={"WEB_SERVICE_HOST": "10.96.0.30", "KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    c = {"env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "mine"}, {"name": "URL", "value": "http://$(WEB_SERVICE_HOST)"}],
         "command": ["echo", "$(WEB_SERVICE_HOST)"]}
    env = container_env(c, POD, objects=objs)
    assert env == [("KUBERNETES_SERVICE_HOST", "mine"), ("URL", "http://10.96.0.30"),
                   ("WEB_SERVICE_HOST", "10.96.0.30")]
    assert expand_command(c, env)[0] == ["echo", "10.96.0.30"]


def test_services_not_read_yet_is_an_error_for_the_pod() -> None:
    objs = PodObjects("ns", service_env={}, service_env_error="services have not yet been read at least once, "
                                                              "cannot construct envvars")
    with pytest.raises(EnvSourceError, match="services have not yet been read"):
        env_of({"env": [{"name": "A", "value": "a"}]}, objs)


def test_a_secret_with_invalid_base64_is_a_clear_error() -> None:
    objs = PodObjects("ns", secrets={"bad": {"metadata": {"name": "bad"}, "data": {"K": "!!!"}}})
    with pytest.raises(EnvSourceError, match=r'secret "bad": data\[K\] is not valid base64'):
        env_of({"envFrom": [{"secretRef": {"name": "bad"}}]}, objs)


def test_references_cover_every_container_kind_volumes_projections_and_pull_secrets() -> None:
    pod = {"spec": {
        "imagePullSecrets": [{"name": "pull"}],
        "initContainers": [{"envFrom": [{"configMapRef": {"name": "init-cm"}}]}],
        "containers": [{"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "k"}}},
                                {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
        "ephemeralContainers": [{"envFrom": [{"secretRef": {"name": "eph"}}]}],
        "volumes": [{"name": "a", "configMap": {"name": "vol-cm"}}, {"name": "b", "secret": {"secretName": "vol-s"}},
                    {"name": "c", "projected": {"sources": [{"configMap": {"name": "p-cm"}},
                                                            {"secret": {"name": "p-s"}}, {"downwardAPI": {}}]}},
                    {"name": "d", "emptyDir": {}}]}}
    assert references(pod) == (frozenset({"init-cm", "vol-cm", "p-cm"}),
                               frozenset({"pull", "s1", "eph", "vol-s", "p-s"}))
    assert references({"spec": "junk"}) == (frozenset(), frozenset())

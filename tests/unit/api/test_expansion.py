"""$(VAR) expansion: the upstream expansion test table, plus env and command resolution."""

from __future__ import annotations

from typing import Any

import pytest

from minikubelet.api.expansion import EnvSourceError, container_env, expand, expand_command

CONTEXT = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}

CASES = [
    ("$(VAR_A)", "A"),
    ("$(VAR_A)-$(VAR_A)", "A-A"),
    ("$(VAR_A)-1", "A-1"),
    ("___$(VAR_B)___", "___B___"),
    ("___$(VAR_C)", "___C"),
    ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
    ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
    ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
    ("f000-$$VAR_A", "f000-$VAR_A"),
    ("foo\\$(VAR_C)bar", "foo\\Cbar"),
    ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
    ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
    ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
    ("$(VAR_REF)", "$(VAR_A)"),
    ("%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"),
    ("foo$(VAR_EMPTY)bar", "foobar"),
    ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
    ("f00__(VAR_A)__", "f00__(VAR_A)__"),
    ("$?_boo_$!", "$?_boo_$!"),
    ("$VAR_A", "$VAR_A"),
    ("$(VAR_DNE)", "$(VAR_DNE)"),
    ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
    ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
    ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
    ("$$$$$$$(VAR_A)", "$$$A"),
    ("$VAR_A)", "$VAR_A)"),
    ("${VAR_A}", "${VAR_A}"),
    ("$(VAR_B)_______$(A", "B_______$(A"),
    ("$(VAR_C)_______$(", "C_______$("),
    ("$(VAR_A)foobarzab$", "Afoobarzab$"),
    ("foo-\\$(VAR_A", "foo-\\$(VAR_A"),
    ("--$($($($($--", "--$($($($($--"),
    ("$($($($($--foo$(", "$($($($($--foo$("),
    ("foo0--$($($($(", "foo0--$($($($("),
    ("$(foo$$var)", "$(foo$$var)"),
    ("\n", "\n"),
    ("", ""),
    ("$", "$"),
    ("$()", "$()"),
    ("$(VAR_A)é$é", "Aé$é"),
    ("until nslookup x.$(cat /var/run/ns).svc", "until nslookup x.$(cat /var/run/ns).svc"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_expand_matches_upstream_table(text: str, expected: str) -> None:
    assert expand(text, CONTEXT) == expected


def test_expand_searches_several_mappings_in_order() -> None:
    assert expand("$(X)-$(Y)", [{"X": "first"}, {"X": "second", "Y": "y"}]) == "first-y"


POD: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "prod", "uid": "u-1", "labels": {"app": "shop"}, "annotations": {"a/b": "c"}},
    "spec": {"nodeName": "node-1", "serviceAccountName": "sa"},
    "status": {"podIP": "10.0.0.5", "hostIP": "192.168.1.2", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
}


def test_env_values_expand_against_earlier_vars_only() -> None:
    container = {"env": [
        {"name": "LATER_REF", "value": "$(PLAIN)"},
        {"name": "PLAIN", "value": "hello"},
        {"name": "CHAIN", "value": "$(PLAIN)-$(PLAIN)"},
        {"name": "EMPTY"},
        {"name": "ESCAPED", "value": "$$(PLAIN)"},
    ]}
    assert container_env(container, POD) == [
        ("LATER_REF", "$(PLAIN)"),
        ("PLAIN", "hello"),
        ("CHAIN", "hello-hello"),
        ("EMPTY", ""),
        ("ESCAPED", "$(PLAIN)"),
    ]


def test_redefined_env_var_keeps_first_position_and_takes_last_value() -> None:
    container = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)"}, {"name": "A", "value": "2"}]}
    assert container_env(container, POD) == [("A", "2"), ("B", "1")]


@pytest.mark.parametrize(
    ("field_path", "expected"),
    [
        ("metadata.name", "web"),
        ("metadata.namespace", "prod"),
        ("metadata.uid", "u-1"),
        ("spec.nodeName", "node-1"),
        ("spec.serviceAccountName", "sa"),
        ("status.podIP", "10.0.0.5"),
        ("status.hostIP", "192.168.1.2"),
        ("status.podIPs", "10.0.0.5,fd00::5"),
        ("metadata.labels['app']", "shop"),
        ("metadata.labels['missing']", ""),
        ("metadata.annotations['a/b']", "c"),
    ],
)
def test_field_ref_values_come_from_the_pod(field_path: str, expected: str) -> None:
    container = {"env": [{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": field_path}}}]}
    assert container_env(container, POD) == [("V", expected)]


def test_field_values_override_the_pod() -> None:
    container = {"env": [
        {"name": "IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
        {"name": "URL", "value": "http://$(IP):80"},
    ]}
    assert container_env(container, POD, {"status.podIP": "10.9.9.9"}) == [("IP", "10.9.9.9"), ("URL", "http://10.9.9.9:80")]


@pytest.mark.parametrize(
    "value_from",
    [
        {"configMapKeyRef": {"name": "c", "key": "k"}},
        {"secretKeyRef": {"name": "s", "key": "k"}},
        {"resourceFieldRef": {"resource": "limits.nvidia.com/gpu"}},
        {"fieldRef": {"fieldPath": "spec.containers"}},
        {"fieldRef": {"fieldPath": 5}},
    ],
)
def test_unresolvable_sources_raise_env_source_error(value_from: dict[str, Any]) -> None:
    with pytest.raises(EnvSourceError):
        container_env({"env": [{"name": "X", "valueFrom": value_from}]}, POD)


def test_env_from_raises_env_source_error() -> None:
    with pytest.raises(EnvSourceError):
        container_env({"envFrom": [{"configMapRef": {"name": "c"}}]}, POD)


def test_malformed_env_entries_are_skipped_not_fatal() -> None:
    container = {"env": ["junk", {"value": "no name"}, {"name": 5}, {"name": "OK", "value": "v"}]}
    assert container_env(container, POD) == [("OK", "v")]
    assert container_env({"env": "nope"}, POD) == []


def test_expand_command_and_args() -> None:
    container = {"command": ["sh", "-c", "echo $(MSG) $$(MSG) $(NOPE)"], "args": ["$(MSG)", 7]}
    command, args = expand_command(container, [("MSG", "hi")])
    assert command == ["sh", "-c", "echo hi $(MSG) $(NOPE)"]
    assert args == ["hi"]
    assert expand_command({}, []) == ([], [])

"""--node-labels and registerWithTaints / --register-with-taints, validated as upstream; the start-up warnings
for settings that are accepted but not implemented."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from minikubelet.config.flags import build_parser, flags_to_overrides
from minikubelet.config.kubelet_config import ConfigError, KubeletConfig, load_config, not_implemented_warnings

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def flags(*argv: str) -> KubeletConfig:
    ns = build_parser().parse_args(["run", *argv])
    return load_config(None, flags_to_overrides(ns))[0]


def test_node_labels_flag() -> None:
    cfg = flags("--node-labels", "disktype=ssd, node.kubernetes.io/pool=a,empty=,kubernetes.io/hostname=h")
    assert cfg.node_labels == {"disktype": "ssd", "node.kubernetes.io/pool": "a", "empty": "",
                               "kubernetes.io/hostname": "h"}
    assert KubeletConfig().node_labels == {}


@pytest.mark.parametrize(("value", "needle"), [
    ("kubernetes.io/role=master", "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: "
                                  "[kubernetes.io/role]"),
    ("x.k8s.io/a=b", "[x.k8s.io/a]"),
    ("bad key=v", "invalid node labels: 'bad key' - name part must consist of alphanumeric characters"),
    ("k=bad value", "invalid node labels: 'bad value' - a valid label must be an empty string"),
])
def test_node_labels_flag_rejects(value: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=r"^--node-labels: ") as e:
        flags("--node-labels", value)
    assert needle in str(e.value)


def test_register_with_taints_from_file_and_flag(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(HEADER + "registerWithTaints:\n- {key: dedicated, value: infra, effect: NoExecute}\n"
                 "- {key: gpu, effect: NoSchedule}\n")
    cfg, warnings = load_config(str(f), {})
    assert cfg.register_with_taints == ({"key": "dedicated", "value": "infra", "effect": "NoExecute"},
                                        {"key": "gpu", "value": "", "effect": "NoSchedule"})
    assert warnings == []
    cfg, _ = load_config(str(f), {"register_with_taints": "a=b:NoExecute,c:PreferNoSchedule"})
    assert cfg.register_with_taints == ({"key": "a", "value": "b", "effect": "NoExecute"},
                                        {"key": "c", "value": "", "effect": "PreferNoSchedule"})


@pytest.mark.parametrize(("value", "message"), [
    ("a=b", "--register-with-taints: invalid taint spec: a=b"),
    ("a=b=c:NoExecute", "--register-with-taints: invalid taint spec: a=b=c:NoExecute"),
    ("a=b:Sometimes", "--register-with-taints: invalid taint effect: Sometimes, unsupported taint effect"),
    ("a:NoExecute,a:NoExecute", "--register-with-taints: duplicated taints with the same key and effect: a:NoExecute"),
    ("-bad:NoExecute", "--register-with-taints: invalid taint key: name part must consist of"),
])
def test_register_with_taints_flag_rejects(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        flags(f"--register-with-taints={value}")
    assert str(e.value).startswith(message)


def test_register_with_taints_file_rejects_time_added(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(HEADER + "registerWithTaints:\n- {key: a, effect: NoExecute, timeAdded: '2024-01-01T00:00:00Z'}\n")
    with pytest.raises(ConfigError, match=r"^registerWithTaints: invalid configuration: taint\.TimeAdded is not nil$"):
        load_config(str(f), {})


def test_settings_that_do_nothing_are_warned_about() -> None:
    assert not_implemented_warnings(KubeletConfig()) == []
    cfg = replace(KubeletConfig(), node_status_update_frequency=5.0, kubeconfig="/k",
                  feature_gates={"TaintTolerationComparisonOperators": True, "Foo": False, "Bar": True})
    assert not_implemented_warnings(cfg) == [
        "featureGates Bar, Foo are accepted but not implemented: they have no effect",
    ]

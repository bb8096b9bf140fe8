"""Invalid-field cases for the adversarial corpus: the hook for the validation owner.

Each case is (short name, manifest, the field path the rejection must name). The corpus writes each as
one file and the integration test checks the agent's one log line names that path. Add cases here.
"""

from __future__ import annotations

from typing import Any

from tests.adversarial.invalid_pods import invalid_pod_cases


def _pod(**spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "c", "image": "busybox"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fieldcase"}, "spec": {"containers": containers, **spec}}


def field_cases() -> list[tuple[str, dict[str, Any], str]]:
    """These, plus every case of the validation corpus (tests/adversarial/invalid_pods.py)."""
    long_value = "v" * 100_000
    return [*_own(long_value), *invalid_pod_cases()]


def _own(long_value: str) -> list[tuple[str, dict[str, Any], str]]:
    return [
        ("port-range", _pod(containers=[{"name": "c", "image": "busybox", "ports": [{"containerPort": 70000}]}]),
         "spec.containers[0].ports[0].containerPort"),
        ("no-containers", _pod(containers=[]), "spec.containers"),
        ("container-name", _pod(containers=[{"name": "Bad_Name", "image": "busybox"}]), "spec.containers[0].name"),
        ("restart-policy", _pod(restartPolicy="Sometimes"), "spec.restartPolicy"),
        ("no-image", _pod(containers=[{"name": "c"}]), "spec.containers[0].image"),
        ("pod-name", {**_pod(), "metadata": {"name": "UPPER_case"}}, "metadata.name"),
        ("huge-name", {**_pod(), "metadata": {"name": long_value}}, "metadata.name"),
        ("env-name", _pod(containers=[{"name": "c", "image": "busybox", "env": [{"name": "", "value": long_value}]}]),
         "spec.containers[0].env[0].name"),
    ]

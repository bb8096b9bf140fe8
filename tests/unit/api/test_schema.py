"""The type check against the API's OpenAPI schema: the generated table, ranges and formats."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from minikubelet.api.pod_types import TYPES
from minikubelet.api.schema import check_types
from minikubelet.api.validation import validate_manifest
from minikubelet.sources.static_pod import make_static_pod
from tests.adversarial.invalid_pods import base_pod

ROOT = Path(__file__).resolve().parents[3]


def test_committed_table_is_generated_from_the_recorded_schema() -> None:
    generated = subprocess.run([sys.executable, str(ROOT / "scripts/gen_pod_types.py")],
                               capture_output=True, text=True, check=True).stdout
    assert generated == (ROOT / "minikubelet/api/pod_types.py").read_text()


def test_table_records_integer_formats_and_special_types() -> None:
    assert TYPES["PodSpec"]["terminationGracePeriodSeconds"] == "int64"
    assert TYPES["PodSpec"]["priority"] == "int32"
    assert TYPES["ContainerPort"]["containerPort"] == "int32"
    assert TYPES["HTTPGetAction"]["port"] == "IntOrString"
    assert TYPES["EmptyDirVolumeSource"]["sizeLimit"] == "Quantity"
    assert TYPES["ObjectMeta"]["creationTimestamp"] == "date-time"
    assert TYPES["ResourceRequirements"]["limits"] == "{}Quantity"
    assert TYPES["Capabilities"]["add"] == "[]string"


def field(path: tuple[str | int, ...], value: Any) -> list[str]:
    pod = base_pod()
    target: Any = pod
    for tok in path[:-1]:
        target = target[tok]
    target[path[-1]] = value
    return [str(e) for e in check_types(pod).errors]


@pytest.mark.parametrize(("path", "value", "expected"), [
    (("spec", "priority"), 2**31 - 1, []),
    (("spec", "priority"), -(2**31), []),
    (("spec", "priority"), 2**31,
     ["spec.priority: Invalid value: 2147483648: must be a 32-bit integer, between -2147483648 and 2147483647"]),
    (("spec", "terminationGracePeriodSeconds"), 2**63 - 1, []),
    (("spec", "terminationGracePeriodSeconds"), 30.0,
     ["spec.terminationGracePeriodSeconds: Invalid value: 30: must be an integer"]),
    (("spec", "hostNetwork"), None, []),
    (("spec", "containers", 0, "readinessProbe", "httpGet", "port"), "http", []),
    (("spec", "containers", 0, "readinessProbe", "httpGet", "port"), 2**31,
     ["spec.containers[0].readinessProbe.httpGet.port: Invalid value: 2147483648: must be a 32-bit integer, "
      "between -2147483648 and 2147483647"]),
    (("spec", "containers", 0, "resources", "limits", "cpu"), 0.5, []),
    (("spec", "containers", 0, "resources", "limits", "cpu"), "1e400",
     ['spec.containers[0].resources.limits[cpu]: Invalid value: "1e400": must be a finite quantity in range']),
    (("metadata", "creationTimestamp"), "2026-01-02T03:04:05Z", []),
    (("metadata", "creationTimestamp"), "2026-01-02",
     ['metadata.creationTimestamp: Invalid value: "2026-01-02": must be an RFC 3339 date-time (e.g. 2006-01-02T15:04:05Z)']),
    (("metadata", "labels"), {"a": None, "b": 1}, ["metadata.labels[b]: Invalid value: 1: must be a string"]),
    (("spec", "containers", 0, "command"), ["sh", None, 5], ["spec.containers[0].command[2]: Invalid value: 5: must be a string"]),
    (("spec", "containers", 0, "securityContext", "capabilities", "add"), "NET_ADMIN",
     ['spec.containers[0].securityContext.capabilities.add: Invalid value: "NET_ADMIN": must be a list']),
])  # fmt: skip
def test_types_ranges_and_formats(path: tuple[str | int, ...], value: Any, expected: list[str]) -> None:
    assert field(path, value) == expected


def test_free_form_fields_are_not_descended() -> None:
    pod = base_pod()
    pod["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:anything": {"x": [1, "y"]}}}]
    report = check_types(pod)
    assert report.errors == [] and report.unknown_fields == []


def test_a_non_object_manifest_is_one_error() -> None:
    assert [str(e) for e in validate_manifest(["a"]).errors] == ['<root>: Invalid value: ["a"]: must be an object']


def _pod_with_env(entries: int, value: str) -> dict[str, Any]:
    pod = base_pod()
    pod["spec"]["containers"][0]["env"] = [{"name": f"VAR_{i}", "value": value} for i in range(entries)]
    return pod


def test_100k_env_entries_validate_in_reasonable_time() -> None:
    pod = _pod_with_env(100_000, "v")
    start = time.thread_time()  # CPU time: a quadratic step shows, a loaded machine's waits do not
    report = validate_manifest(pod)
    elapsed = time.thread_time() - start
    assert report.errors == [] and report.warnings == []
    assert elapsed < 5.0, elapsed


def test_a_10mb_pod_validates_in_about_a_second() -> None:
    pod = _pod_with_env(50_000, "x" * 190)  # ~10 MB of JSON
    start = time.thread_time()  # CPU time, as above
    made = make_static_pod(pod, "n1", "/m/big.json")
    elapsed = time.thread_time() - start
    assert made.warnings == []
    assert elapsed < 3.0, elapsed  # measured ~0.5 s of CPU

"""The adversarial corpus: every invalid manifest is rejected with the API server's field path and
error type, on one bounded line; pods the real API server accepted are accepted without warnings."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from minikubelet.api.validation import validate_manifest
from minikubelet.base.clock import FakeClock
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.metrics import Metrics
from minikubelet.sources.file import StaticPodSource
from minikubelet.sources.static_pod import ManifestError, make_static_pod
from tests.adversarial.invalid_pods import (
    base_pod,
    finding_cases,
    invalid_pod_cases,
    invalid_pod_cases_with_reason,
    rule_cases,
    type_cases,
)
from tests.fixtures import load

CASES = invalid_pod_cases_with_reason()


def test_corpus_sizes() -> None:
    assert len(finding_cases()) == 27
    assert len(type_cases()) >= 150
    assert len(rule_cases()) >= 90
    names = [name for name, _, _ in invalid_pod_cases()]
    assert len(names) == len(set(names)) == len(CASES)


def test_base_pod_is_valid_and_runs_without_warnings() -> None:
    assert validate_manifest(base_pod()).errors == []
    assert make_static_pod(base_pod(), "n1", "/m/base.yaml").warnings == []


@pytest.mark.parametrize(("name", "pod", "path", "reason"), CASES, ids=[c[0] for c in CASES])
def test_invalid_manifest_is_rejected_with_the_field_path(name: str, pod: dict[str, Any], path: str, reason: str) -> None:
    errors = validate_manifest(pod).errors
    assert (path, reason) in [(e.path, e.reason) for e in errors], [str(e) for e in errors]
    with pytest.raises(ManifestError) as info:
        make_static_pod(pod, "n1", "/m/case.yaml")
    assert path in [e.path for e in info.value.errors]
    message = str(info.value)
    assert "\n" not in message and len(message) < 8192


def _request_and_response(name: str) -> list[dict[str, Any]]:
    exchange = load(name)
    return [exchange["request"]["body"], exchange["response"]["body"]]


VALID_UPSTREAM = [
    *_request_and_response("pod-rich-create.json"),
    load("pod-real-kubelet-rich-running.json")["response"]["body"],
    load("pod-real-kubelet-crashloopbackoff.json")["response"]["body"],
    load("pod-real-kubelet-init-errimagepull.json")["response"]["body"],
]


@pytest.mark.parametrize("pod", VALID_UPSTREAM, ids=["rich-request", "rich-response", "rich-running", "crashloop", "errimagepull"])
def test_pods_the_api_server_accepted_are_valid_and_have_no_unknown_fields(pod: dict[str, Any]) -> None:
    report = validate_manifest(copy.deepcopy(pod))
    assert report.errors == [] and report.warnings == []
    assert make_static_pod(copy.deepcopy(pod), "n1", "/m/rich.json").warnings == []


def test_unknown_fields_are_warnings_in_strict_field_validation_wording() -> None:
    pod = base_pod()
    pod["spec"]["containers"][0]["comand"] = ["sh"]
    pod["spec"]["containers"][0]["imagePullPolcy"] = "Never"
    pod["spec"]["volumes"][0]["emptyDir"]["sizeLimt"] = "1Mi"
    pod["metadata"]["lables"] = {"a": "b"}
    pod["spek"] = {}
    made = make_static_pod(pod, "n1", "/m/typo.yaml")
    assert made.warnings == [
        'unknown field "metadata.lables"',
        'unknown field "spec.containers[0].comand"',
        'unknown field "spec.containers[0].imagePullPolcy"',
        'unknown field "spec.volumes[0].emptyDir.sizeLimt"',
        'unknown field "spek"',
    ]
    assert made["spec"]["containers"][0]["image"] == pod["spec"]["containers"][0]["image"]


def test_unknown_fields_next_to_errors_do_not_hide_them() -> None:
    pod = base_pod()
    pod["spec"]["containers"][0]["comand"] = ["sh"]
    pod["spec"]["containers"][0]["tty"] = "yes"
    report = validate_manifest(pod)
    assert [str(e) for e in report.errors] == ['spec.containers[0].tty: Invalid value: "yes": must be a boolean']
    assert report.warnings == ['unknown field "spec.containers[0].comand"']


def test_all_errors_of_a_file_on_one_line_each_value_cut() -> None:
    pod = base_pod()
    pod["metadata"]["name"] = "Bad\nName" + "x" * 1_000_000
    pod["spec"]["containers"][0]["tty"] = "y" * 1_000_000
    pod["spec"]["containers"][0]["resources"]["limits"]["bad\nkey" + "k" * 10_000] = "1"
    pod["spec"]["restartPolicy"] = "Sometimes"
    with pytest.raises(ManifestError) as info:
        make_static_pod(pod, "n1", "/m/huge.yaml")
    message = str(info.value)
    assert "\n" not in message and len(message) < 8192
    assert "(truncated, 1000000 characters)" in message
    paths = [e.path for e in info.value.errors]
    assert paths[:2] == ["spec.containers[0].tty", "metadata.name"]
    assert "spec.restartPolicy" in paths


def test_type_errors_stop_coercion_by_the_static_source() -> None:
    # make_static_pod replaces a non-list `tolerations` with its own list; the type check runs first.
    pod = base_pod()
    pod["spec"]["tolerations"] = "all"
    with pytest.raises(ManifestError, match=r'spec.tolerations: Invalid value: "all": must be a list'):
        make_static_pod(pod, "n1", "/m/t.yaml")


async def test_warnings_are_logged_once_per_file_version(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Through the real parser process: the warnings cross the process boundary with the pod."""
    source = StaticPodSource(str(tmp_path), "n1", FakeClock(), Metrics(CollectorRegistry()), lambda _s, _p: None)
    manifest = tmp_path / "typo.json"
    pod = base_pod()
    pod["spec"]["containers"][0]["comand"] = ["sh"]
    manifest.write_text(json.dumps(pod))
    caplog.set_level(logging.WARNING, logger="minikubelet.static_pods")
    want = 'unknown field "spec.containers[0].comand"'
    try:
        for _ in range(3):
            pods = await source.list_once()
            assert pods is not None and len(pods) == 1
        warned = [r for r in caplog.records if getattr(r, "kv", {}).get("warning") == want]
        assert len(warned) == 1
        pod["spec"]["containers"][0]["args"] = ["x"]
        manifest.write_text(json.dumps(pod))
        await source.list_once()
        warned = [r for r in caplog.records if getattr(r, "kv", {}).get("warning") == want]
        assert len(warned) == 2
    finally:
        await source.parser.close()

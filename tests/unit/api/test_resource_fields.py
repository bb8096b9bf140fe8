"""D11: resourceFieldRef env values as upstream resource.ExtractResourceValueByContainerNameAndNodeAllocatable
(convertResourceCPUToString / convertResourceMemoryToString: divided by the divisor, rounded up; an unset limit
is the node's allocatable)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from minikubelet.api.expansion import EnvSourceError, container_env
from minikubelet.api.resource_fields import ResourceFieldError, resource_field_value

ALLOC = {"cpu": Fraction(2), "memory": Fraction(8 * 2**30), "ephemeral-storage": Fraction(50 * 10**9)}
APP: dict[str, Any] = {"name": "app", "resources": {"limits": {"memory": "128Mi", "cpu": "500m"},
                                                    "requests": {"memory": "64Mi", "cpu": "250m"}}}
BARE: dict[str, Any] = {"name": "bare"}
POD: dict[str, Any] = {"spec": {"containers": [APP, BARE]}}


@pytest.mark.parametrize(("container", "ref", "want"), [
    (APP, {"resource": "limits.memory", "divisor": "1Mi"}, "128"),
    (APP, {"resource": "limits.memory"}, str(128 * 2**20)),
    (APP, {"resource": "limits.memory", "divisor": "100M"}, "2"),  # 134217728 / 1e8, rounded up
    (APP, {"resource": "limits.cpu", "divisor": "1m"}, "500"),
    (APP, {"resource": "limits.cpu"}, "1"),  # 0.5 core rounded up
    # an unset divisor as the API server serialises it (`divisor: "0"`): read as 1, as upstream does
    (APP, {"resource": "limits.cpu", "divisor": "0"}, "1"),
    (APP, {"resource": "limits.memory", "divisor": "0"}, str(128 * 2**20)),
    (APP, {"resource": "requests.cpu", "divisor": "1m"}, "250"),
    (APP, {"resource": "requests.memory", "divisor": "1Mi"}, "64"),
    (BARE, {"resource": "limits.memory", "divisor": "1Mi"}, "8192"),  # node allocatable
    (BARE, {"resource": "limits.cpu", "divisor": "1m"}, "2000"),
    (BARE, {"resource": "limits.ephemeral-storage", "divisor": "1G"}, "50"),
    (BARE, {"resource": "requests.memory"}, "0"),
    (BARE, {"resource": "limits.memory", "divisor": "1Mi", "containerName": "app"}, "128"),
])
def test_resource_field_values(container: dict[str, Any], ref: dict[str, Any], want: str) -> None:
    assert resource_field_value(ref, POD, container, ALLOC) == want


@pytest.mark.parametrize("ref", [{"resource": "limits.gpu"}, {"resource": "limits.memory", "containerName": "x"},
                                 {"resource": "limits.memory", "divisor": "-1Mi"}])
def test_bad_references_are_errors(ref: dict[str, Any]) -> None:
    with pytest.raises(ResourceFieldError):
        resource_field_value(ref, POD, APP, ALLOC)


def test_env_from_a_resource_field_no_longer_fails_the_container() -> None:
    c = dict(APP, env=[{"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                                              "divisor": "1Mi"}}},
                       {"name": "BAD", "valueFrom": {"resourceFieldRef": {"resource": "limits.nope"}}}])
    with pytest.raises(EnvSourceError, match="env BAD"):
        container_env(c, POD, {}, ALLOC)
    c["env"] = c["env"][:1]
    assert container_env(c, POD, {}, ALLOC) == [("MEM", "128")]

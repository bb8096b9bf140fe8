"""The final status of a pod whose worker has finished with it (upstream status_manager.go TerminatePod).

The runtime may no longer know some of the pod's containers (never created, removed, lost with the node's
state), so a container without a terminated state is reported as failed instead of waiting forever: a pod
that stays non-terminal is never deleted for good. Pure: the status manager stores what this returns.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.status.generate import TERMINAL_PHASES

UNKNOWN_REASON = "ContainerStatusUnknown"
UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"
UNKNOWN_EXIT_CODE = 137

Json = dict[str, Any]


def _state(cs: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    s = cs.get(key)
    return s if isinstance(s, Mapping) else {}


def _terminated(cs: Mapping[str, Any], key: str = "state") -> Mapping[str, Any] | None:
    t = _state(cs, key).get("terminated")
    return t if isinstance(t, Mapping) else None


def _waiting(cs: Mapping[str, Any]) -> bool:
    return isinstance(_state(cs, "state").get("waiting"), Mapping)


def _statuses(status: Mapping[str, Any], key: str) -> list[Any]:
    out = status.get(key)
    return out if isinstance(out, list) else []


def has_pod_initialized(pod: Pod) -> bool:
    """upstream hasPodInitialized, on the pod's own (API) status: the pod shows evidence that its regular
    containers were started, so a missing one of them is a failure rather than one that never had its turn."""
    inits = podview.init_containers(pod)
    if not inits:
        return True
    api = pod.get("status")
    if not isinstance(api, Mapping):
        api = {}
    for cs in _statuses(api, "containerStatuses"):
        if isinstance(cs, Mapping) and (_terminated(cs, "lastState") is not None or not _waiting(cs)):
            return True
    init_statuses = [cs for cs in _statuses(api, "initContainerStatuses") if isinstance(cs, Mapping)]
    if not init_statuses:
        return False
    last = len(init_statuses) - 1
    cs = init_statuses[last]
    if last >= len(inits) or inits[last].get("name") != cs.get("name"):
        return False  # spec and status disagree (upstream GetContainerByIndex)
    if inits[last].get("restartPolicy") == "Always":  # a sidecar: running and started
        return isinstance(_state(cs, "state").get("running"), Mapping) and cs.get("started") is True
    return any((t := _terminated(cs, key)) is not None and t.get("exitCode") == 0 for key in ("lastState", "state"))


def initialized_containers(statuses: Sequence[Any]) -> int:
    """upstream initializedContainers: how many init statuses, from the first, have tried to start (all but
    the trailing ones still waiting without a last termination); at least one when there are any."""
    for i in range(len(statuses) - 1, -1, -1):
        cs = statuses[i]
        if isinstance(cs, Mapping) and (not _waiting(cs) or _terminated(cs, "lastState") is not None):
            return i + 1
    return 1 if statuses else 0


def _unknown(cs: Any) -> Any:
    if not isinstance(cs, dict) or _terminated(cs) is not None:
        return cs
    return {**cs, "state": {"terminated": {"exitCode": UNKNOWN_EXIT_CODE, "reason": UNKNOWN_REASON,
                                           "message": UNKNOWN_MESSAGE, "startedAt": None, "finishedAt": None}}}


def terminated_pod_status(pod: Pod, status: Mapping[str, Any]) -> Json:
    """upstream TerminatePod's status: once the pod has initialized, every regular container not terminated
    is terminated 137 ContainerStatusUnknown; so is every init container of the prefix that tried to start;
    the phase becomes Failed unless already terminal (a static pod keeps its phase, as upstream)."""
    out: Json = copy.deepcopy(dict(status))
    if has_pod_initialized(pod) and isinstance(out.get("containerStatuses"), list):
        out["containerStatuses"] = [_unknown(cs) for cs in out["containerStatuses"]]
    inits = _statuses(out, "initContainerStatuses")
    if inits:
        n = initialized_containers(inits)
        out["initContainerStatuses"] = [_unknown(cs) for cs in inits[:n]] + inits[n:]
    if not podview.is_static(pod) and out.get("phase") not in TERMINAL_PHASES:
        out["phase"] = "Failed"
    return out

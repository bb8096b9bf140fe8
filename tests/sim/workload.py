"""The workload: a seed's trace of events, generated up front so a trace can be replayed and shrunk without the
seed. Each event names its target by a pick (an index into what exists when it runs), not by an id, so dropping
earlier events leaves the later ones meaningful."""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from cri.fake import Program
from minikubelet.api.defaults import apply_defaults
from minikubelet.base.podview import Pod
from tests.sim.shapes import SIDECAR, decorate

IMAGE = "busybox:1.36"
# a container's name says how its process behaves (FakeRuntime programs are set by container name)
PROGRAMS: dict[str, Program] = {
    "run": Program(),
    "crash": Program(exit_on_start=1),
    "done": Program(exit_on_start=0),
    "stubborn": Program(ignore_stop_signal=True),
    "nostart": Program(start_error="exec: no such file"),
}
INIT_PROGRAMS: dict[str, Program] = {"init-ok": Program(exit_on_start=0), "init-crash": Program(exit_on_start=1)}
MAX_CONTAINERS = 3
GRACES = (0, 1, 2, 5, 30)
NODE = "node-1"  # the simulated node (tests/sim/api.py)
NAMES = 6  # pod names are reused: a new pod waits for the old one of its name to finish
FAULT_OPS = ("run_pod_sandbox", "start_pod_sandbox", "create_container", "start_container", "stop_container",
             "remove_container", "stop_pod_sandbox", "remove_pod_sandbox", "list_summaries", "container_status",
             "list_containers", "pod_sandbox_status")
HANG_OPS = ("run_pod_sandbox", "create_container", "start_container", "stop_container", "list_summaries")
# every call the agent makes of the runtime: all refused while it restarts
RUNTIME_OPS = (*FAULT_OPS, "container_logs", "container_stats", "exec_sync", "image_status", "list_images",
               "list_pod_sandboxes", "pull_image", "remove_image", "runtime_config", "update_container_resources",
               "version")


@dataclass(frozen=True)
class Event:
    # create | delete | exit | vanish | fail | hang | crash | wait | unhealthy | pressure | shutdown | runtime-restart
    # (and the api-* events of tests/sim/api_workload.py)
    kind: str
    a: int = 0
    b: int = 0
    dt: float = 0.0  # virtual seconds run after the event

    def __str__(self) -> str:
        return f"Event({self.kind!r}, {self.a}, {self.b}, {self.dt})"


# kind -> weight; crash is rare enough that most runs see a pod through its whole life
WEIGHTS: dict[str, int] = {"create": 20, "delete": 12, "exit": 14, "vanish": 4, "fail": 8, "hang": 3, "crash": 2,
                           "wait": 10, "unhealthy": 3, "pressure": 3, "shutdown": 1, "runtime-restart": 1}
_KINDS = list(WEIGHTS)
_CUM = [sum(list(WEIGHTS.values())[: i + 1]) for i in range(len(WEIGHTS))]


def generate(seed: int, steps: int) -> list[Event]:
    rng = random.Random(seed)
    out: list[Event] = []
    for _ in range(steps):
        kind = rng.choices(_KINDS, cum_weights=_CUM)[0]
        dt = rng.choice((0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0))
        if kind == "exit":
            b = rng.choice((0, 1, 2, -1))  # -1: OOM-killed
        elif kind == "fail":
            b = rng.choice((1, 1, 2, 5))
        elif kind == "hang":
            b = rng.choice((1, 5, 20, 60))  # how long the call hangs
        elif kind == "create":
            b = 0 if rng.random() < 0.15 else 1  # 0: the plain shape of the first traces (no probes, hooks...)
        elif kind == "runtime-restart":
            b = rng.choice((2, 10, 40))  # seconds the runtime refuses every call; `a` odd: without live-restore
        elif kind == "pressure":
            b = rng.randrange(7)  # which signal and how far: tests/sim/pressure.py LEVELS
        else:
            b = 0
        out.append(Event(kind, rng.randrange(1 << 16), b, dt))
    from tests.sim.api_workload import mix  # pods through the API and its faults, from a random stream of their own

    return mix(seed, out)


def pod_for(n: int, shape: int, decorated: bool = False) -> Pod:
    """Pod number `n` of a run, of the shape drawn from `shape`; `decorated`: with probes, hooks, sidecars,
    resources, volumes, priority and maybe the API as its source (tests/sim/shapes.py), else a static pod of
    containers and an init container only (the shape regression traces of the first rounds were drawn with)."""
    rng = random.Random(shape)
    kinds = list(PROGRAMS)
    containers = [{"name": f"{rng.choice(kinds)}-{i}", "image": IMAGE} for i in range(rng.randint(1, MAX_CONTAINERS))]
    spec: dict[str, Any] = {"containers": containers,
                            "restartPolicy": rng.choice(("Always", "OnFailure", "Never")),
                            "terminationGracePeriodSeconds": rng.choice(GRACES)}
    if rng.random() < 0.3:
        spec["initContainers"] = [{"name": f"{rng.choice(list(INIT_PROGRAMS))}-0", "image": IMAGE}]
    source = decorate(spec, rng) if decorated else "file"
    annotations = {"kubernetes.io/config.source": source}
    if source == "file":  # as the file source builds a static pod: its hash (its uid), bound to the node
        annotations["kubernetes.io/config.hash"] = f"uid-{n}"
        spec["nodeName"] = NODE
    pod: Pod = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"p{n % NAMES}", "namespace": "default", "uid": f"uid-{n}",
                             "annotations": annotations},
                "spec": spec}
    return apply_defaults(copy.deepcopy(pod))


def programs() -> dict[str, Program]:
    """Every container name a pod can have, with its program."""
    out: dict[str, Program] = {}
    for kind, prog in PROGRAMS.items():
        for i in range(MAX_CONTAINERS):
            out[f"{kind}-{i}"] = prog
    for kind, prog in INIT_PROGRAMS.items():
        out[f"{kind}-0"] = prog
    for i in range(2):
        out[f"{SIDECAR}-{i}"] = PROGRAMS["run"]
    return out

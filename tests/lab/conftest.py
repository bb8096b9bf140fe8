"""The lab: two guests booted once per session, joined to one test API server on the lab bridge.

Only scripts/test-lab sets MKL_LAB_IMAGE (and runs pytest inside the lab's network namespace); without
it every lab test is skipped, so `scripts/test` passes over this directory.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from tests.apiserver import ApiServer
from tests.lab import provision, snapshot
from tests.lab.guest import Guest, Image

API_PORT = 6443


@dataclass
class Lab:
    api: ApiServer
    guests: list[Guest]
    token: str
    timings: dict[str, float] = field(default_factory=dict)


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        pytest.skip(f"{name} is not set: the lab runs through scripts/test-lab")
    return value


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def lab() -> AsyncIterator[Lab]:
    image = Image(Path(_env("MKL_LAB_IMAGE")))
    wheels = Path(_env("MKL_LAB_WHEELS"))
    rundir = Path(_env("MKL_LAB_RUN"))
    subnet = _env("MKL_LAB_SUBNET")
    taps = _env("MKL_LAB_TAPS").split(",")
    guests = [Guest(image, rundir, f"lab-{i}", i, subnet=subnet, tap=tap) for i, tap in enumerate(taps, 1)]
    timings: dict[str, float] = {}
    # kube-controller-manager's node IPAM gives each Node a podCIDR for the agents' --pod-network=host-gw
    api = ApiServer(rundir / "api", host=f"{subnet}.1", port=API_PORT, max_watch_seconds=30,
                    cluster_cidrs=(provision.CLUSTER_CIDR,))
    # the network add-on's grant (flannel's ClusterRole): the routes need every Node, not only its own
    api.authorizer.grant("system:nodes", "nodes", ("get", "list", "watch"))
    await api.start()
    try:
        t0 = time.monotonic()
        await snapshot.prepared_overlays(guests, wheels, Path(_env("MKL_LAB_CACHE")), rundir, timings)
        t1 = time.monotonic()
        await asyncio.gather(*(g.boot(loadvm=snapshot.SNAPSHOT) for g in guests))
        waited = await asyncio.gather(*(g.wait_ssh() for g in guests))
        await asyncio.gather(*(g.set_clock() for g in guests))
        timings["snapshot restored to ssh (both guests, max)"] = max(waited)
        timings["restore + clock"] = time.monotonic() - t1
        t1 = time.monotonic()
        await asyncio.gather(*(provision.import_test_images(g, rundir) for g in guests))
        timings["test images into the guests' engines"] = time.monotonic() - t1
        token = api.add_bootstrap_token().token
        assert token is not None
        t1 = time.monotonic()
        outputs = await asyncio.gather(*(provision.provision_worker(g, wheels, api.url, api.ca.cert_pem, token)
                                         for g in guests))
        for g, out in zip(guests, outputs, strict=True):
            (rundir / f"{g.name}-provision.log").write_text(out)
        timings["lab/provision-worker.sh (venv, join, unit active)"] = time.monotonic() - t1
        timings["lab up"] = time.monotonic() - t0
        yield Lab(api, guests, token, timings)
    finally:
        await asyncio.gather(*(g.kill() for g in guests))
        await api.stop()
        (rundir / "timings.txt").write_text("".join(f"{k}: {v:.1f}s\n" for k, v in timings.items()))

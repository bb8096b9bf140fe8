"""Issue 17 item 4, the agent: SIGKILLed while a pod is terminating, pods deleted, added and changed in the API
while it is down, then started again on the same root dir.

As upstream after a restart: a pod deleted meanwhile (gracefully, or forced out of the API) is stopped, a pod
added is started, a pod whose container image changed gets its container replaced (restartCount 1), an
unchanged pod is left running untouched, and the pod that was terminating at the crash is not started again: it
is killed again with its deletion's grace period, counted from the restart (upstream's pod workers take
DeletionGracePeriodSeconds afresh; nothing keeps the time already spent: docs/resilience.md), and is then
removed from the API.
"""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from cri.types import ContainerState, ContainerStatus
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError, Client
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent
from tests.integration.recovery import api_pod, api_pod_running, node_ready
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view
api = agent_env.api

pytestmark = pytest.mark.integration

OTHER_TAG = "busybox:1.28"  # the same image under another name (scripts/images/build): a changed spec
GRACE = 15


def cid_of(pod: dict[str, Any]) -> str:
    return str(pod["status"]["containerStatuses"][0]["containerID"])


async def gone(admin: Client, name: str) -> bool:
    try:
        await admin.get("pods", name, "default")
    except ApiStatusError as e:
        return e.reply.status == 404
    return False


async def containers_of(view: RuntimeView, name: str) -> list[ContainerStatus]:
    return await view.runtime.list_containers({"io.kubernetes.pod.name": name})


async def test_agent_restart_reconciles_what_changed_meanwhile(tmp_path: Path, api: ApiServer,
                                                               docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    a = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    a.extra = {"nodeStatusUpdateFrequency": "2s"}
    admin = api.admin()
    a.start()
    try:
        await a.wait_for("the Node Ready", lambda: node_ready(admin, a.node, "True"), timeout=60)
        stubborn = api_pod("terminating", a.node)
        stubborn["spec"]["terminationGracePeriodSeconds"] = GRACE
        # notes SIGTERM in its log and carries on
        stubborn["spec"]["containers"][0]["command"] = [
            "sh", "-c", "trap 'echo got-TERM' TERM; while true; do sleep 1; done"]
        for pod in (api_pod("steady", a.node), api_pod("deleted", a.node), api_pod("forced", a.node),
                    api_pod("changed", a.node), stubborn):
            await admin.create(pod)
        before: dict[str, dict[str, Any]] = {}
        for n in ("steady", "deleted", "forced", "changed", "terminating"):
            before[n] = await a.wait_for(f"{n} Running", functools.partial(api_pod_running, admin, n, 0), timeout=60)

        # the deletion starts, the agent sends SIGTERM, and the agent dies
        deleted_at = time.monotonic()
        await admin.delete("pods", "terminating", "default", grace=GRACE)

        async def got_term() -> bool:
            return b"got-TERM" in await runtime_view.logs(cid_of(before["terminating"]))

        await a.wait_for("the SIGTERM in the terminating container", got_term, timeout=15, interval=0.2)
        a.kill9()

        # meanwhile, in the API
        await admin.delete("pods", "deleted", "default", grace=2)
        await admin.delete("pods", "forced", "default", grace=0)
        assert await gone(admin, "forced")
        await admin.patch("pods", "changed", {"spec": {"containers": [{"name": "main", "image": OTHER_TAG}]}},
                          "default")
        await admin.create(api_pod("added", a.node))
        await asyncio.sleep(2)
        restarted_at = time.monotonic()
        a.start()

        # the terminating pod: not started again; killed with its deletion's grace period again, as upstream's pod
        # workers do after a restart (DeletionGracePeriodSeconds; nothing remembers the time already spent)
        seen: set[str] = set()

        async def dead() -> float | None:
            found = {c.id: c.state for c in await containers_of(runtime_view, "terminating")}
            seen.update(found)
            state = found.get(runtime_view.bare(cid_of(before["terminating"])))  # None: removed with its pod
            return None if state is ContainerState.RUNNING else time.monotonic()

        died_at = await a.wait_for("the terminating container dead", dead, timeout=GRACE + 20)
        # the upper bound includes the agent process's start: 22-23 s in all here at load ~40 (2026-11-24, both
        # runtimes); a full second grace on top of the time already spent would be 2 * GRACE
        assert GRACE - 1 <= died_at - restarted_at <= GRACE + 10, (died_at - deleted_at, died_at - restarted_at)
        await a.wait_for("the terminating pod gone from the API", lambda: gone(admin, "terminating"), timeout=30)
        # not started again: no other container was created for it
        assert seen <= {runtime_view.bare(cid_of(before["terminating"]))}, seen

        await a.wait_for("deleted gone from the API", lambda: gone(admin, "deleted"), timeout=30)

        async def stopped(name: str) -> bool:
            return not any(c.state is ContainerState.RUNNING for c in await containers_of(runtime_view, name))

        await a.wait_for("deleted's containers stopped", lambda: stopped("deleted"), timeout=30)
        await a.wait_for("forced's containers stopped", lambda: stopped("forced"), timeout=30)
        await a.wait_for("added Running", lambda: api_pod_running(admin, "added", 0), timeout=60)
        changed = await a.wait_for("changed replaced", lambda: api_pod_running(admin, "changed", 1), timeout=60)
        if runtime_view.name == "docker":  # the name the container was created with
            inspect = await (await docker.containers.get(runtime_view.bare(cid_of(changed)))).show()
            assert inspect["Config"]["Image"] == OTHER_TAG
        else:  # containerd names the image by its first repo tag, whichever tag the spec used
            other = await runtime_view.runtime.image_status(OTHER_TAG)
            assert other is not None and (await runtime_view.status(cid_of(changed))).image in other.repo_tags
        assert cid_of(changed) != cid_of(before["changed"])
        steady = await admin.get("pods", "steady", "default")
        assert cid_of(steady) == cid_of(before["steady"])
        assert steady["status"]["containerStatuses"][0]["restartCount"] == 0
        assert await runtime_view.running(cid_of(steady))
    finally:
        await agent_env.stop_and_clean(a, docker)

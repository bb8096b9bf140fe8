"""Issue 3 end to end: seed manifests and lifecycle rules on the real agent and Docker Engine."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.runtime_view import ExitWatch, RuntimeView

pytestmark = pytest.mark.integration
agent = agent_env.agent
runtime_view = views.runtime_view


def phase(p: dict[str, Any]) -> str:
    return str(p["status"].get("phase"))


def state_of(p: dict[str, Any], name: str) -> str:
    return next(iter(cstatus(p, name)["state"]), "")


def waiting_reason(p: dict[str, Any], name: str) -> str:
    return str(cstatus(p, name)["state"].get("waiting", {}).get("reason", ""))


def cond(p: dict[str, Any], t: str) -> dict[str, Any]:
    return next(c for c in p["status"]["conditions"] if c["type"] == t)


async def events_for(a: AgentProcess, uid: str) -> list[dict[str, Any]]:
    return list((await a.get_json(f"/debug/events?uid={uid}"))["items"])


async def test_m01_single_container_pod(agent: AgentProcess) -> None:
    agent.put("nginx.yaml", simple_pod("nginx", [{
        "name": "nginx", "command": ["sh", "-c", "mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p 80 -h /www"],
        "ports": [{"containerPort": 80}]}]))
    agent.start()
    p = await agent.wait_pod("nginx", lambda p: phase(p) == "Running" and cstatus(p, "nginx")["ready"], "Running+ready")
    assert p["status"]["qosClass"] == "BestEffort"
    assert all(c["status"] == "True" for c in p["status"]["conditions"])
    assert p["spec"]["restartPolicy"] == "Always" and p["spec"]["terminationGracePeriodSeconds"] == 30
    assert p["spec"]["containers"][0]["ports"][0]["protocol"] == "TCP"


async def test_m04_init_containers_run_in_order(agent: AgentProcess) -> None:
    # M04 without cluster DNS: the init containers wait on files instead of Service names.
    agent.put("myapp.yaml", simple_pod(
        "myapp-pod",
        [{"name": "myapp-container", "command": ["sh", "-c", "echo The app is running! && sleep 3600"]}],
        initContainers=[
            {"name": "init-myservice", "image": agent_env.BUSYBOX, "imagePullPolicy": "IfNotPresent",
             "command": ["sh", "-c", "until [ -f /work/myservice ]; do echo waiting for myservice; sleep 0.2; done"],
             "volumeMounts": [{"name": "work", "mountPath": "/work"}]},
            {"name": "init-mydb", "image": agent_env.BUSYBOX, "imagePullPolicy": "IfNotPresent",
             "command": ["sh", "-c", "until [ -f /work/mydb ]; do echo waiting for mydb; sleep 0.2; done"],
             "volumeMounts": [{"name": "work", "mountPath": "/work"}]},
        ],
        volumes=[{"name": "work", "emptyDir": {}}],
    ))
    agent.start()
    p = await agent.wait_pod("myapp-pod", lambda p: state_of(p, "init-myservice") == "running", "init 1 running")
    assert phase(p) == "Pending"
    assert waiting_reason(p, "init-mydb") == "PodInitializing"
    assert waiting_reason(p, "myapp-container") == "PodInitializing"
    assert cond(p, "Initialized")["status"] == "False"
    assert not cstatus(p, "myapp-container")["ready"]
    # Init:0/2 → unblock the first one; the second starts only after the first exits 0
    work = agent.root / "pods" / p["metadata"]["uid"] / "volumes" / "kubernetes.io~empty-dir" / "work"
    (work / "myservice").touch()
    p = await agent.wait_pod("myapp-pod", lambda p: state_of(p, "init-mydb") == "running", "init 2 running")
    assert cstatus(p, "init-myservice")["state"]["terminated"]["reason"] == "Completed"
    assert cstatus(p, "init-myservice")["ready"] is True
    assert waiting_reason(p, "myapp-container") == "PodInitializing"
    (work / "mydb").touch()
    p = await agent.wait_pod("myapp-pod", lambda p: phase(p) == "Running" and cstatus(p, "myapp-container")["ready"],
                             "Running")
    assert cond(p, "Initialized")["status"] == "True"
    evs = await events_for(agent, p["metadata"]["uid"])
    started = [e["involvedObject"]["fieldPath"] for e in evs if e["reason"] == "Started"]
    assert started == ["spec.initContainers{init-myservice}", "spec.initContainers{init-mydb}",
                       "spec.containers{myapp-container}"]


SIDECAR_APP = simple_pod(
    "myapp",
    [{"name": "myapp", "command": ["sh", "-c", "while true; do echo logging >> /opt/logs.txt; sleep 1; done"],
      "volumeMounts": [{"name": "data", "mountPath": "/opt"}]}],
    initContainers=[{"name": "logshipper", "image": agent_env.BUSYBOX, "imagePullPolicy": "IfNotPresent",
                     "restartPolicy": "Always", "command": ["sh", "-c", "exec tail -F /opt/logs.txt"],
                     "volumeMounts": [{"name": "data", "mountPath": "/opt"}]}],
    volumes=[{"name": "data", "emptyDir": {}}],
    terminationGracePeriodSeconds=5,
)


async def test_m06_sidecar_first_restarted_alone_stopped_last(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    agent.put("myapp.yaml", SIDECAR_APP)
    agent.start()
    p = await agent.wait_pod("myapp", lambda p: phase(p) == "Running" and cstatus(p, "myapp")["ready"], "Running")
    side = cstatus(p, "logshipper")
    assert side["started"] and side["ready"] and cond(p, "ContainersReady")["status"] == "True"
    side_c = await runtime_view.status(container_id(p, "logshipper"))
    app_c = await runtime_view.status(container_id(p, "myapp"))
    assert side_c.started_at < app_c.started_at
    # killing the sidecar restarts only the sidecar
    await runtime_view.runtime.stop_container(side_c.id, timeout=0)  # SIGKILL
    p = await agent.wait_pod("myapp", lambda p: cstatus(p, "logshipper")["restartCount"] == 1
                             and state_of(p, "logshipper") == "running", "sidecar restarted")
    assert cstatus(p, "myapp")["restartCount"] == 0 and container_id(p, "myapp") == app_c.id
    assert phase(p) == "Running"
    # on delete the app container stops first, the sidecar after it
    side_id, app_id = container_id(p, "logshipper"), app_c.id
    sub = ExitWatch(runtime_view, side_id, app_id)
    (agent.manifests / "myapp.yaml").unlink()
    order = [e.container_id for e in await sub.all(30)]
    assert order == [app_id, side_id]
    await agent.wait_gone("myapp")


async def test_m07_job_with_sidecar_succeeds(agent: AgentProcess) -> None:
    agent.put("myjob.yaml", simple_pod(
        "myjob",
        [{"name": "myjob", "command": ["sh", "-c", 'echo "logging" > /opt/logs.txt'],
          "volumeMounts": [{"name": "data", "mountPath": "/opt"}]}],
        initContainers=[{"name": "logshipper", "image": agent_env.BUSYBOX, "imagePullPolicy": "IfNotPresent",
                         "restartPolicy": "Always", "command": ["sh", "-c", "exec tail -F /opt/logs.txt"],
                         "volumeMounts": [{"name": "data", "mountPath": "/opt"}]}],
        volumes=[{"name": "data", "emptyDir": {}}],
        restartPolicy="Never", terminationGracePeriodSeconds=3,
    ))
    agent.start()
    p = await agent.wait_pod("myjob", lambda p: phase(p) == "Succeeded" and state_of(p, "logshipper") == "terminated",
                             "Succeeded with the sidecar stopped", timeout=60)
    assert cstatus(p, "myjob")["state"]["terminated"]["exitCode"] == 0
    assert cstatus(p, "logshipper")["state"]["terminated"]["exitCode"] in (137, 143)
    assert cond(p, "Ready")["reason"] == "PodCompleted"
    await asyncio.sleep(1.5)
    again = await agent.pod("myjob")
    assert again is not None and phase(again) == "Succeeded" and cstatus(again, "logshipper")["restartCount"] == 0


async def test_m02_shell_ignoring_sigterm_is_killed_after_30s(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    agent.put("hello.yaml", simple_pod(
        "hello", [{"name": "hello", "command": ["sh", "-c", 'echo "Hello, Kubernetes!" && sleep 3600']}],
        restartPolicy="OnFailure"))
    agent.start()
    p = await agent.wait_pod("hello", lambda p: phase(p) == "Running", "Running")
    cid = container_id(p, "hello")
    assert b"Hello, Kubernetes!" in await runtime_view.logs(cid)
    sub = ExitWatch(runtime_view, cid)
    t0 = time.time()  # the runtime's exit time is wall-clock
    (agent.manifests / "hello.yaml").unlink()
    [ev] = await sub.all(60)
    took = ev.finished_at - t0
    assert ev.exit_code == 137
    assert 29.5 <= took <= 33, took


async def test_m11_pod_deleted_right_after_creation_leaks_nothing(agent: AgentProcess,
                                                                 runtime_view: RuntimeView) -> None:
    agent.start()
    await agent.wait_up()
    for name in ("pod1", "pod2"):
        agent.put(f"{name}.yaml", simple_pod(name, [{"name": "hello", "command": ["sleep", "3600"]}],
                                             terminationGracePeriodSeconds=1))
    await asyncio.sleep(1.0)
    for name in ("pod1", "pod2"):
        (agent.manifests / f"{name}.yaml").unlink()
    for name in ("pod1", "pod2"):
        await agent.wait_gone(name, 30)

    async def none_left() -> bool:
        names = {f"pod1-{agent.node}", f"pod2-{agent.node}"}
        left = await runtime_view.runtime.list_containers()
        return not [c for c in left if c.labels.get("io.kubernetes.pod.name") in names]

    await agent.wait_for("no leaked containers", none_left, 20)


async def test_crash_loop_backoff(agent: AgentProcess) -> None:
    agent.put("crash.yaml", simple_pod("crash", [{"name": "main", "command": ["sh", "-c", "echo boom; exit 3"]}]))
    agent.start()
    p = await agent.wait_pod("crash", lambda p: cstatus(p, "main")["restartCount"] >= 1
                             and waiting_reason(p, "main") == "CrashLoopBackOff", "CrashLoopBackOff", timeout=30)
    cs = cstatus(p, "main")
    uid = p["metadata"]["uid"]
    assert cs["state"]["waiting"]["message"] == (
        f"back-off 10s restarting failed container=main pod=crash-{agent.node}_default({uid})")
    assert cs["lastState"]["terminated"]["exitCode"] == 3 and cs["lastState"]["terminated"]["reason"] == "Error"
    assert phase(p) == "Running" and not cs["ready"]
    t_first = time.monotonic()
    p = await agent.wait_pod("crash", lambda p: cstatus(p, "main")["restartCount"] >= 2, "second restart", timeout=30)
    gap = time.monotonic() - t_first
    assert 7 <= gap <= 14, gap  # the 10 s backoff (timing precision is measured in bench/)
    evs = await events_for(agent, uid)
    assert any(e["reason"] == "BackOff" and e["type"] == "Warning" for e in evs)


async def test_image_pull_policies(agent: AgentProcess) -> None:
    agent.put("never.yaml", simple_pod("never", [{"name": "main", "image": "minikubelet.test/absent:1",
                                                  "imagePullPolicy": "Never", "command": ["true"]}]))
    agent.put("pull.yaml", simple_pod("pull", [
        {"name": "bad", "image": "127.0.0.1:1/absent:1", "imagePullPolicy": "IfNotPresent", "command": ["true"]},
        {"name": "good", "command": ["sleep", "3600"]}]))
    agent.start()
    p = await agent.wait_pod("never", lambda p: waiting_reason(p, "main") == "ErrImageNeverPull", "ErrImageNeverPull")
    assert cstatus(p, "main")["state"]["waiting"]["message"] == (
        'Container image "minikubelet.test/absent:1" is not present with pull policy of Never')
    p = await agent.wait_pod("pull", lambda p: waiting_reason(p, "bad") in ("ErrImagePull", "ImagePullBackOff")
                             and state_of(p, "good") == "running", "bad image, good container running")
    p = await agent.wait_pod("pull", lambda p: waiting_reason(p, "bad") == "ImagePullBackOff", "ImagePullBackOff")
    assert cstatus(p, "bad")["state"]["waiting"]["message"].startswith(
        'Back-off pulling image "127.0.0.1:1/absent:1": ErrImagePull: ')
    assert cstatus(p, "bad")["restartCount"] == 0 and cstatus(p, "good")["ready"]
    assert phase(p) == "Pending"
    evs = await events_for(agent, p["metadata"]["uid"])
    assert any(e["reason"] == "Pulling" and e["message"] == 'Pulling image "127.0.0.1:1/absent:1"' for e in evs)
    assert any(e["reason"] == "Failed" and e["message"] == "Error: ErrImagePull" for e in evs)


async def test_config_errors_do_not_disturb_other_pods(agent: AgentProcess) -> None:
    agent.put("cfg.yaml", simple_pod("cfg", [{"name": "main", "command": ["sleep", "3600"], "env": [
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}]))
    agent.put("fine.yaml", simple_pod("fine", [{"name": "main", "command": ["sleep", "3600"],
                                                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-$$(A)-$(C)"}],
                                                "args": ["$(B)"]}]))
    # the engine creates the sandbox and fails its start (runc cannot write the value)
    agent.put("refused.yaml", simple_pod("refused", [{"name": "main", "command": ["sleep", "3600"]}],
                                         securityContext={"sysctls": [{"name": "net.ipv4.tcp_syncookies",
                                                                       "value": "banana"}]}))
    agent.start()
    p = await agent.wait_pod("cfg", lambda p: waiting_reason(p, "main") == "CreateContainerConfigError",
                             "CreateContainerConfigError")
    # a standalone agent has no API client: upstream's makeEnvironmentVariables message
    assert cstatus(p, "main")["state"]["waiting"]["message"] == "couldn't get configMap default/cm, no kubeClient defined"
    fine = await agent.wait_pod("fine", lambda p: phase(p) == "Running", "Running")
    assert fine["status"]["phase"] == "Running"

    # upstream podWorkers.completeWork: the failed sync is retried after 10-15 s, not at each runtime event
    # the failure causes (it was every 0.4 s); the repeats are one Event with a count
    refused = await agent.wait_pod("refused", lambda p: bool(p["status"].get("startTime")), "refused seen")
    uid = refused["metadata"]["uid"]

    async def sandbox_failures() -> list[dict[str, Any]]:
        return [e for e in await events_for(agent, uid) if e["reason"] == "FailedCreatePodSandBox"]

    await agent.wait_for("FailedCreatePodSandBox", sandbox_failures, timeout=30)
    await asyncio.sleep(6)
    [later] = await sandbox_failures()
    assert later["count"] <= 2, later


async def test_hooks_deadline_and_termination_message(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    agent.put("hooks.yaml", simple_pod("hooks", [
        {"name": "post", "command": ["sleep", "3600"],
         "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "echo post-start-ran > /proc/1/fd/1"]}},
                       "preStop": {"exec": {"command": ["sh", "-c", "echo stopping > /proc/1/fd/1; sleep 1"]}}}},
        {"name": "badpost", "command": ["sleep", "3600"],
         "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 7"]}}}},
    ], terminationGracePeriodSeconds=5))
    agent.put("deadline.yaml", simple_pod("deadline", [{"name": "main", "command": ["sleep", "3600"]}],
                                          activeDeadlineSeconds=3, terminationGracePeriodSeconds=1))
    agent.put("msg.yaml", simple_pod("msg", [
        {"name": "file", "command": ["sh", "-c", "echo custom-message > /dev/termination-log; exit 4"]},
        {"name": "logs", "command": ["sh", "-c", "echo from-the-logs; exit 5"],
         "terminationMessagePolicy": "FallbackToLogsOnError"},
        # NodeConformance's non-root, non-default path case: the host file is 0666 (upstream makeMounts)
        {"name": "nonroot", "command": ["sh", "-c", "echo as-user-1000 > /dev/termination-custom-log; exit 3"],
         "terminationMessagePath": "/dev/termination-custom-log", "securityContext": {"runAsUser": 1000}},
    ], restartPolicy="Never"))
    agent.start()
    p = await agent.wait_pod("hooks", lambda p: state_of(p, "post") == "running"
                             and cstatus(p, "badpost")["restartCount"] >= 1, "postStart ran / failed")
    post = container_id(p, "post")
    assert b"post-start-ran" in await runtime_view.logs(post)
    evs = await events_for(agent, p["metadata"]["uid"])
    assert any(e["reason"] == "FailedPostStartHook" for e in evs)

    d = await agent.wait_pod("deadline", lambda p: phase(p) == "Failed", "DeadlineExceeded", timeout=30)
    assert d["status"]["reason"] == "DeadlineExceeded"
    assert d["status"]["message"] == "Pod was active on the node longer than the specified deadline"
    assert state_of(d, "main") == "terminated"

    m = await agent.wait_pod("msg", lambda p: phase(p) == "Failed", "Failed")
    assert cstatus(m, "file")["state"]["terminated"]["message"] == "custom-message\n"
    assert cstatus(m, "file")["state"]["terminated"]["exitCode"] == 4
    assert cstatus(m, "nonroot")["state"]["terminated"]["message"] == "as-user-1000\n"
    await agent.wait_pod("msg", lambda p: "from-the-logs" in cstatus(p, "logs")["state"]["terminated"].get("message", ""),
                         "message from logs", timeout=15)

    # preStop ran before the stop signal
    sub = ExitWatch(runtime_view, post)
    (agent.manifests / "hooks.yaml").unlink()
    [ev] = await sub.all(30)
    assert b"stopping" in ev.logs


async def test_prestop_overrun_gets_two_more_seconds(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    grace = 3
    agent.put("slowstop.yaml", simple_pod("slowstop", [{
        "name": "main", "command": ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "30"]}}}}], terminationGracePeriodSeconds=grace))
    agent.start()
    p = await agent.wait_pod("slowstop", lambda p: phase(p) == "Running", "Running")
    cid = container_id(p, "main")
    sub = ExitWatch(runtime_view, cid)
    t0 = time.time()  # the runtime's exit time is wall-clock
    (agent.manifests / "slowstop.yaml").unlink()
    [ev] = await sub.all(30)
    took = ev.finished_at - t0
    assert ev.exit_code == 137
    # the hook used up the 3 s grace; upstream then gives the container 2 s more once (stop signal, then SIGKILL)
    assert grace + 2 - 0.3 <= took <= grace + 2 + 2.5, took
    # upstream executePreStopHook: the hook is not stopped at the grace period; it fails when its container
    # dies, and that failure is reported without details ("PreStopHook failed")
    failed: list[dict[str, Any]] = []
    for _ in range(50):
        evs = await events_for(agent, p["metadata"]["uid"])
        failed = [e for e in evs if e["reason"] == "FailedPreStopHook"]
        if failed:
            break
        await asyncio.sleep(0.1)
    assert [(e["type"], e["message"]) for e in failed] == [("Warning", "PreStopHook failed")]

"""`kubectl debug` end to end: the host's real kubectl against the test API server (pods/ephemeralcontainers), the
agent joined to it, on the real runtime (`MKL_TEST_RUNTIME`: Docker or the CRI containerd). An ephemeral
container starts in the pod's sandbox and reports its termination message; `--target` shares the target's
processes; `kubectl attach` and `kubectl logs -c` reach one; it stops with its pod. The `--copy-to` and `node/`
profiles are ordinary pods as far as the node is concerned."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import stop_and_clean
from tests.integration.kubectl_cli import kubectl, without_demux_race
from tests.integration.runtime_view import RuntimeView
from tests.integration.test_agent_api_proxy_streams import _joined
from tests.integration.test_agent_kubelet_surface import SurfaceAgent

docker = agent_env.docker
api = agent_env.api
runtime_view = views.runtime_view
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs a kubectl binary")]

APP_COMMAND = ["sleep", "3601"]  # what `ps` in a debug container sharing app's processes must show


def _target(node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "target", "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "app", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": APP_COMMAND}]}}


class Kubectl:
    def __init__(self, api: ApiServer, tmp_path: Path) -> None:
        self.kubeconfig = api.write_kubeconfig(tmp_path / "admin.conf", api.admin_identity())
        self.cache = tmp_path / "kube-cache"

    async def __call__(self, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        return await kubectl(self.kubeconfig, self.cache, *args, stdin=stdin)

    async def session(self, *args: str, stdin: bytes) -> tuple[int, str, str]:
        """As a user at a terminal: the input is typed, and stdin stays open until kubectl ends (the shell exits).
        Closing it at once would end the attachment's output before the commands have answered: Docker ends an
        attachment's output when its stdin closes and the container was not created `stdinOnce`, and so does
        containerd."""
        proc = await asyncio.create_subprocess_exec(
            "kubectl", f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache}", "--request-timeout=20s", *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(stdin)
        await proc.stdin.drain()
        try:
            out, err = await asyncio.wait_for(asyncio.gather(proc.stdout.read(), proc.stderr.read()), 60)
            await proc.wait()
        finally:
            proc.stdin.close()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        return proc.returncode or 0, out.decode(), without_demux_race(err.decode())


async def _ephemeral_status(api: ApiServer, pod: str, name: str) -> dict[str, Any] | None:
    got = await api.admin().get("pods", pod, "default")
    return next((s for s in got.get("status", {}).get("ephemeralContainerStatuses") or [] if s["name"] == name),
                None)


async def _wait_state(agent: SurfaceAgent, api: ApiServer, name: str, state: str,
                      pod: str = "target") -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        s = await _ephemeral_status(api, pod, name)
        return s if s is not None and state in s["state"] else None

    found: dict[str, Any] = await agent.wait_for(f"ephemeral container {name} {state}", reached, timeout=60)
    return found


async def test_kubectl_debug_ephemeral_containers(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker,
                                                  runtime_view: RuntimeView) -> None:
    agent = SurfaceAgent(tmp_path / "agent", agent_env.docker_host(), api)
    k = Kubectl(api, tmp_path)
    try:
        await _joined(agent, api, [_target(agent.node)])
        app = (await api.admin().get("pods", "target", "default"))["status"]["containerStatuses"][0]

        # non-interactive: the API accepts it, the agent runs it in the pod and reads its termination message
        t0 = time.monotonic()
        code, out, err = await k("debug", "target", f"--image={BUSYBOX_IMAGE}", "-c", "dbg", "--",
                                 "sh", "-c", "echo debugged > /dev/termination-log")
        assert code == 0, err
        patches = [p for _, m, p in api.handler.requests if m == "PATCH" and "/ephemeralcontainers" in p]
        assert patches and patches[0].startswith("/api/v1/namespaces/default/pods/target/ephemeralcontainers"), patches
        done = await _wait_state(agent, api, "dbg", "terminated")
        elapsed = time.monotonic() - t0
        terminated = done["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"], terminated["message"]) == (0, "Completed", "debugged\n")
        assert (done["ready"], done["restartCount"], done["lastState"]) == (False, 0, {})
        assert "started" not in done  # upstream's prober sets it on init and regular containers only
        assert done["containerID"] == terminated["containerID"] and done["imageID"]
        assert (done["image"], done["imageID"]) == (app["image"], app["imageID"])  # as the runtime names it
        print(f"kubectl debug to a terminated ephemeral status: {elapsed:.2f}s")
        assert elapsed < 10
        dbg = await runtime_view.status(done["containerID"])
        app_status = await runtime_view.status(app["containerID"])
        assert dbg.sandbox_id == app_status.sandbox_id  # in the pod's own sandbox
        pod = await api.admin().get("pods", "target", "default")
        assert pod["status"]["phase"] == "Running"
        assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0

        # -it --target: the debug shell sees app's processes (the PID namespace of app, not its own)
        # (the general profile, kubectl 1.36's default, adds SYS_PTRACE to the debug container)
        code, out, err = await k.session("debug", "-it", "target", f"--image={BUSYBOX_IMAGE}", "-c", "shell",
                                         "--target=app", "--profile=general", "--", "sh",
                                         stdin=b"ps -o pid,args; grep CapEff /proc/self/status; exit\n")
        assert code == 0, err
        assert " ".join(APP_COMMAND) in out, out
        cap_eff = int(next(line for line in out.splitlines() if "CapEff:" in line).split()[-1], 16)
        assert cap_eff & (1 << 19), out  # CAP_SYS_PTRACE
        assert any(p.startswith("/attach/default/target/shell?") for _, p in api.kubelet_proxy.requests)
        shell = await _wait_state(agent, api, "shell", "terminated")
        assert shell["state"]["terminated"]["exitCode"] == 0

        # kubectl attach and kubectl logs -c reach an ephemeral container
        code, _, err = await k("debug", "target", f"--image={BUSYBOX_IMAGE}", "-c", "reader", "-i", "--attach=false",
                               "--", "sh", "-c", 'echo ready; read line; echo "got $line"')
        assert code == 0, err
        await _wait_state(agent, api, "reader", "running")
        for _ in range(50):  # the shell has written "ready" and waits on its stdin
            if (await k("logs", "target", "-c", "reader"))[1] == "ready\n":
                break
            await asyncio.sleep(0.1)
        code, out, err = await k.session("attach", "-i", "target", "-c", "reader", stdin=b"hello\n")
        assert (code, out) == (0, "got hello\n"), err
        await _wait_state(agent, api, "reader", "terminated")
        assert await k("logs", "target", "-c", "reader") == (0, "ready\ngot hello\n", "")

        # kubectl attach -it to an ephemeral container made with a terminal (its own tty, as upstream's attach)
        code, _, err = await k("debug", "target", f"--image={BUSYBOX_IMAGE}", "-c", "console", "-it", "--attach=false",
                               "--", "sh")
        assert code == 0, err
        await _wait_state(agent, api, "console", "running")
        code, out, err = await k.session("attach", "-it", "target", "-c", "console", stdin=b"echo $((6*7)); exit\n")
        assert code == 0 and "42" in out.split(), (out, err)
        assert (await _wait_state(agent, api, "console", "terminated"))["state"]["terminated"]["exitCode"] == 0

        # a target naming no container: the API refuses the write, with the field
        code, _, err = await k("debug", "target", f"--image={BUSYBOX_IMAGE}", "-c", "lost", "--target=nope")
        assert code != 0 and 'spec.ephemeralContainers[4].targetContainerName: Not found: "nope"' in err, err
        assert await _ephemeral_status(api, "target", "lost") is None

        # an image that cannot be pulled: the ephemeral status says so, the pod runs on untouched
        code, _, err = await k("debug", "target", "--image=example.invalid/no-such-image:1", "-c", "nopull")
        assert code == 0, err
        waiting = await _wait_state(agent, api, "nopull", "waiting")
        for _ in range(100):
            if waiting["state"]["waiting"].get("reason") in ("ErrImagePull", "ImagePullBackOff"):
                break
            await asyncio.sleep(0.2)
            waiting = await _wait_state(agent, api, "nopull", "waiting")
        assert waiting["state"]["waiting"]["reason"] in ("ErrImagePull", "ImagePullBackOff"), waiting
        pod = await api.admin().get("pods", "target", "default")
        assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["restartCount"] == 0

        # killed with the pod: a running ephemeral container stops when the pod is deleted
        code, _, err = await k("debug", "target", f"--image={BUSYBOX_IMAGE}", "-c", "sleeper", "--",
                               "sleep", "3600")
        assert code == 0, err
        sleeper = await _wait_state(agent, api, "sleeper", "running")
        assert await runtime_view.running(sleeper["containerID"])
        assert await k("exec", "target", "-c", "sleeper", "--", "echo", "exec reaches it") == (0, "exec reaches it\n", "")
        code, _, err = await k("delete", "pod", "target", "--wait=false")
        assert code == 0, err

        async def stopped() -> bool:
            return not (await runtime_view.exists(sleeper["containerID"])
                        and await runtime_view.running(sleeper["containerID"]))

        await agent.wait_for("the ephemeral container stopped", stopped, timeout=30)
        assert await stopped()
        assert not await runtime_view.exists(app["containerID"]) or not await runtime_view.running(app["containerID"])
    finally:
        await stop_and_clean(agent, docker)
    assert "Traceback" not in agent.log()


def _copy_pod(node: str) -> dict[str, Any]:
    """`kubectl debug target --copy-to=target-copy --same-node --image=... -c dbg -- sh -c '...'` with the
    general profile (kubectl 1.36's default): the target's spec, shareProcessNamespace, SYS_PTRACE for the debug
    container, the labels and probes dropped."""
    pod = _target(node)
    pod["metadata"]["name"] = "target-copy"
    pod["spec"]["shareProcessNamespace"] = True
    pod["spec"]["restartPolicy"] = "Always"
    pod["spec"]["containers"].append({
        "name": "dbg", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", "ps -o args; exec sleep 3600"],
        "terminationMessagePolicy": "File", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}})
    return pod


def _node_debug_pod(node: str) -> dict[str, Any]:
    """`kubectl debug node/<node> -it --image=...` with the general profile (generateNodeDebugPod, then
    mountRootPartition, clearSecurityContext, useHostNamespaces)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"node-debugger-{node}-x7k2p", "namespace": "default",
        "labels": {"app.kubernetes.io/managed-by": "kubectl-debug"}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
                 "hostNetwork": True, "hostPID": True, "hostIPC": True,
                 "volumes": [{"name": "host-root", "hostPath": {"path": "/"}}],
                 "containers": [{"name": "debugger", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                 "stdin": True, "tty": True, "terminationMessagePolicy": "File",
                                 "volumeMounts": [{"name": "host-root", "mountPath": "/host"}]}]}}


async def test_kubectl_debug_copy_and_node_profiles(tmp_path: Path, api: ApiServer,
                                                    docker: aiodocker.Docker) -> None:
    """The pods the two profiles create, as kubectl 1.36 writes them. kubectl sends a create as protobuf, which
    the test API server does not decode (it speaks JSON), so the test writes them; all the node sees is the same,
    and kubectl itself attaches and reads the logs."""
    agent = SurfaceAgent(tmp_path / "agent", agent_env.docker_host(), api)
    k = Kubectl(api, tmp_path)
    admin = api.admin()
    try:
        await _joined(agent, api, [_target(agent.node)])

        # --copy-to: an ordinary new pod on the same node; its processes are shared, so dbg sees app's
        await admin.create(_copy_pod(agent.node))

        async def copy_ran() -> dict[str, Any] | None:
            pod: dict[str, Any] = await admin.get("pods", "target-copy", "default")
            statuses = {s["name"]: s for s in pod.get("status", {}).get("containerStatuses") or []}
            both = all("running" in statuses.get(n, {}).get("state", {}) for n in ("app", "dbg"))
            return pod if both else None

        copy = await agent.wait_for("the copy's containers running", copy_ran, timeout=60)
        assert copy["status"]["phase"] == "Running" and copy["spec"]["nodeName"] == agent.node

        async def ps_seen() -> str | None:
            code, out, _ = await k("logs", "target-copy", "-c", "dbg")
            return out if code == 0 and " ".join(APP_COMMAND) in out.splitlines() else None

        await agent.wait_for("app's process in the copy's debug container", ps_seen, timeout=20)

        # node/<name>: hostPID, hostNetwork, hostIPC, the node's / at /host; kubectl attaches to its shell
        pod = _node_debug_pod(agent.node)
        name = pod["metadata"]["name"]
        await admin.create(pod)

        async def running() -> bool:
            got = await admin.get("pods", name, "default")
            return bool(got.get("status", {}).get("phase") == "Running")

        await agent.wait_for("the node-debug pod Running", running, timeout=60)
        code, out, err = await k.session("attach", "-it", name, "-c", "debugger",
                                         stdin=b"readlink /proc/self/ns/pid; head -1 /host/etc/os-release; exit 0\n")
        assert code == 0, err
        lines = [line.strip() for line in out.splitlines()]
        assert os.readlink("/proc/self/ns/pid") in lines, out  # the node's PID namespace: hostPID
        with open("/etc/os-release") as f:
            assert f.readline().strip() in lines, out  # the node's root filesystem at /host

        async def finished() -> dict[str, Any] | None:
            got: dict[str, Any] = await admin.get("pods", name, "default")
            return got if got["status"].get("phase") in ("Succeeded", "Failed") else None

        done = await agent.wait_for("the node-debug pod finished", finished, timeout=60)
        assert done["status"]["phase"] == "Succeeded"
    finally:
        await stop_and_clean(agent, docker)
    assert "Traceback" not in agent.log()

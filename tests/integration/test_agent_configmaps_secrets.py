"""Issue 14 items 1 and 3 end to end: the real agent, joined to the test API server, runs pods that read
ConfigMaps, Secrets and Services through the node's API access on the real Docker Engine: env, envFrom and
Service variables as the container sees them; a ConfigMap volume that follows an edit while the container keeps
running; a Secret volume on tmpfs, unmounted when the pod goes; a missing ConfigMap that holds the pod in
CreateContainerConfigError / FailedMount until it is created."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent, stop_and_clean
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration

SLEEP = ["sh", "-c", "exec sleep 100000"]


api = agent_env.api


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def pod(name: str, node: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     **container}], **spec}}


async def get_pod(admin: Any, name: str) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = await admin.get("pods", name, "default")
    except ApiStatusError:
        return None
    return result


def main_status(p: dict[str, Any]) -> dict[str, Any]:
    statuses = (p.get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


async def wait_running(agent: JoinedAgent, admin: Any, name: str, timeout: float = 60) -> dict[str, Any]:
    async def running() -> dict[str, Any] | None:
        p = await get_pod(admin, name)
        return p if p is not None and "running" in main_status(p).get("state", {}) else None

    return dict(await agent.wait_for(f"{name} running", running, timeout=timeout))


async def exec_out(view: RuntimeView, cid: str, cmd: list[str]) -> str:
    result = await view.exec(cid, *cmd)
    return (result.stdout + result.stderr).decode()


def cid_of(p: dict[str, Any]) -> str:
    return str(main_status(p)["containerID"])


async def test_env_env_from_and_service_variables(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config",
                                                                              "namespace": "default"},
                        "data": {"GREETING": "hello world", "LEVEL": "3"}})
    await admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app-secret", "namespace": "default"},
                        "data": {"PASSWORD": b64("s3cr3t")}})
    web = await admin.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-front",
                                                                                  "namespace": "default"},
                              "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    await admin.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless", "namespace": "default"},
                        "spec": {"clusterIP": "None", "ports": [{"port": 80}]}})
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: get_node(admin, agent.node), timeout=60)
        await admin.create(pod("envs", agent.node, {
            "command": ["sh", "-c", "env; echo env-done; exec sleep 100000"],
            "envFrom": [{"configMapRef": {"name": "app-config"}, "prefix": "CFG_"},
                        {"secretRef": {"name": "app-secret"}}],
            "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "GREETING"}}},
                    {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "PASSWORD"}}},
                    {"name": "MAYBE", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k",
                                                                        "optional": True}}},
                    {"name": "WEB_URL", "value": "http://$(WEB_FRONT_SERVICE_HOST):$(WEB_FRONT_SERVICE_PORT)"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": "mine"}]}))
        running = await wait_running(agent, admin, "envs")

        async def env_printed() -> str | None:  # Running can come before the output is in the log
            out = (await runtime_view.logs(cid_of(running))).decode()
            return out if "env-done" in out else None

        lines = str(await agent.wait_for("the env printed", env_printed, timeout=10)).splitlines()
        env = dict(line.split("=", 1) for line in lines if "=" in line)
        ip = web["spec"]["clusterIP"]
        assert env["GREETING"] == "hello world" and env["PW"] == "s3cr3t" and env["PASSWORD"] == "s3cr3t"
        assert env["CFG_GREETING"] == "hello world" and env["CFG_LEVEL"] == "3"
        assert "MAYBE" not in env
        assert env["WEB_FRONT_SERVICE_HOST"] == ip and env["WEB_FRONT_SERVICE_PORT"] == "80"
        assert env["WEB_FRONT_SERVICE_PORT_HTTP"] == "80" and env["WEB_FRONT_PORT"] == f"tcp://{ip}:80"
        assert env["WEB_FRONT_PORT_80_TCP_ADDR"] == ip and env["WEB_URL"] == f"http://{ip}:80"
        assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1" and env["KUBERNETES_SERVICE_PORT"] == "mine"
        assert env["KUBERNETES_PORT_443_TCP"] == "tcp://10.96.0.1:443"
        assert not any(k.startswith("HEADLESS_") for k in env)
        node_requests = [p for u, m, p in api.handler.requests if u == f"system:node:{agent.node}" and m == "GET"]
        assert any(p.startswith("/api/v1/namespaces/default/configmaps?") and "fieldSelector=metadata.name%3Dapp-config"
                   in p and "watch=true" in p for p in node_requests)
        assert any(p.startswith("/api/v1/namespaces/default/secrets?") and "fieldSelector=metadata.name%3Dapp-secret"
                   in p for p in node_requests)
        assert any(p.startswith("/api/v1/services?") and "fieldSelector=spec.clusterIP!=None" in unquote(p)
                   for p in node_requests)
    finally:
        await stop_and_clean(agent, docker)


async def get_node(admin: Any, name: str) -> bool:
    try:
        await admin.get("nodes", name)
    except ApiStatusError:
        return False
    return True


def host_tmpfs() -> set[str]:
    return {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[2] == "tmpfs"}


async def test_configmap_volume_follows_an_edit_and_the_secret_is_on_tmpfs(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.extra = {"syncFrequency": "10s"}
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "files", "namespace": "default"},
                        "data": {"app.conf": "version=1\n"}, "binaryData": {"blob": b64("\x01\x02")}})
    await admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls", "namespace": "default"},
                        "data": {"key.pem": b64("PRIVATE")}})
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: get_node(admin, agent.node), timeout=60)
        await admin.create(pod("vols", agent.node, {
            "command": SLEEP,
            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}, {"name": "sec", "mountPath": "/etc/sec"}]},
            volumes=[{"name": "cfg", "configMap": {"name": "files", "items": [
                         {"key": "app.conf", "path": "app.conf"}, {"key": "blob", "path": "bin/blob", "mode": 0o600}]}},
                     {"name": "sec", "secret": {"secretName": "tls", "defaultMode": 0o400}}]))
        running = await wait_running(agent, admin, "vols")
        cid = cid_of(running)
        assert await exec_out(runtime_view, cid, ["cat", "/etc/cfg/app.conf"]) == "version=1\n"
        assert await exec_out(runtime_view, cid, ["cat", "/etc/sec/key.pem"]) == "PRIVATE"
        assert (await exec_out(runtime_view, cid, ["stat", "-L", "-c", "%a", "/etc/sec/key.pem", "/etc/cfg/bin/blob"])
                ).split() == ["400", "600"]
        inside = {line.split()[1]: line.split()[2] for line in
                  (await exec_out(runtime_view, cid, ["cat", "/proc/mounts"])).splitlines()}
        assert inside["/etc/sec"] == "tmpfs" and inside["/etc/cfg"] != "tmpfs"
        uid = running["metadata"]["uid"]
        secret_dir = str((agent.root / "pods" / uid / "volumes" / "kubernetes.io~secret" / "sec").resolve())
        assert secret_dir in host_tmpfs()

        edited_at = time.monotonic()
        await admin.patch("configmaps", "files", {"data": {"app.conf": "version=2\n"}}, "default")

        async def edited() -> bool:
            return await exec_out(runtime_view, cid, ["cat", "/etc/cfg/app.conf"]) == "version=2\n"

        await agent.wait_for("the edit in the mounted file", edited, timeout=20)
        took = time.monotonic() - edited_at
        # the watch wakes the pod: well within the 10 s sync period that would otherwise bound it
        assert took < 5, f"the edit took {took:.1f}s to reach the file"
        print(f"configmap edit visible in the container after {took:.2f}s")
        now = await get_pod(admin, "vols")
        assert now is not None and main_status(now)["restartCount"] == 0 and cid_of(now) == cid

        await admin.delete("pods", "vols", "default", grace=1)

        async def gone() -> bool:
            return await get_pod(admin, "vols") is None

        await agent.wait_for("the pod deleted", gone, timeout=30)
        await agent.wait_for("the secret tmpfs unmounted", lambda: _async(secret_dir not in host_tmpfs()), timeout=15)
    finally:
        await stop_and_clean(agent, docker)


async def _async(value: bool) -> bool:
    return value


async def test_a_missing_configmap_holds_the_pod_until_it_is_created(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: get_node(admin, agent.node), timeout=60)
        await admin.create(pod("late-env", agent.node, {
            "command": SLEEP, "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "x"}}}]}))
        await admin.create(pod("late-vol", agent.node, {
            "command": SLEEP, "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
            volumes=[{"name": "v", "configMap": {"name": "late-volume"}}]))

        async def waiting() -> dict[str, Any] | None:
            p = await get_pod(admin, "late-env")
            w = main_status(p).get("state", {}).get("waiting", {}) if p else {}
            return w if w.get("reason") == "CreateContainerConfigError" else None

        w = await agent.wait_for("CreateContainerConfigError", waiting, timeout=60)
        assert w["message"] == 'configmap "late" not found'

        async def event(reason: str, message: str, name: str) -> bool:
            events = (await admin.list("events", "default"))["items"]
            return any(e["reason"] == reason and e["message"] == message and e["involvedObject"]["name"] == name
                       for e in events)

        await agent.wait_for("the Failed event", lambda: event("Failed", 'Error: configmap "late" not found',
                                                                "late-env"), timeout=20)
        await agent.wait_for("the FailedMount event", lambda: event(
            "FailedMount", 'MountVolume.SetUp failed for volume "v" : configmap "late-volume" not found', "late-vol"),
            timeout=20)

        await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "default"},
                            "data": {"x": "arrived"}})
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "late-volume", "namespace": "default"}, "data": {"f": "file"}})
        running = await wait_running(agent, admin, "late-env", timeout=30)
        assert "X=arrived" in await exec_out(runtime_view, cid_of(running), ["env"])
        vol = await wait_running(agent, admin, "late-vol", timeout=30)
        assert await exec_out(runtime_view, cid_of(vol), ["cat", "/v/f"]) == "file"
    finally:
        await stop_and_clean(agent, docker)


async def test_the_default_kube_api_access_volume_and_a_projected_token(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: get_node(admin, agent.node), timeout=60)
        spec = pod("sa", agent.node, {"command": SLEEP, "volumeMounts": [{"name": "vault", "mountPath": "/vault"}]},
                   volumes=[{"name": "vault", "projected": {"sources": [
                       {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 7200, "path": "token"}}]}}])
        del spec["spec"]["automountServiceAccountToken"]  # the ServiceAccount admission adds kube-api-access-*
        created = await admin.create(spec)
        assert any(v["name"].startswith("kube-api-access-") for v in created["spec"]["volumes"])
        running = await wait_running(agent, admin, "sa")
        cid = cid_of(running)
        sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
        token = await exec_out(runtime_view, cid, ["cat", f"{sa_dir}/token"])
        assert await exec_out(runtime_view, cid, ["cat", f"{sa_dir}/namespace"]) == "default"
        assert await exec_out(runtime_view, cid, ["cat", f"{sa_dir}/ca.crt"]) == api.ca.cert_pem.decode()
        claims = api.tokens.claims(token)
        assert claims is not None and claims["sub"] == "system:serviceaccount:default:default"
        assert claims["kubernetes.io"]["pod"] == {"name": "sa", "uid": running["metadata"]["uid"]}
        vault = api.tokens.claims(await exec_out(runtime_view, cid, ["cat", "/vault/token"]))
        assert vault is not None and vault["aud"] == ["vault"] and vault["exp"] - vault["iat"] == 7200
        requests = [p for u, m, p in api.handler.requests if u == f"system:node:{agent.node}" and m == "POST"
                    and p.endswith("/serviceaccounts/default/token")]
        assert len(requests) == 2  # one per token, not one per sync
        # a deleted pod's token volumes (tmpfs) are unmounted
        volumes = agent.root / "pods" / running["metadata"]["uid"] / "volumes" / "kubernetes.io~projected"
        mounted = {m for m in host_tmpfs() if m.startswith(str(volumes.resolve()))}
        assert len(mounted) == 2
        await admin.delete("pods", "sa", "default", grace=1)

        async def unmounted() -> bool:
            return await get_pod(admin, "sa") is None and not mounted & host_tmpfs()

        await agent.wait_for("the pod gone and its tmpfs unmounted", unmounted, timeout=30)
    finally:
        await stop_and_clean(agent, docker)

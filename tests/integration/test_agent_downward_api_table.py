"""Seed 001 §1.8 (Downward API, "Доступні поля") end to end on a joined node: every field the seed lists, as the
real agent hands it to a pod from the test API server, next to a ConfigMap and a Secret, printed by the
container and compared with what the API says of the pod and its node.

- through env and volume: metadata.name, .namespace, .uid, metadata.annotations['<KEY>'], metadata.labels['<KEY>'];
- env only: spec.serviceAccountName, spec.nodeName, status.hostIP(s), status.podIP(s);
- volume only: metadata.labels, metadata.annotations (`key="escaped value"`, one per line);
- resourceFieldRef: limits/requests of cpu, memory, ephemeral-storage; without a limit, the node's allocatable
  ("the kubelet uses the node's allocatable", the seed's fallback).

No seed document holds a complete manifest with ConfigMaps, Secrets or the downward API (they mention them only
in this table's prose), so this pod is built from the table.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from minikubelet.base.quantity import to_bytes, to_millicores
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent, stop_and_clean
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view
api = agent_env.api

pytestmark = pytest.mark.integration

FIELDS = {  # env name -> fieldPath, in the seed's order
    "MY_NAME": "metadata.name", "MY_NAMESPACE": "metadata.namespace", "MY_UID": "metadata.uid",
    "MY_NOTE": "metadata.annotations['note']", "MY_TIER": "metadata.labels['tier']",
    "MY_SA": "spec.serviceAccountName", "MY_NODE": "spec.nodeName", "MY_HOST_IP": "status.hostIP",
    "MY_HOST_IPS": "status.hostIPs", "MY_POD_IP": "status.podIP", "MY_POD_IPS": "status.podIPs",
}
RESOURCES = {  # env name -> (resource, divisor)
    "CPU_LIMIT": ("limits.cpu", "1m"), "CPU_REQUEST": ("requests.cpu", "1m"),
    "MEM_LIMIT": ("limits.memory", "1Mi"), "MEM_REQUEST": ("requests.memory", "1Mi"),
    "EPH_REQUEST": ("requests.ephemeral-storage", "1Ki"),
}


def the_pod(node: str) -> dict[str, Any]:
    env: list[dict[str, Any]] = [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in FIELDS.items()]
    env += [{"name": k, "valueFrom": {"resourceFieldRef": {"resource": r, "divisor": d}}}
            for k, (r, d) in RESOURCES.items()]
    env += [{"name": "CM_COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
            {"name": "SECRET_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]
    script = "; ".join([
        "env | grep -E '^(MY|CPU|MEM|EPH|CM|SECRET)_' | sort",
        "for f in labels annotations name uid side-cpu side-memory; do echo \"--- $f\"; cat /info/$f; echo; done",
        "echo '--- cfg'; cat /cfg/color; echo; echo '--- secret'; cat /sec/password; echo",
    ])
    item = [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "uid", "fieldRef": {"fieldPath": "metadata.uid"}},
            {"path": "side-cpu", "resourceFieldRef": {"containerName": "side", "resource": "limits.cpu",
                                                      "divisor": "1m"}},
            {"path": "side-memory", "resourceFieldRef": {"containerName": "side", "resource": "limits.memory"}}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "dapi", "namespace": "default", "labels": {"app": "dapi", "tier": "front"},
                     "annotations": {"note": 'say "hi"', "build": "42"}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "automountServiceAccountToken": False,
                 "terminationGracePeriodSeconds": 1,
                 "containers": [
                     {"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                      "command": ["sh", "-c", script], "env": env,
                      "resources": {"requests": {"cpu": "100m", "memory": "32Mi", "ephemeral-storage": "2Mi"},
                                    "limits": {"cpu": "250m", "memory": "64Mi"}},
                      "volumeMounts": [{"name": "info", "mountPath": "/info"}, {"name": "cfg", "mountPath": "/cfg"},
                                       {"name": "sec", "mountPath": "/sec"}]},
                     # no limits: the downward API gives the node's allocatable for them
                     {"name": "side", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent", "command": ["true"]}],
                 "volumes": [{"name": "info", "downwardAPI": {"items": item}},
                             {"name": "cfg", "configMap": {"name": "settings"}},
                             {"name": "sec", "secret": {"secretName": "creds"}}]},
    }


async def node_exists(admin: Any, name: str) -> bool:
    try:
        await admin.get("nodes", name)
    except ApiStatusError:
        return False
    return True


async def test_the_seed_downward_api_fields_configmap_and_secret_reach_the_container(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: node_exists(admin, agent.node), timeout=60)
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"},
                            "data": {"color": "blue"}})
        await admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"},
                            "data": {"password": base64.b64encode(b"s3cr=t").decode()}})
        await admin.create(the_pod(agent.node))

        async def finished() -> dict[str, Any] | None:
            p: dict[str, Any] = await admin.get("pods", "dapi", "default")
            return p if p["status"].get("phase") in ("Succeeded", "Failed") else None

        p = await agent.wait_for("dapi finished", finished, timeout=60)
        main = next(s for s in p["status"]["containerStatuses"] if s["name"] == "main")
        out = (await runtime_view.logs(main["containerID"])).decode()
        assert p["status"]["phase"] == "Succeeded", out
        node = await admin.get("nodes", agent.node)
        allocatable = node["status"]["allocatable"]
        status, meta = p["status"], p["metadata"]
        env = dict(line.split("=", 1) for line in out.split("\n--- ")[0].splitlines())
        assert env == {
            "MY_NAME": "dapi", "MY_NAMESPACE": "default", "MY_UID": meta["uid"], "MY_NOTE": 'say "hi"',
            "MY_TIER": "front", "MY_SA": "default", "MY_NODE": agent.node, "MY_HOST_IP": status["hostIP"],
            "MY_HOST_IPS": ",".join(i["ip"] for i in status["hostIPs"]), "MY_POD_IP": status["podIP"],
            "MY_POD_IPS": ",".join(i["ip"] for i in status["podIPs"]),
            "CPU_LIMIT": "250", "CPU_REQUEST": "100", "MEM_LIMIT": "64", "MEM_REQUEST": "32", "EPH_REQUEST": "2048",
            "CM_COLOR": "blue", "SECRET_PASSWORD": "s3cr=t",
        }
        assert status["podIP"] and status["hostIP"]
        files = out.split("\n--- ", 1)[1]
        # the kubelet's own annotations are part of the file, as upstream's (sorted, quotes escaped)
        seen = re.search(r'^kubernetes.io/config.seen="(\d{4}-\d\d-\d\dT[\d:.]+Z)"$', files, re.M)
        assert seen is not None, files
        assert files == (
            'labels\napp="dapi"\ntier="front"\n'
            f'--- annotations\nbuild="42"\nkubernetes.io/config.seen="{seen[1]}"\n'
            'kubernetes.io/config.source="api"\nnote="say \\"hi\\""\n'
            f"--- name\ndapi\n--- uid\n{meta['uid']}\n"
            f"--- side-cpu\n{to_millicores(allocatable['cpu'])}\n--- side-memory\n{to_bytes(allocatable['memory'])}\n"
            "--- cfg\nblue\n--- secret\ns3cr=t\n")
    finally:
        await stop_and_clean(agent, docker)

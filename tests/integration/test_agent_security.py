"""Issue 12 (items 1 and 4) end to end: security contexts and process namespaces, read back from inside
real containers on the Docker Engine. The pods run side by side under one agent to keep this short."""

from __future__ import annotations

import json
import re

import aiodocker
import pytest

from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.runtime_view import RuntimeView

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker
runtime_view = views.runtime_view

STATUS = "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status"
DOCKER_DEFAULT_CAPS = 0xA80425FB  # CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE
#                                   NET_RAW SYS_CHROOT MKNOD AUDIT_WRITE SETFCAP
CAP_NET_BIND_SERVICE = 1 << 10
CAP_NET_ADMIN = 1 << 12
# allows everything but mkdir: proves the agent's Localhost profile is the one loaded
MKDIR_DENIED = {"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}


def script(*lines: str) -> list[str]:
    return ["sh", "-c", "; ".join([*lines, "echo END", "exec sleep 3600"])]


def status_fields(out: str) -> dict[str, str]:
    return dict(re.findall(r"^(CapEff|CapBnd|NoNewPrivs|Seccomp):\s+(\S+)", out, re.M))


async def output(a: AgentProcess, view: RuntimeView, pod: str, name: str) -> str:
    """What the container printed up to its END line."""

    async def done() -> str | None:
        p = await a.pod(pod)
        if p is None or not cstatus(p, name).get("containerID"):
            return None
        text = (await view.logs(container_id(p, name))).decode()
        return text if "END" in text else None

    return str(await a.wait_for(f"{pod}/{name} output", done, timeout=60))


def ids(out: str) -> tuple[int, int, set[int]]:
    m = re.search(r"uid=(\d+)\S* gid=(\d+)\S*(?: groups=(\S+))?", out)
    assert m is not None, out
    groups = {int(g.split("(")[0]) for g in (m.group(3) or "").split(",") if g}
    return int(m.group(1)), int(m.group(2)), groups


async def test_security_contexts_read_back_from_inside(agent: AgentProcess, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    (agent.root / "seccomp").mkdir(parents=True)
    (agent.root / "seccomp" / "no-mkdir.json").write_text(json.dumps(MKDIR_DENIED))
    agent.put("restricted.yaml", simple_pod(
        "restricted",
        [{"name": "app", "volumeMounts": [{"name": "data", "mountPath": "/data"}],
          "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                              "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                              "seccompProfile": {"type": "RuntimeDefault"}},
          "command": script("id", STATUS, "touch /probe 2>&1 || echo rootfs-refused", "touch /data/f",
                            "ls -lnd /data", "ls -ln /data", "cat /proc/sys/net/ipv4/ip_local_port_range")}],
        securityContext={"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000],
                         "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "20000 21000"}]},
        volumes=[{"name": "data", "emptyDir": {}}],
    ))
    agent.put("defaults.yaml", simple_pod("defaults", [
        {"name": "plain", "command": script("id", STATUS)},
        {"name": "caps", "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}},
         "command": script(STATUS)},
        {"name": "local", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "no-mkdir.json"}},
         "command": script(STATUS, "mkdir /tmp/d 2>&1 || echo mkdir-refused")},
    ]))
    agent.start()

    out = await output(agent, runtime_view, "restricted", "app")
    uid, gid, groups = ids(out)
    assert (uid, gid) == (1000, 3000) and {2000, 4000} <= groups, out
    st = status_fields(out)
    # a non-root user keeps no effective capabilities; the bounding set is exactly what was added
    assert (int(st["CapEff"], 16), int(st["CapBnd"], 16)) == (0, CAP_NET_BIND_SERVICE), out
    assert (st["NoNewPrivs"], st["Seccomp"]) == ("1", "2"), out
    assert "rootfs-refused" in out and "Read-only file system" in out, out
    dir_line = next(line for line in out.splitlines() if line.rstrip().endswith(" /data"))
    assert dir_line.startswith("drwxrwsrwx") and dir_line.split()[3] == "2000", out  # setgid, fsGroup's
    file_line = next(line for line in out.splitlines() if line.rstrip().endswith(" f"))
    assert file_line.split()[2:4] == ["1000", "2000"], out
    assert "20000\t21000" in out or "20000 21000" in out, out

    plain = await output(agent, runtime_view, "defaults", "plain")
    st = status_fields(plain)
    assert ids(plain)[:2] == (0, 0)
    # Unconfined by default: Docker's own default profile must not apply
    assert (st["Seccomp"], st["NoNewPrivs"], int(st["CapBnd"], 16)) == ("0", "0", DOCKER_DEFAULT_CAPS), plain
    caps = status_fields(await output(agent, runtime_view, "defaults", "caps"))
    assert int(caps["CapEff"], 16) == int(caps["CapBnd"], 16) == CAP_NET_ADMIN, caps
    local = await output(agent, runtime_view, "defaults", "local")
    assert status_fields(local)["Seccomp"] == "2" and "mkdir-refused" in local, local


async def test_refusals_carry_upstream_reasons(agent: AgentProcess) -> None:
    agent.put("unsafe.yaml", simple_pod("unsafe", [{"name": "app", "command": ["sleep", "3600"]}],
                                        securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}))
    agent.put("nonroot.yaml", simple_pod("nonroot", [{"name": "app", "command": ["sleep", "3600"]}],
                                         securityContext={"runAsNonRoot": True}))
    agent.put("userns.yaml", simple_pod("userns", [{"name": "app", "command": ["sleep", "3600"]}], hostUsers=False))
    agent.start()

    p = await agent.wait_pod("unsafe", lambda p: p["status"].get("phase") == "Failed", "rejected")
    assert (p["status"]["reason"], p["status"]["message"]) == (
        "SysctlForbidden", 'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted')

    p = await agent.wait_pod("nonroot", lambda p: bool(cstatus(p, "app")["state"].get("waiting", {}).get("message")),
                             "config error")
    waiting = cstatus(p, "app")["state"]["waiting"]
    pod_desc = f'{p["metadata"]["name"]}_{p["metadata"]["namespace"]}({p["metadata"]["uid"]})'
    assert (waiting["reason"], waiting["message"]) == (
        "CreateContainerConfigError",
        f'container has runAsNonRoot and image will run as root (pod: "{pod_desc}", container: app)')

    p = await agent.wait_pod("userns", lambda p: p["status"].get("phase") == "Failed", "rejected")
    assert p["status"]["reason"] == "PodFeatureUnsupported"
    assert "runtime does not support user namespaces" in p["status"]["message"]


async def test_share_process_namespace_pause_is_pid_1(agent: AgentProcess, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent.put("shared.yaml", simple_pod("shared", [
        {"name": "first", "command": ["sleep", "3601"]},
        {"name": "second", "command": script("until ps | grep -q 'sleep 360[1]'; do sleep 0.2; done", "ps")},
    ], shareProcessNamespace=True))
    agent.put("private.yaml", simple_pod("private", [{"name": "alone", "command": script("ps")}]))
    agent.start()

    shared = await output(agent, runtime_view, "shared", "second")
    procs = {line.split()[0]: line.split()[-1] for line in shared.splitlines() if line.strip()[:1].isdigit()}
    assert procs.get("1") == "/pause", shared
    assert any("3601" in line for line in shared.splitlines()), shared
    alone = await output(agent, runtime_view, "private", "alone")
    first = next(line for line in alone.splitlines() if line.strip().startswith("1 "))
    assert "/pause" not in first and "sh" in first, alone

import json
import subprocess
import sys
from pathlib import Path

import pytest

from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.cli import main
from minikubelet.server.app import KubeletServer
from minikubelet.server.routes import Routes
from tests.unit.server.plain_client import plain_client


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("minikubelet 0.1.0")


def test_bad_config_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreadOnlyPort: abc\n")
    assert main(["run", "--config", str(cfg)]) == 2
    assert "readOnlyPort" in capsys.readouterr().err


def test_exit_on_lock_contention_without_a_lock_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--exit-on-lock-contention"]) == 2
    assert capsys.readouterr().err == ("minikubelet: invalid configuration: cannot exit on lock file contention: "
                                       "no lock file specified\n")


def test_bad_flag_exits_2() -> None:
    r = subprocess.run([sys.executable, "-m", "minikubelet", "run", "--max-pods", "lots"], capture_output=True)
    assert r.returncode == 2


def test_help_lists_kubelet_flags() -> None:
    r = subprocess.run([sys.executable, "-m", "minikubelet", "run", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for flag in ("--config", "--hostname-override", "--pod-manifest-path", "--root-dir", "--kubeconfig", "--v",
                 "--lock-file", "--exit-on-lock-contention"):
        assert flag in r.stdout


def _server(checks: list[tuple[str, str | None]]) -> Routes:
    async def health() -> list[tuple[str, str | None]]:
        return checks

    return KubeletServer(lambda: [{"metadata": {"name": "p"}}], health, CollectorRegistry(),
                         lambda uid: [], None).routes()


async def test_healthz_ok_and_failing() -> None:
    async with plain_client(_server([("ping", None), ("syncloop", None), ("runtime", None)])) as client:
        r = await client.get("/healthz")
        assert r.status == 200 and await r.text() == "ok"
        r = await client.get("/pods")
        body = await r.json()
        assert body["kind"] == "PodList" and body["items"][0]["metadata"]["name"] == "p"
        r = await client.get("/metrics/probes")
        assert r.status == 404
    failing = [("ping", None), ("syncloop", "sync loop has not run for 12.0s"), ("runtime", None)]
    async with plain_client(_server(failing)) as client:
        r = await client.get("/healthz")
        text = await r.text()
        assert r.status == 500
        assert "[-]syncloop failed: sync loop has not run for 12.0s" in text and "[+]runtime ok" in text


def test_a_standalone_run_loads_no_optional_heavy_library() -> None:
    """grpc/protobuf (CRI endpoints), dbus-fast (node shutdown, systemd driver), pyroute2 (host-gw) and
    cryptography (join, TLS) cost 5–20 MiB resident each; the agent, its parser and the Docker runtime load none."""
    code = (
        "import sys\n"
        "from minikubelet.cli import main\n"
        "from minikubelet.agent import Agent\n"
        "from cri.docker import DockerRuntime\n"
        "main(['version'])\n"
        "heavy = ('grpc', 'google.protobuf', 'dbus_fast', 'pyroute2', 'cryptography')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith('google.protobuf')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "[]"


def test_the_standalone_agent_loads_no_aiohttp() -> None:
    """aiohttp (+aiohttp.web, yarl, multidict) and aiodocker cost ~15 MiB resident and are test dependencies only:
    every HTTP client and port of the agent runs on h11 (tests/unit/probes/test_no_aiohttp.py runs the clients)."""
    code = (
        "import json, sys\n"
        "from minikubelet.cli import main\n"
        "from minikubelet.agent import Agent\n"
        "from cri.docker import DockerRuntime\n"
        "main(['version'])\n"
        "heavy = ('aiohttp', 'aiodocker', 'yarl', 'multidict')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.splitlines()[-1]) == []


def test_the_kubelet_api_leaves_rare_paths_unloaded() -> None:
    """The SPDY/3.1 and WebSocket stacks come with the first exec, attach or port-forward (on the 10250 side and
    the CRI client's), and the html package (its entity tables) not at all."""
    code = (
        "import json, sys\n"
        "import minikubelet.server.kubelet_api, minikubelet.server.node_logs, minikubelet.server.streaming.websocket\n"
        "import cri.remote\n"
        "rare = ('wsproto', 'html', 'cri.spdy', 'cri.remote.streaming', 'cri.remote.port_forward',\n"
        "        'minikubelet.server.exec', 'minikubelet.server.port_forward', 'minikubelet.server.streaming.connection')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m in rare or m.split('.')[0] in rare)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.splitlines()[-1]) == []


def test_the_kubelet_api_server_loads_no_aiohttp() -> None:
    """The 10250 API (TLS, streamed logs, SPDY/3.1 and WebSocket upgrades) runs on h11 and wsproto."""
    code = (
        "import json, sys\n"
        "import minikubelet.server.kubelet_api, minikubelet.server.streaming.websocket\n"
        "heavy = ('aiohttp', 'yarl', 'multidict')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.splitlines()[-1]) == []


async def test_run_starts_the_manifest_parser_before_the_agent(tmp_path: Path) -> None:
    """`minikubelet run` starts the parser process first when it will parse manifests (a static pod directory or
    a manifest URL), so its start-up is not on the first static pod's path; without either it starts none."""
    from dataclasses import replace

    from minikubelet.cli import _early_parser
    from minikubelet.config.kubelet_config import KubeletConfig

    assert await _early_parser(replace(KubeletConfig(), static_pod_path=str(tmp_path / "absent"))) is None
    parser = await _early_parser(replace(KubeletConfig(), static_pod_path=str(tmp_path)))
    assert parser is not None and parser.pid is not None and parser.started == 1
    try:
        pod = await parser.parse(b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                 b"  - {name: c, image: busybox}\n", "p.yaml", "node-1", None)
        assert pod["metadata"]["name"] == "p-node-1" and parser.started == 1  # the worker already running
    finally:
        await parser.close()
    url = await _early_parser(replace(KubeletConfig(), static_pod_path=str(tmp_path / "absent"),
                                      static_pod_url="http://127.0.0.1:1/pods"))
    assert url is not None
    await url.close()

"""The shipped unit: systemd's own parser accepts it, and it names the paths join writes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from minikubelet.install import layout as paths
from minikubelet.install.join import unit_text


def settings() -> dict[str, str]:
    text = unit_text().decode().replace("\\\n", " ")
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = " ".join(value.split())
    return out


def test_the_unit_is_what_the_agent_and_join_expect() -> None:
    s = settings()
    assert (s["Type"], s["NotifyAccess"], s["KillMode"], s["Restart"], s["Delegate"]) == \
        ("notify", "main", "process", "always", "yes")
    assert int(s["WatchdogSec"]) > 2  # the agent refuses a watchdog of 1 s or less (upstream's minimum)
    assert {"docker.service", "containerd.service"} <= set(s["After"].split())
    assert s["EnvironmentFile"] == "-" + paths.FLAGS_ENV
    assert s["ExecStart"] == (f"{paths.VENV}/bin/minikubelet run --config={paths.CONFIG} "
                              f"--bootstrap-kubeconfig={paths.BOOTSTRAP_KUBECONFIG} --kubeconfig={paths.KUBECONFIG} "
                              "$MINIKUBELET_ARGS")
    assert s["WantedBy"] == "multi-user.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_finds_nothing_but_the_missing_binary(tmp_path: Path) -> None:
    unit = tmp_path / paths.UNIT_NAME
    unit.write_bytes(unit_text())
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                          timeout=60, check=False)
    problems = [line for line in (done.stdout + done.stderr).splitlines()
                if line and f"Command {paths.VENV}/bin/minikubelet is not executable" not in line]
    assert problems == []

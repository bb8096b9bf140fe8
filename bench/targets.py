"""targets: every issue-19 target measured in one run, one table: target, figure, floor/reference, ratio,
limit, met/missed. Each part is the bench of its name (its own table is printed as it finishes); the rows are
read back from the JSON result it wrote, so a bench that grows a field (status-latency's runtime event latency)
feeds this table without a change here."""

from __future__ import annotations

import json
import math
import os
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common import RESULTS, write_result
from bench.kubelet_reference import CATEGORIES

PARTS = ("startup", "startup-containerd", "status-latency", "status-latency-containerd", "footprint",
         "cluster-startup", "cluster-footprint", "hostile")
STARTUP_RATIO = 1.15
STATUS_RATIO = 1.2
RSS_MIB = 50.0
CORE_PERCENT = 1.0
HEALTHZ_P99_MS = 100.0
# What the issue quotes for the real kubelet v1.36 on this machine.
KUBELET_RSS = "kubelet 88-108 MiB (0-30 pods)"
KUBELET_30_READY = (8.9, 10.2)
# Where status-latency's result carries the runtime's own event latency (a summary with "p99"): `runtime_event`
# as branch lat19 writes it, other names it might take, then any other summary-shaped entry beside "latency".
RUNTIME_LATENCY_KEYS = ("runtime_event", "runtime_event_latency", "runtime_latency", "event_latency")


@dataclass
class Plan:
    startup_pods: list[int]
    status_events: int
    footprint_pods: int
    footprint_probes: list[str]
    footprint_duration: float
    cluster_pods: list[int]
    cluster_footprint_pods: list[int]
    cluster_footprint_duration: float
    hostile_idle: float


FULL = Plan([1, 10, 100], 50, 100, ["none", "exec"], 60.0, [1, 10, 30, 100], [30, 100], 60.0, 10.0)
QUICK = Plan([1, 10], 20, 100, ["none"], 20.0, [1, 10], [30], 20.0, 3.0)


@dataclass
class Row:
    target: str
    figure: str
    reference: str = "-"
    ratio: float | None = None
    limit: str = "-"
    verdict: str = "report"  # met / missed against the limit; report where the issue sets none

    def cells(self) -> list[Any]:
        ratio = "-" if self.ratio is None or math.isnan(self.ratio) else f"{self.ratio:.2f}"
        return [self.target, self.figure, self.reference, ratio, self.limit, self.verdict]


def judge(value: float, limit: float) -> str:
    if math.isnan(value):
        return "n/a"
    return "met" if value <= limit else "missed"


def startup_rows(result: dict[str, Any]) -> list[Row]:
    """Per pod count: the time until all N pods run vs the same N started directly on the runtime."""
    out = []
    for r in result["runs"]:
        floor = "direct Docker" if r.get("runtime", "docker") == "docker" else "CRI floor"
        ratio = r["agent_total"] / r["direct_total"]
        out.append(Row(f"startup {r['pods']} pods, {r.get('runtime', 'docker')} (all Running)",
                       f"{r['agent_total']:.3f} s", f"{floor} {r['direct_total']:.3f} s", ratio,
                       f"<= {STARTUP_RATIO}x", judge(ratio, STARTUP_RATIO)))
    return out


def runtime_event_latency(result: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The runtime's own event latency in a status-latency result, when that bench measured it."""
    for key in RUNTIME_LATENCY_KEYS:
        v = result.get(key)
        if isinstance(v, dict) and isinstance(v.get("p99"), int | float):
            return key, v
    for key, v in result.items():
        if key != "latency" and isinstance(v, dict) and isinstance(v.get("p99"), int | float):
            return key, v
    return None


def status_rows(result: dict[str, Any]) -> list[Row]:
    lat = result["latency"]
    target = f"exit -> status at /pods, {result.get('runtime', 'docker')}"
    figure = f"p99 {lat['p99'] * 1000:.1f} ms ({lat['n']} events)"
    runtime = runtime_event_latency(result)
    if runtime is None:
        return [Row(target, figure, "runtime event latency: not measured by this "
                    "status-latency", None, f"<= {STATUS_RATIO}x", "n/a")]
    key, ev = runtime
    ratio = lat["p99"] / ev["p99"] if ev["p99"] > 0 else float("nan")
    rows = [Row(target, figure, f"runtime event ({key}) p99 {ev['p99'] * 1000:.1f} ms", ratio,
                f"<= {STATUS_RATIO}x", judge(ratio, STATUS_RATIO))]
    state = result.get("runtime_state_read")
    if isinstance(state, dict) and state.get("n") and state["p99"] > 0:
        # Docker's `die` comes before Docker will say the container stopped: the floor any client has
        rows.append(Row(f"{target}, against the runtime's state", figure,
                        f"first status read saying not running, p99 {state['p99'] * 1000:.1f} ms",
                        lat["p99"] / state["p99"], "-", "report"))
    return rows


def footprint_rows(result: dict[str, Any]) -> list[Row]:
    out = []
    for r in result["runs"]:
        core = r["agent_cpu_s_per_min"] / 60 * 100
        name = f"footprint {r['pods']} idle pods, probes {r['probe']}"
        if r["probe"] == "none":
            out.append(Row(f"{name}: RSS", f"{r['agent_rss_mib']:.1f} MiB", KUBELET_RSS, None, f"<= {RSS_MIB:.0f} MiB",
                           judge(r["agent_rss_mib"], RSS_MIB)))
            out.append(Row(f"{name}: CPU", f"{core:.2f} % of a core", "-", None, f"<= {CORE_PERCENT:.0f} %",
                           judge(core, CORE_PERCENT)))
        else:
            out.append(Row(f"{name}: RSS, CPU", f"{r['agent_rss_mib']:.1f} MiB, {core:.2f} % of a core"))
    return out


def cluster_startup_rows(result: dict[str, Any]) -> list[Row]:
    out = []
    for r in result["runs"]:
        row = Row(f"cluster-startup {r['pods']} API pods -> Ready in the API",
                  f"total {r['total']:.3f} s, p99 {r['latency']['p99']:.3f} s")
        if r["pods"] == 30:
            lo, hi = KUBELET_30_READY
            row.reference = f"kubelet {lo}-{hi} s (kubectl apply -> Ready)"
            row.ratio = r["total"] / lo
        out.append(row)
    return out


def cluster_footprint_rows(result: dict[str, Any]) -> list[Row]:
    out = []
    ref = result.get("kubelet_reference") or {}
    idle = ref.get("idle_per_min", {})
    for r in result["runs"]:
        core = r["agent_cpu_s_per_min"] / 60 * 100
        out.append(Row(f"cluster-footprint {r['pods']} API pods: RSS, CPU",
                       f"{r['agent_rss_mib']:.1f} MiB, {core:.2f} % of a core", KUBELET_RSS))
        per_min = r.get("agent_requests_per_min_by_category") or {}
        for c in CATEGORIES:
            if c not in per_min:
                continue
            kubelet = idle.get(c)
            ratio = per_min[c] / kubelet if kubelet else None
            out.append(Row(f"  {r['pods']} API pods: {c}/min", f"{per_min[c]:.2f}",
                           "-" if kubelet is None else f"kubelet idle {kubelet:.2f}", ratio))
    return out


def hostile_rows(result: dict[str, Any]) -> list[Row]:
    idle, busy = result["phases"]
    load = " ".join(f"{x:.1f}" for x in busy["loadavg_end"])
    p99 = busy["healthz"]["p99"] * 1000
    return [Row("/healthz p99 while the adversarial corpus is processed",
                f"{p99:.1f} ms (max {busy['healthz']['max'] * 1000:.1f}, failures {busy['failures']}, load {load})",
                f"idle p99 {idle['healthz']['p99'] * 1000:.1f} ms", None, f"<= {HEALTHZ_P99_MS:.0f} ms",
                judge(p99, HEALTHZ_P99_MS))]


ROWS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "startup": startup_rows, "startup-containerd": startup_rows, "status-latency": status_rows,
    "status-latency-containerd": status_rows,
    "footprint": footprint_rows, "cluster-startup": cluster_startup_rows,
    "cluster-footprint": cluster_footprint_rows, "hostile": hostile_rows,
}
RESULT_NAME = {"startup-containerd": "startup", "status-latency-containerd": "status-latency"}  # the bench that writes a part's result file


def newest_result(name: str, since: float, results: Path | None = None) -> Path | None:
    """The result file `name` wrote at or after `since` (epoch seconds), the newest if several."""
    found = [p for p in (results or RESULTS).glob(f"{name}-*.json") if p.stat().st_mtime >= since]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def parse_parts(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise ValueError(f"parts are {', '.join(PARTS)}; got {text!r}")
    return parts


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def run_part(part: str, plan: Plan) -> None:
    from bench import cluster_footprint, cluster_startup, footprint, hostile, startup, status_latency

    if part.endswith("-containerd"):
        before = os.environ.get("MKL_TEST_RUNTIME")
        os.environ["MKL_TEST_RUNTIME"] = "containerd"  # read by the agent harness at each agent's start
        try:
            await run_part(part.removesuffix("-containerd"), plan)
        finally:
            if before is None:
                del os.environ["MKL_TEST_RUNTIME"]
            else:
                os.environ["MKL_TEST_RUNTIME"] = before
    elif part == "startup":
        await startup.main(plan.startup_pods)
    elif part == "status-latency":
        await status_latency.main(plan.status_events)
    elif part == "footprint":
        await footprint.main([plan.footprint_pods], plan.footprint_probes, plan.footprint_duration)
    elif part == "cluster-startup":
        await cluster_startup.main(plan.cluster_pods)
    elif part == "cluster-footprint":
        await cluster_footprint.main(plan.cluster_footprint_pods, plan.cluster_footprint_duration)
    else:
        await hostile.main(plan.hostile_idle)


@dataclass
class Outcome:
    part: str
    seconds: float
    result_file: str | None
    error: str | None = None
    rows: list[Row] = field(default_factory=list)


async def measure(part: str, plan: Plan, run: Callable[[str, Plan], Awaitable[None]] = run_part) -> Outcome:
    """One part: its bench run, its result read back into rows; a failure becomes a row, not the end."""
    print(f"\n=== {part} (load average {loadavg()}) ===", flush=True)
    since = time.time() - 1  # result files are named and stamped to the second
    t0 = time.monotonic()
    try:
        await run(part, plan)
    except (Exception, SystemExit) as e:  # a bench's SystemExit is its failure message
        traceback.print_exc()
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]  # the log that may follow goes to the JSON
        return Outcome(part, time.monotonic() - t0, None, f"{type(e).__name__}: {e}",
                       [Row(part, f"failed: {first}"[:120], verdict="failed")])
    path = newest_result(RESULT_NAME.get(part, part), since)
    if path is None:
        return Outcome(part, time.monotonic() - t0, None, "no result file", [Row(part, "no result file", verdict="failed")])
    return Outcome(part, time.monotonic() - t0, str(path), None, ROWS[part](json.loads(path.read_text())))


def render(outcomes: list[Outcome]) -> str:
    """One Markdown table (it goes into docs/performance.md as printed)."""
    lines = ["| target | figure | floor / reference | ratio | limit | verdict |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(" ".join(str(c).replace("|", "/").split()) for c in r.cells()) + " |" for o in outcomes for r in o.rows]
    return "\n".join(lines)


async def main(parts: list[str], quick: bool) -> None:
    plan = QUICK if quick else FULL
    load_start = loadavg()
    print(f"targets: {', '.join(parts)} ({'quick' if quick else 'full'}); load average at start {load_start}", flush=True)
    outcomes = [await measure(part, plan) for part in parts]
    load_end = loadavg()
    print(f"\n=== issue 19 targets ({'quick' if quick else 'full'}) ===")
    print(render(outcomes))
    print(f"load average: start {load_start}, end {load_end}; parts took "
          + ", ".join(f"{o.part} {o.seconds:.0f} s" for o in outcomes))
    print("results:", write_result("targets", {
        "plan": asdict(plan), "quick": quick, "loadavg_start": load_start, "loadavg_end": load_end,
        "parts": [{**asdict(o), "rows": [asdict(r) for r in o.rows]} for o in outcomes]}))

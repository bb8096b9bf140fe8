"""The issue-19 targets table: rows, ratios and verdicts read back from the benches' result files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench import targets
from bench.cluster_footprint import traffic_table
from bench.common import summary
from bench.hostile import rows as hostile_table_rows
from bench.kubelet_reference import CATEGORIES, LEASE, NODE_STATUS, idle_reference
from bench.targets import (
    FULL,
    Row,
    cluster_footprint_rows,
    cluster_startup_rows,
    footprint_rows,
    hostile_rows,
    judge,
    measure,
    newest_result,
    parse_parts,
    render,
    runtime_event_latency,
    startup_rows,
    status_rows,
)


def test_judge_is_met_up_to_the_limit_inclusive() -> None:
    assert judge(1.15, 1.15) == "met"
    assert judge(1.16, 1.15) == "missed"
    assert judge(float("nan"), 1.15) == "n/a"


def test_startup_ratio_is_all_running_over_the_runtimes_floor_for_the_same_count() -> None:
    result = {"runs": [{"pods": 10, "runtime": "docker", "agent_total": 2.3, "direct_total": 2.0},
                       {"pods": 100, "runtime": "containerd", "agent_total": 20.0, "direct_total": 18.0}]}
    ten, hundred = startup_rows(result)
    assert ten.ratio == pytest.approx(1.15) and ten.verdict == "met" and "direct Docker 2.000 s" in ten.reference
    assert hundred.ratio == pytest.approx(20 / 18) and hundred.verdict == "met"
    assert "containerd" in hundred.target and "CRI floor" in hundred.reference
    result["runs"][0]["agent_total"] = 2.4
    assert startup_rows(result)[0].verdict == "missed"


def test_status_latency_without_the_runtimes_own_latency_is_reported_not_judged() -> None:
    result: dict[str, Any] = {"latency": summary([0.1, 0.2, 0.15]), "samples": [0.1, 0.2, 0.15]}
    assert runtime_event_latency(result) is None
    (row,) = status_rows(result)
    assert row.ratio is None and row.verdict == "n/a" and "not measured" in row.reference


@pytest.mark.parametrize("key", ["runtime_event", "docker_die_to_event"])  # lat19's name, or any other summary
def test_status_latency_ratio_is_read_from_the_runtime_latency_in_the_same_result(key: str) -> None:
    result: dict[str, Any] = {"latency": summary([0.1, 0.2]), key: {**summary([0.1, 0.125]), "n": 2}}
    found = runtime_event_latency(result)
    assert found is not None and found[0] == key
    (row,) = status_rows(result)
    assert row.ratio == pytest.approx(result["latency"]["p99"] / result[key]["p99"])
    assert row.verdict == "missed"  # 0.199 / 0.12475 > 1.2
    result[key] = summary([0.19, 0.2])
    assert status_rows(result)[0].verdict == "met"


def test_status_latency_reads_the_result_as_the_lat19_bench_writes_it() -> None:
    agent, runtime = [0.12, 0.15, 0.28], [0.10, 0.11, 0.25]  # p99 277.4 and 247.2 ms
    result = {"runtime": "docker", "latency": summary(agent), "samples": agent, "runtime_event": summary(runtime),
              "runtime_samples": runtime, "ratio_p99": summary(agent)["p99"] / summary(runtime)["p99"]}
    (row,) = status_rows(result)
    assert row.ratio == pytest.approx(result["ratio_p99"]) and row.verdict == "met"
    assert "runtime event (runtime_event) p99 247.2 ms" in row.reference


def test_status_latency_reports_the_runtimes_state_read_beside_its_event() -> None:
    agent, event, read = [0.10, 0.15], [0.07, 0.10], [0.09, 0.125]
    result = {"latency": summary(agent), "runtime_event": summary(event), "runtime_state_read": summary(read)}
    judged, reported = status_rows(result)
    assert judged.ratio == pytest.approx(summary(agent)["p99"] / summary(event)["p99"]) and judged.verdict == "missed"
    assert reported.ratio == pytest.approx(summary(agent)["p99"] / summary(read)["p99"])
    assert reported.verdict == "report" and "not running, p99 124.6 ms" in reported.reference
    result["runtime_state_read"] = summary([])  # no read answered: no row
    assert len(status_rows(result)) == 1


def test_footprint_judges_the_no_probe_run_and_reports_the_probed_one() -> None:
    result = {"runs": [{"pods": 100, "probe": "none", "agent_rss_mib": 61.4, "agent_cpu_s_per_min": 0.3},
                       {"pods": 100, "probe": "exec", "agent_rss_mib": 64.0, "agent_cpu_s_per_min": 1.2}]}
    rss, cpu, probed = footprint_rows(result)
    assert (rss.figure, rss.verdict) == ("61.4 MiB", "missed")
    assert (cpu.figure, cpu.verdict) == ("0.50 % of a core", "met")  # 0.3 CPU s per min = 0.5 % of a core
    assert probed.verdict == "report" and "2.00 % of a core" in probed.figure


def test_cluster_startup_compares_thirty_pods_with_the_kubelets_figure_only() -> None:
    result = {"runs": [{"pods": n, "total": t, "latency": summary([t])} for n, t in ((1, 0.4), (30, 8.0))]}
    one, thirty = cluster_startup_rows(result)
    assert one.ratio is None and one.reference == "-"
    assert thirty.ratio == pytest.approx(8.0 / 8.9) and thirty.verdict == "report"


def test_cluster_footprint_puts_each_kinds_rate_beside_the_idle_kubelets() -> None:
    ref = {"idle_per_min": idle_reference(10.0), "session_per_min": dict.fromkeys(CATEGORIES, 1.0)}
    run = {"pods": 30, "agent_rss_mib": 70.0, "agent_cpu_s_per_min": 0.6,
           "agent_requests_per_min_by_category": {**dict.fromkeys(CATEGORIES, 0.0), LEASE: 6.0, NODE_STATUS: 6.0}}
    rows = cluster_footprint_rows({"runs": [run], "kubelet_reference": ref})
    assert rows[0].figure == "70.0 MiB, 1.00 % of a core"
    by_kind = {r.target.split(": ", 1)[1]: r for r in rows[1:]}
    assert by_kind[f"{LEASE}/min"].ratio == pytest.approx(1.0)
    assert by_kind[f"{NODE_STATUS}/min"].ratio == pytest.approx(30.0)  # every 10 s vs every 5 min
    assert by_kind["GET/LIST/WATCH/min"].ratio is None  # no idle kubelet figure for reads
    text = traffic_table([run], ref)
    assert "agent, 30 pods" in text and "kubelet idle" in text and "kubelet session" in text
    assert len(text.splitlines()) == 2 + len(CATEGORIES)


def test_hostile_judges_the_corpus_phases_p99() -> None:
    result: dict[str, Any] = {"phases": [{"phase": "idle", "seconds": 10.0, "healthz": summary([0.001] * 10), "failures": 0,
                          "loadavg_end": [1.0, 2.0, 3.0]},
                         {"phase": "corpus", "seconds": 8.0, "healthz": summary([0.002] * 99 + [0.5] * 2),
                          "failures": 1, "loadavg_end": [4.0, 5.0, 6.0]}]}
    (row,) = hostile_rows(result)
    assert row.verdict == "missed" and "failures 1" in row.figure and "load 4.0 5.0 6.0" in row.figure
    assert hostile_table_rows(result)[1][4] == pytest.approx(result["phases"][1]["healthz"]["p99"] * 1000)


def test_parts_are_checked() -> None:
    assert parse_parts("hostile, startup") == ["hostile", "startup"]
    with pytest.raises(ValueError):
        parse_parts("startup,warp")
    with pytest.raises(ValueError):
        parse_parts(",")


async def test_a_containerd_part_runs_its_bench_on_containerd_then_restores_the_runtime(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import status_latency

    seen: list[str | None] = []

    async def fake_main(events: int) -> None:
        seen.append(os.environ.get("MKL_TEST_RUNTIME"))

    monkeypatch.setattr(status_latency, "main", fake_main)
    monkeypatch.delenv("MKL_TEST_RUNTIME", raising=False)
    plan = targets.QUICK
    await targets.run_part("status-latency-containerd", plan)
    await targets.run_part("status-latency", plan)
    assert seen == ["containerd", None] and "MKL_TEST_RUNTIME" not in os.environ
    assert targets.RESULT_NAME["status-latency-containerd"] == "status-latency"


def test_newest_result_is_the_latest_file_of_that_bench_since_the_part_began(tmp_path: Path) -> None:
    old, new, other = (tmp_path / n for n in ("startup-1.json", "startup-2.json", "startup_x-3.json"))
    for i, p in enumerate((old, new, other)):
        p.write_text("{}")
        os.utime(p, (1000 + i, 1000 + i))
    assert newest_result("startup", 1000, tmp_path) == new  # startup_x-3.json is another bench's
    assert newest_result("startup", 1001, tmp_path) == new
    assert newest_result("startup", 1003, tmp_path) is None


async def test_a_failed_part_becomes_a_row_and_a_finished_one_is_read_back(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(targets, "RESULTS", tmp_path)

    async def fails(part: str, plan: targets.Plan) -> None:
        raise AssertionError("timed out waiting for agent healthy; last=false\n--- agent log ---\n| a line |")

    out = await measure("cluster-startup", FULL, fails)
    assert out.error is not None and "--- agent log ---" in out.error  # the whole error, in the JSON
    assert out.rows[0].verdict == "failed" and out.rows[0].figure == "failed: timed out waiting for agent healthy; last=false"
    assert len(render([out]).splitlines()) == 3  # one row, whatever the error held

    async def writes(part: str, plan: targets.Plan) -> None:
        (tmp_path / "hostile-20261124-000000.json").write_text(json.dumps({"phases": [
            {"phase": p, "seconds": 1.0, "healthz": summary([0.003]), "failures": 0, "loadavg_end": [0.0] * 3}
            for p in ("idle", "corpus")]}))

    out = await measure("hostile", FULL, writes)
    assert out.error is None and out.rows[0].verdict == "met"
    header, rule, row = render([out]).splitlines()
    assert header == "| target | figure | floor / reference | ratio | limit | verdict |" and rule.count("|") == 7
    assert row.startswith("| /healthz p99 while the adversarial corpus is processed | 3.0 ms") and row.endswith(" met |")


def test_a_row_prints_no_ratio_where_there_is_none() -> None:
    assert Row("t", "1 s").cells() == ["t", "1 s", "-", "-", "-", "report"]
    assert Row("t", "1 s", ratio=float("nan")).cells()[3] == "-"

"""Failures the deterministic simulator (tests/sim) found, each as its minimal trace (docs/testing.md)."""

from __future__ import annotations

from tests.sim.run import run_trace
from tests.sim.workload import Event


def test_a_pod_rejected_after_an_agent_restart_stops_what_it_ran() -> None:
    # seed 22: five pods on a node of four, one of them finished; after a restart admission takes them in source
    # order, so a pod that ran before is rejected now. Its containers kept running, and after its deletion too
    # (upstream HandlePodCleanups kills every running pod no worker syncs).
    events = [Event("create", 50126, 0, 30.0), Event("create", 60877, 0, 10.0), Event("create", 14752, 0, 1.0),
              Event("create", 20682, 0, 0.1), Event("create", 7443, 0, 5.0), Event("crash", 65519, 0, 30.0)]
    out = run_trace(22, events)
    assert out.violation is None, out.violation


def test_a_pod_removed_while_it_waited_behind_its_name_after_a_restart_is_stopped() -> None:
    # seed 38: after an agent restart a pod that ran before waits behind an older pod of its name (re-admitted
    # first, in source order), so no worker owns what it runs; removed before it could start, its sandbox and
    # container ran on for ever. Upstream HandlePodCleanups kills, every housekeeping pass, a running runtime pod
    # no worker owns (grace 1).
    events = [Event("create", 49143, 0, 30.0), Event("create", 3221, 0, 5.0), Event("create", 32794, 0, 0.1),
              Event("create", 59928, 0, 0.5), Event("create", 38432, 0, 10.0), Event("create", 48866, 0, 0.5),
              Event("create", 39872, 0, 1.0), Event("crash", 45518, 0, 0.0), Event("delete", 8473, 0, 30.0),
              Event("fail", 37069, 1, 30.0), Event("create", 24256, 0, 10.0), Event("create", 31443, 0, 2.0),
              Event("delete", 10193, 0, 0.1), Event("create", 58117, 0, 10.0), Event("wait", 30788, 0, 30.0),
              Event("create", 17507, 0, 5.0), Event("crash", 34585, 0, 30.0)]
    out = run_trace(38, events)
    assert out.violation is None, out.violation


def test_a_sandbox_left_by_a_pod_removed_while_it_waited_after_a_restart_is_stopped() -> None:
    # seed 248: the same leak, a pod of a reused name whose sandbox ran when the agent restarted
    events = [Event("create", 64069, 0, 30.0), Event("delete", 34001, 0, 1.0), Event("create", 24639, 0, 30.0),
              Event("create", 37359, 0, 0.0), Event("delete", 29889, 0, 1.0), Event("create", 10529, 0, 0.1),
              Event("create", 47155, 0, 10.0), Event("create", 26201, 0, 0.0), Event("create", 54799, 0, 10.0),
              Event("create", 51446, 0, 30.0), Event("create", 35175, 0, 0.1), Event("create", 47022, 0, 5.0),
              Event("delete", 7642, 0, 30.0), Event("create", 54820, 0, 2.0), Event("delete", 43765, 0, 1.0),
              Event("create", 9239, 0, 0.1), Event("create", 40972, 0, 0.1), Event("delete", 37288, 0, 10.0),
              Event("delete", 33631, 0, 0.5), Event("delete", 52330, 0, 1.0), Event("create", 34588, 0, 1.0),
              Event("delete", 15205, 0, 0.0), Event("create", 10837, 0, 0.1), Event("crash", 51957, 0, 0.0)]
    out = run_trace(248, events)
    assert out.violation is None, out.violation


def test_a_container_killed_for_a_failed_probe_waits_out_its_back_off() -> None:
    # seed 14 (with pod shapes): a container whose startup probe always fails is killed and started again in the
    # same pass; the start read the killed instance (still running in the pass's state) as the latest one, so no
    # back-off was checked and it restarted every 5 s for ever. Upstream doBackOff reads the newest exited
    # instance: restarts after the first wait 10 s, 20 s, ...
    out = run_trace(14, [Event("create", 21620, 1, 32.0)])
    assert out.violation is None, out.violation


def test_a_pod_removed_during_a_node_shutdown_is_not_brought_back() -> None:
    # seed 7 (with pod shapes): the node shutdown manager lists its pods when the shutdown begins and stops the
    # priority groups one after the other; a pod removed from its source meanwhile was handed to a new pod worker,
    # which wrote a status for a pod gone (restart counts back to 0) and stayed
    events = [Event("create", 41761, 1, 5.0), Event("create", 3544, 0, 5.0), Event("shutdown", 61897, 0, 2.0)]
    out = run_trace(7, events)
    assert out.violation is None, out.violation

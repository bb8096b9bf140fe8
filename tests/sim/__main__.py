"""The simulator's command line (docs/testing.md, "Deterministic simulation").

    python -m tests.sim run --seeds 0:400 --steps 100 --procs 2     the CI mode
    python -m tests.sim long --hours 8 --steps 300                  random seeds until the time is up
    python -m tests.sim replay --seed 17 --steps 100 [-v]           one seed again, step by step
    python -m tests.sim shrink --seed 17 --steps 100                the shortest trace that still fails
    python -m tests.sim coverage --seeds 0:50 --steps 100           the planner's lines and arcs the runs reach
    ... --mutate no-backoff                                          with a bug put in on purpose
    ... --order fifo                                                 asyncio's FIFO ready queue, not the seed's order

Set-iteration order depends on PYTHONHASHSEED: the command runs itself again with PYTHONHASHSEED=0 so a seed
replays the same in every process.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Iterator

from tests.sim import mutations
from tests.sim.planner_coverage import PlannerCoverage
from tests.sim.run import Outcome, run_seed, run_trace
from tests.sim.shrink import shrink
from tests.sim.workload import generate


def _replay_command(seed: int, steps: int, mutate: str, seeded_order: bool = True) -> str:
    m = f" --mutate {mutate}" if mutate else ""
    o = "" if seeded_order else " --order fifo"
    return f"python -m tests.sim replay --seed {seed} --steps {steps}{m}{o}"


_SEEDED_ORDER = True


def _init(mutate: str, seeded_order: bool = True) -> None:
    global _SEEDED_ORDER
    _SEEDED_ORDER = seeded_order
    logging.getLogger().setLevel(logging.ERROR)  # the agent's warnings are expected under injected faults
    if mutate:
        mutations.apply(mutate)


def _one(args: tuple[int, int]) -> tuple[int, str, int, float, float]:
    seed, steps = args
    t0 = time.perf_counter()
    out = run_seed(seed, steps, seeded_order=_SEEDED_ORDER)
    return seed, str(out.violation or ""), out.steps, out.virtual_seconds, time.perf_counter() - t0


def _seeds(spec: str) -> range:
    a, _, b = spec.partition(":")
    return range(int(a), int(b)) if b else range(int(a), int(a) + 1)


def _load_known(path: str) -> dict[int, str]:
    """`seed invariant  # what it is` per line: open findings, expected to fail until fixed."""
    known: dict[int, str] = {}
    if path:
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = line.split("#", 1)[0].split()
                if len(words) == 2:
                    known[int(words[0])] = words[1]
    return known


def _run_many(seeds: Iterator[int], steps: int, procs: int, mutate: str, deadline: float | None,
              stop_on_failure: bool, known: dict[int, str] | None = None, seeded_order: bool = True) -> int:
    t0 = time.perf_counter()
    known = known or {}
    failures: list[tuple[int, str, int]] = []
    seen_known: set[int] = set()
    ran: set[int] = set()
    n = 0
    cpu = 0.0
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(procs, initializer=_init, initargs=(mutate, seeded_order)) as pool:
        for seed, violation, at, _virtual, took in pool.imap_unordered(_one, ((s, steps) for s in seeds),
                                                                     chunksize=4):
            n += 1
            cpu += took
            ran.add(seed)
            if violation and seed in known and violation.startswith(known[seed] + ":"):
                seen_known.add(seed)
                print(f"seed {seed} fails as known: {violation}", flush=True)
                continue
            if violation:
                failures.append((seed, violation, at))
                print(f"seed {seed} FAILED at step {at}: {violation}\n  replay: "
                      f"{_replay_command(seed, steps, mutate, seeded_order)}", flush=True)
                if stop_on_failure:
                    pool.terminate()
                    break
            if deadline is not None and time.perf_counter() > deadline:
                pool.terminate()
                break
    wall = time.perf_counter() - t0
    fixed = sorted((set(known) & ran) - seen_known)
    for seed in fixed:
        print(f"seed {seed} is listed as a known failure ({known[seed]}) but passes: take it off the list")
    print(f"{n} seeds of {steps} steps in {wall:.1f} s wall on {procs} processes "
          f"({1000 * cpu / max(n, 1):.0f} ms a seed): {len(failures)} failed, {len(seen_known)} known failures",
          flush=True)
    return 1 if failures or fixed else 0


def _random_seeds() -> Iterator[int]:
    rng = random.Random()
    while True:
        yield rng.randrange(1 << 40)


def main(argv: list[str]) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "tests.sim", *argv])
    p = argparse.ArgumentParser(prog="python -m tests.sim")
    p.add_argument("command", choices=("run", "long", "replay", "shrink", "coverage"))
    p.add_argument("--seeds", default="0:400", help="run: A:B (B excluded)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--hours", type=float, default=8.0)
    p.add_argument("--mutate", default="", help=f"one of {', '.join(mutations.MUTATIONS)}")
    p.add_argument("--stop-on-failure", action="store_true")
    p.add_argument("--known", default="", help="a file of open findings (seed invariant), expected to fail")
    p.add_argument("--order", choices=("seeded", "fifo"), default="seeded",
                   help="the order of the tasks ready at once: drawn from the seed, or asyncio's FIFO")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    seeded = a.order == "seeded"
    if a.command == "run":
        return _run_many(iter(_seeds(a.seeds)), a.steps, a.procs, a.mutate, None, a.stop_on_failure,
                         _load_known(a.known), seeded)
    if a.command == "long":
        return _run_many(_random_seeds(), a.steps, a.procs, a.mutate, time.perf_counter() + a.hours * 3600,
                         a.stop_on_failure, seeded_order=seeded)
    _init(a.mutate, seeded)
    if a.command == "coverage":
        with PlannerCoverage() as cov:
            for seed in _seeds(a.seeds):
                run_seed(seed, a.steps, seeded_order=seeded)
        print(f"{len(_seeds(a.seeds))} seeds of {a.steps} steps, {cov.report()}")
        return 0
    if a.command == "replay":
        out: Outcome = run_seed(a.seed, a.steps, seeded_order=seeded)
        if a.verbose:
            print("\n".join(out.log))
        print(f"seed {a.seed}: {out.violation or 'passed'} after {out.steps} steps, {out.virtual_seconds:.0f} "
              f"virtual s, digest {out.digest}")
        return 1 if out.failed else 0
    first = run_seed(a.seed, a.steps, seeded_order=seeded)
    if first.violation is None:
        print(f"seed {a.seed} passes: nothing to shrink")
        return 0
    events = shrink(a.seed, generate(a.seed, a.steps), first.violation.name, seeded_order=seeded,
                    report=lambda s: print("  " + s, flush=True))
    final = run_trace(a.seed, events, seeded_order=seeded)
    print(f"seed {a.seed}: {final.violation}\nminimal trace ({len(events)} events), for a regression test:")
    print("EVENTS = [\n" + "".join(f"    {e},\n" for e in events) + "]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

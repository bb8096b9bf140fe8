"""python -m bench startup|cri-calls|status-latency|footprint|churn|precision|stream-latency|stats-scrape|scrape-cost|cluster-startup|cluster-footprint|hostile|targets|soak [options]"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path


def _counts(text: str) -> list[int]:
    from bench.common import parse_counts

    try:
        return parse_counts(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parts(text: str) -> list[str]:
    from bench.targets import parse_parts

    try:
        return parse_parts(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main() -> None:
    from bench.targets import PARTS

    p = argparse.ArgumentParser(prog="python -m bench")
    sub = p.add_subparsers(dest="name", required=True)
    s = sub.add_parser("startup", help="pods Running after being written at once, vs direct Docker")
    s.add_argument("--pods", default="1,10,30,100", help="comma-separated pod counts")
    s = sub.add_parser("cri-calls", help="CRI round trips through the agent's CRI client (containerd)")
    s.add_argument("--pods", type=int, default=10, help="pods in place (one container each)")
    s.add_argument("--calls", type=int, default=200, help="timed calls per case")
    s = sub.add_parser("status-latency", help="container killed -> /pods shows it terminated")
    s.add_argument("--events", type=int, default=50)
    s = sub.add_parser("footprint", help="agent RSS and CPU when idle")
    s.add_argument("--pods", default="0,30,100")
    s.add_argument("--probes", default="none,exec,http")
    s.add_argument("--duration", type=float, default=60.0, help="seconds measured per case")
    s = sub.add_parser("churn", help="waves of pods created and removed: agent RSS growth and leftovers")
    s.add_argument("--pods", type=int, default=800)
    s.add_argument("--wave", type=int, default=20)
    s = sub.add_parser("precision", help="probe jitter, SIGKILL timing, restart delays")
    s.add_argument("--samples", type=int, default=60)
    s.add_argument("--grace", type=int, default=2)
    s.add_argument("--kills", type=int, default=5)
    s.add_argument("--restarts", type=int, default=4, help="0 skips; 4 takes about 75 s")
    s = sub.add_parser("stream-latency", help="exec round trip (WebSocket, SPDY, docker exec) and log-follow latency")
    s.add_argument("--samples", type=int, default=50, help="exec round trips per way")
    s.add_argument("--lines", type=int, default=100, help="log lines followed")
    s.add_argument("--interval", type=float, default=0.1, help="seconds between log lines")
    s = sub.add_parser("stats-scrape", help="time per /stats/summary, /metrics/resource, /metrics/cadvisor; one pass")
    s.add_argument("--pods", type=int, default=30)
    s.add_argument("--requests", type=int, default=50, help="sequential requests per path")
    s.add_argument("--passes", type=int, default=5, help="housekeeping passes timed in the bench process")
    s = sub.add_parser("scrape-cost", help="agent CPU idle with N pods, scraped every 15 s on all four metrics paths vs not")
    s.add_argument("--pods", type=int, default=100)
    s.add_argument("--window", type=float, default=60.0, help="seconds per measured window")
    s.add_argument("--rounds", type=int, default=2, help="pairs of (unscraped, scraped) windows")
    s = sub.add_parser("cluster-startup", help="pods created through the API at once -> Ready as the API shows them")
    s.add_argument("--pods", type=_counts, default="1,10,30,100", help="comma-separated pod counts")
    s.add_argument("--profile", type=Path, default=None,
                   help="cProfile the agent from the first create to all Ready, written to PROFILE-<pods> (pstats)")
    s.add_argument("--no-floor", action="store_true", help="skip the runtime floor (the same pods, direct)")
    s.add_argument("--api-lag", action="store_true",
                   help="poll the agent's /pods every 50 ms for the API lag columns (adds to the agent's CPU)")
    s = sub.add_parser("cluster-footprint", help="the joined agent's RSS, CPU and API requests, idle with API pods")
    s.add_argument("--pods", type=_counts, default="0,30,100")
    s.add_argument("--duration", type=float, default=60.0, help="seconds measured per case")
    s.add_argument("--settle", type=float, default=15.0, help="seconds between all Ready and the window")
    s = sub.add_parser("hostile", help="/healthz latency idle and while the adversarial manifest corpus is processed")
    s.add_argument("--idle", type=float, default=10.0, help="seconds of idle polling before the corpus")
    s = sub.add_parser("targets", help="every issue-19 target in one run, one table (15-25 min in full)")
    s.add_argument("--only", type=_parts, default=",".join(PARTS), help=f"comma-separated parts of {','.join(PARTS)}")
    s.add_argument("--quick", action="store_true", help="fewer pod counts, events and seconds (about 6-8 min)")
    s = sub.add_parser("soak", help="pods run, crash, exit and are deleted for a while: RSS growth and leftovers")
    s.add_argument("--minutes", type=float, default=60.0)
    s.add_argument("--per-kind", type=int, default=2, help="pods of each kind (sleeper, crasher, one-shot) per wave")
    a = p.parse_args()
    if a.name == "soak":
        from bench import soak

        asyncio.run(soak.main(a.minutes, a.per_kind))
        return
    if a.name == "cluster-startup":
        from bench import cluster_startup

        asyncio.run(cluster_startup.main(a.pods, a.profile, not a.no_floor, a.api_lag))
    elif a.name == "cluster-footprint":
        from bench import cluster_footprint

        asyncio.run(cluster_footprint.main(a.pods, a.duration, a.settle))
    elif a.name == "targets":
        from bench import targets

        asyncio.run(targets.main(a.only, a.quick))
    elif a.name == "hostile":
        from bench import hostile

        asyncio.run(hostile.main(a.idle))
    elif a.name == "startup":
        from bench import startup

        asyncio.run(startup.main([int(x) for x in a.pods.split(",")]))
    elif a.name == "cri-calls":
        from bench import cri_calls

        asyncio.run(cri_calls.main(a.pods, a.calls))
    elif a.name == "status-latency":
        from bench import status_latency

        asyncio.run(status_latency.main(a.events))
    elif a.name == "churn":
        from bench import churn

        asyncio.run(churn.main(a.pods, a.wave))
    elif a.name == "stream-latency":
        from bench import stream_latency

        asyncio.run(stream_latency.main(a.samples, a.lines, a.interval))
    elif a.name == "scrape-cost":
        from bench import scrape_cost

        asyncio.run(scrape_cost.main(a.pods, a.window, a.rounds))
    elif a.name == "stats-scrape":
        from bench import stats_scrape

        asyncio.run(stats_scrape.main(a.pods, a.requests, a.passes))
    elif a.name == "footprint":
        from bench import footprint

        asyncio.run(footprint.main([int(x) for x in a.pods.split(",")], a.probes.split(","), a.duration))
    else:
        from bench import precision

        asyncio.run(precision.main(a.samples, a.grace, a.kills, a.restarts))


if __name__ == "__main__":
    main()

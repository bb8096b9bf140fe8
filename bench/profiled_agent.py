"""`python -m bench.profiled_agent OUT -m minikubelet run ...`: the agent under cProfile, on at SIGUSR1, off and
written to OUT (pstats) at SIGUSR2, so a bench profiles only the window it measures. Timed in the main thread's
CPU seconds (the event loop, where the agent's Python work runs), not wall time: the machine is shared."""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time
from types import FrameType


def main() -> None:
    out, flag, module, *args = sys.argv[1:]
    if flag != "-m":
        raise SystemExit("usage: python -m bench.profiled_agent OUT -m MODULE [ARGS...]")
    prof = cProfile.Profile(time.thread_time)

    def start(_sig: int, _frame: FrameType | None) -> None:
        prof.enable()

    def stop(_sig: int, _frame: FrameType | None) -> None:
        prof.disable()
        prof.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

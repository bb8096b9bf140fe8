"""exec probes: run argv in the container through the runtime; exit 0 is success."""

from __future__ import annotations

import asyncio
import json

from cri.runtime import RuntimeService
from probes.result import ProbeOutcome, Result, truncate_output

# Docker cannot kill a timed-out exec; the runtime returns timed_out itself. This grace only
# guards against a runtime call that never comes back at all.
_RUNTIME_GRACE = 5.0


async def probe_exec(
    runtime: RuntimeService, container_id: str, command: list[str], timeout_s: float
) -> ProbeOutcome:
    timed_out = ProbeOutcome(Result.FAILURE, f"command {json.dumps(' '.join(command))} timed out")
    try:
        async with asyncio.timeout(timeout_s + _RUNTIME_GRACE):
            result = await runtime.exec_sync(container_id, command, timeout_s)
    except TimeoutError:
        return timed_out
    except Exception as err:  # Any runtime error means the check could not run: Unknown.
        return ProbeOutcome(Result.UNKNOWN, str(err) or type(err).__name__)
    if result.timed_out:
        return timed_out
    output = truncate_output(result.stdout + result.stderr)
    if result.exit_code == 0:
        return ProbeOutcome(Result.SUCCESS, output)
    return ProbeOutcome(Result.FAILURE, output)

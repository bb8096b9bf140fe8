"""`python -m tests.cri_cleanup unix:///…/containerd.sock`: stop and remove every pod sandbox of a CRI
runtime (their containers and CNI networks go with them). `scripts/testenv down` runs it."""

from __future__ import annotations

import asyncio
import sys

from cri.remote import RemoteRuntime


async def remove_all(endpoint: str) -> int:
    runtime = RemoteRuntime(endpoint)
    try:
        sandboxes = await runtime.list_pod_sandboxes()
        for sandbox in sandboxes:
            await runtime.remove_pod_sandbox(sandbox.id)
        return len(sandboxes)
    finally:
        await runtime.close()


if __name__ == "__main__":
    removed = asyncio.run(remove_all(sys.argv[1]))
    if removed:
        print(f"removed {removed} CRI pod sandboxes")

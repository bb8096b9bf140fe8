"""The manifest parser process's side (`python -m minikubelet.sources.parser_process`); the agent's side is
`manifest_worker.ProcessParser`, which documents the frames.

Kept apart from the agent's side so that starting a worker imports no asyncio (nor ssl through it): the worker is
started when the first manifest needs parsing, and each import here is on that pod's path.
"""

from __future__ import annotations

import json
import marshal
import os
import resource
import struct
import sys
from typing import IO, Any

from minikubelet.sources.static_pod import HTTP_SOURCE, guarded_reply, make_static_pod, parse_manifest
from minikubelet.sources.url_manifest import build_url_pods

ADDRESS_SPACE_LIMIT = 2 << 30
RECYCLE_RSS = 128 << 20  # a worker that grew past this exits after answering
WORKER_NICENESS = 10
FRAME_LEN = struct.Struct(">I")
WARM_UP = b"apiVersion: v1\nkind: Pod\nmetadata: {name: warm-up}\nspec: {containers: [{name: c, image: i}]}\n"


def build_static_pod(data: bytes, filename: str, node: str, seen: float | None) -> dict[str, Any]:
    """The reply for one manifest: {"pod": ...} or {"error", "reason", "errors"}."""
    def build() -> dict[str, Any]:
        pod = make_static_pod(parse_manifest(data, filename), node, filename, seen=seen)
        return {"pod": dict(pod), "warnings": list(pod.warnings)}

    return guarded_reply(build)


def _read_exact(f: IO[bytes], n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_blocking_frame(f: IO[bytes]) -> bytes | None:
    head = _read_exact(f, FRAME_LEN.size)
    if head is None:
        return None
    return _read_exact(f, FRAME_LEN.unpack(head)[0])


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    # The validation modules load on a pod's first parse (~9 ms of CPU, more than a small pod's parse): here, before
    # the niceness, so a worker started ahead of its first manifest is ready for it.
    build_static_pod(WARM_UP, "/warm-up.yaml", "node", None)
    # Parsing is background work: on a busy node the agent's event loop (health, pod workers) must win the CPU
    # over a worker chewing through a pile of manifests.
    os.nice(WORKER_NICENESS)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = _read_blocking_frame(inp)
        data = _read_blocking_frame(inp) if header is not None else None
        if header is None or data is None:
            return  # the agent closed the pipe (or died)
        req = json.loads(header)
        build = build_url_pods if req.get("source") == HTTP_SOURCE else build_static_pod
        reply = build(data, str(req["filename"]), str(req["node"]), req["seen"])
        del data
        leave = _rss() > RECYCLE_RSS
        if leave:
            reply["exit"] = True
        payload = marshal.dumps(reply)
        out.write(FRAME_LEN.pack(len(payload)) + payload)
        out.flush()
        if leave:
            return


if __name__ == "__main__":
    main()

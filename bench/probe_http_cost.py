"""probe-http-cost: the httpGet prober's memory and CPU: RSS after `import probes.http` and after a first probe,
then CPU seconds of this process per probe over N probes against a loopback server in a child process.

`python -m bench.probe_http_cost [probes]`: no Docker needed; the server is a raw asyncio one (in its own
process, so its CPU is not counted) answering 200 with a short body and closing, as a pod's health endpoint.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

_SERVER = r"""
import asyncio, sys
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
class P(asyncio.Protocol):
    def connection_made(self, t): self.t = t; self.buf = b""
    def data_received(self, d):
        self.buf += d
        if b"\r\n\r\n" in self.buf: self.t.write(ANSWER); self.t.close()
async def main():
    srv = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def _run(port: int, n: int) -> None:
    before = rss_kib()
    from probes.http import probe_headers, probe_http, probe_url

    imported = rss_kib()
    url = probe_url("HTTP", "127.0.0.1", port, "/healthz")
    first = await probe_http(url, probe_headers([]), 1.0)
    assert first.output == "ok", first
    probed = rss_kib()
    start = time.process_time()
    for _ in range(n):
        outcome = await probe_http(url, probe_headers([]), 1.0)
        assert outcome.output == "ok", outcome
    cpu = time.process_time() - start
    aiohttp = "aiohttp" in sys.modules
    print(f"rss_before_kib={before} rss_after_import_kib={imported} rss_after_first_probe_kib={probed} "
          f"aiohttp_loaded={aiohttp} probes={n} cpu_s={cpu:.3f} cpu_ms_per_probe={cpu * 1000 / n:.3f}")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    server = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        asyncio.run(_run(port, n))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()

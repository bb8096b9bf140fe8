"""grpc.health.v1 test server: SERVING while $HEALTHY_FILE exists, NOT_SERVING otherwise.

Environment: PORT (default 50051), HEALTHY_FILE (default /tmp/healthy), SERVICES (comma-separated
service names that report the same status as the overall "" service; default none)."""

import asyncio
import os
import signal

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


async def main() -> None:
    port = int(os.environ.get("PORT", "50051"))
    flag = os.environ.get("HEALTHY_FILE", "/tmp/healthy")
    services = [""] + [s for s in os.environ.get("SERVICES", "").split(",") if s]
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_insecure_port(f"0.0.0.0:{port}")
    await server.start()
    print(f"grpc-health: serving on :{port}, healthy while {flag} exists", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    last = None
    while not stop.is_set():
        status = (
            health_pb2.HealthCheckResponse.SERVING if os.path.exists(flag)
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        if status != last:
            for name in services:
                await servicer.set(name, status)
            print(f"grpc-health: {health_pb2.HealthCheckResponse.ServingStatus.Name(status)}", flush=True)
            last = status
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except TimeoutError:
            pass
    await server.stop(1)


asyncio.run(main())

"""The prepared guests: each lab guest booted once from the image, its test images loaded, the agent's venv
installed by `lab/provision-worker.sh --install-only`, then saved with qemu's `savevm` (disk and RAM in one
qcow2 overlay) in the lab cache. Later runs copy that overlay and resume it with `-loadvm`: ssh answers in
seconds instead of a TCG boot of one to five minutes, and provisioning only installs the project's wheel
and joins.

The cache key covers everything the saved guest holds: the image, the dependency wheels, the test images'
recipe, the provisioning script, this module and the guest's identity (name, address, MAC, memory, Docker's
cgroup driver). A snapshot also holds the guest's address, so there is one per guest.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import time
from pathlib import Path

from tests.lab import provision
from tests.lab.guest import Guest, GuestError

SNAPSHOT = "prepared"


def cache_key(guest: Guest, wheels: Path) -> str:
    h = hashlib.sha256()
    h.update(guest.image.path.name.encode())
    for whl in sorted(wheels.glob("*.whl")):
        if not whl.name.startswith("minikubelet-"):
            h.update(whl.name.encode())
    for f in ("scripts/images/images.env", "scripts/images/build", "scripts/images/pause.c",
              "lab/provision-worker.sh", "tests/lab/snapshot.py"):
        h.update((provision.REPO / f).read_bytes())
    h.update(" ".join(guest.qemu_argv()).replace(str(guest.dir), "").encode())
    h.update(provision.CGROUP_DRIVERS[guest.name].encode())
    return h.hexdigest()[:16]


async def _prepare(guest: Guest, wheels: Path, workdir: Path) -> dict[str, float]:
    """Boot from the image, install, save; leaves `guest.overlay` with the snapshot and qemu stopped."""
    times: dict[str, float] = {}
    t0 = time.monotonic()
    await guest.boot()
    times["boot to ssh"] = await guest.wait_ssh()
    t1 = time.monotonic()
    await provision.import_test_images(guest, workdir)
    times["test images"] = time.monotonic() - t1
    t1 = time.monotonic()
    await guest.put_dir(wheels, "/root/wheelhouse")
    await guest.put("/root/provision-worker.sh", (provision.REPO / "lab/provision-worker.sh").read_bytes(), "0755")
    await guest.sh("/root/provision-worker.sh --install-only --wheelhouse /root/wheelhouse --cgroup-driver "
                   + provision.CGROUP_DRIVERS[guest.name], timeout=1500)
    times["provision-worker.sh --install-only"] = time.monotonic() - t1
    # the saved disk must be consistent without the guest's page cache
    await guest.sh("sync")
    t1 = time.monotonic()
    out = await guest.monitor_command(f"savevm {SNAPSHOT}")
    if "rror" in out:
        raise GuestError(f"{guest.name}: savevm failed: {out}")
    times["savevm"] = time.monotonic() - t1
    await guest.monitor_command("quit")
    for _ in range(100):
        if guest.qemu_pid() is None:
            break
        await asyncio.sleep(0.1)
    times["total"] = time.monotonic() - t0
    return times


async def prepared_overlays(guests: list[Guest], wheels: Path, cache: Path, rundir: Path,
                            timings: dict[str, float]) -> None:
    """Put each guest's prepared overlay (from the cache, made first when missing) at `guest.overlay`. The
    guests that prepare them run under `rundir` (scripts/test-lab's teardown stops them), and only a finished
    snapshot enters the cache."""
    keys = {g.name: cache_key(g, wheels) for g in guests}
    missing = [g for g in guests if not (cache / f"prepared-{keys[g.name]}" / "done").exists()]
    if missing:
        workdir = rundir / "prepare"
        shutil.rmtree(workdir, ignore_errors=True)
        work = {g.name: Guest(g.image, workdir, g.name, g.index, subnet=g.subnet, tap=g.tap,
                              memory_mib=g.memory_mib, cpus=g.cpus) for g in missing}
        try:
            results = await asyncio.gather(*(_prepare(w, wheels, workdir) for w in work.values()))
        finally:
            await asyncio.gather(*(w.kill() for w in work.values()))
        for name, times in zip(work, results, strict=True):
            for step, seconds in times.items():
                timings[f"snapshot {name}: {step}"] = seconds
        for g in missing:
            final = cache / f"prepared-{keys[g.name]}"
            shutil.rmtree(final, ignore_errors=True)
            final.mkdir(parents=True)
            shutil.move(work[g.name].overlay, final / "disk.qcow2")
            (final / "done").touch()
        shutil.rmtree(workdir, ignore_errors=True)
        # snapshots of older recipes are dead weight (a gigabyte each)
        wanted = {f"prepared-{k}" for k in keys.values()}
        for old in cache.glob("prepared-*"):
            if old.name not in wanted:
                shutil.rmtree(old, ignore_errors=True)
    t0 = time.monotonic()
    for g in guests:
        g.dir.mkdir(parents=True, exist_ok=True)
        # -loadvm finds internal snapshots only in the top image of the chain, so a copy and not an overlay
        await asyncio.to_thread(shutil.copyfile, cache / f"prepared-{keys[g.name]}" / "disk.qcow2", g.overlay)
    timings["copy of the prepared overlays"] = time.monotonic() - t0

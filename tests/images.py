"""Names of the local test images, read from scripts/images/images.env (the one place they are written).

The images are built offline by ``scripts/testenv up`` (see scripts/images/build); nothing is pulled.

    from tests.images import BUSYBOX_IMAGE, PAUSE_IMAGE
"""

from __future__ import annotations

from pathlib import Path

IMAGES_ENV = Path(__file__).resolve().parent.parent / "scripts" / "images" / "images.env"


def _read_env(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path}: not NAME=value: {raw!r}")
        values[key.strip()] = value.strip()
    return values


def _aliases(value: str) -> tuple[str, ...]:
    return tuple(name for name in value.split(",") if name)


_ENV = _read_env(IMAGES_ENV)

#: The sandbox image: ENTRYPOINT ["/pause"]; exits 0 on SIGTERM/SIGINT, reaps zombies.
PAUSE_IMAGE: str = _ENV["PAUSE_IMAGE"]
#: Other tags of the pause image (names used by seed manifests).
PAUSE_ALIASES: tuple[str, ...] = _aliases(_ENV.get("PAUSE_ALIASES", ""))
#: Debian's busybox with its libraries, NSS and a minimal /etc; CMD ["sh"]; applets in /bin.
BUSYBOX_IMAGE: str = _ENV["BUSYBOX_IMAGE"]
#: Other tags of the busybox image: busybox:1.28, busybox:latest, alpine:latest.
BUSYBOX_ALIASES: tuple[str, ...] = _aliases(_ENV.get("BUSYBOX_ALIASES", ""))
#: python3 + dnspython + scripts/images/cluster-dns/server.py: answers the cluster domain from a hosts-style zone file.
CLUSTER_DNS_IMAGE: str = _ENV["CLUSTER_DNS_IMAGE"]
#: The busybox image plus Debian's dynamic curl (OpenSSL): for HTTPS clients that verify the server.
CURL_IMAGE: str = _ENV["CURL_IMAGE"]
#: Image label whose value is the hash of the build sources.
BUILD_HASH_LABEL: str = _ENV["BUILD_HASH_LABEL"]

#: Every local image name, aliases included.
ALL_IMAGES: tuple[str, ...] = (PAUSE_IMAGE, *PAUSE_ALIASES, BUSYBOX_IMAGE, *BUSYBOX_ALIASES)

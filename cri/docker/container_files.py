"""Files the Engine keeps for each container under its data root (`<DockerRootDir>/containers/<id>/`):
resolv.conf and the json-file log. Found there, they cost no inspect; not found (the data root unknown, a
remapped or remote Engine), the caller asks the Engine (`ResolvConfPath`, `LogPath`)."""

from __future__ import annotations

import os


def container_file(data_root: str, container_id: str, name: str) -> str:
    """The path of `name` in the container's directory if it is there, else ""."""
    if not data_root or not container_id:
        return ""
    path = os.path.join(data_root, "containers", container_id, name)
    return path if os.path.exists(path) else ""


def json_log_name(container_id: str) -> str:
    """The json-file driver's log file name (the driver every container of ours is created with)."""
    return f"{container_id}-json.log"

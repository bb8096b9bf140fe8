"""Image references normalised the way Docker does (distribution/reference ParseNormalizedNamed)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

DEFAULT_DOMAIN = "docker.io"
LEGACY_DEFAULT_DOMAIN = "index.docker.io"
OFFICIAL_REPO_PREFIX = "library/"
DEFAULT_TAG = "latest"
DOCKER_IMAGE_ID_PREFIX = "docker://"
DOCKER_PULLABLE_IMAGE_ID_PREFIX = "docker-pullable://"

_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-fA-F0-9]{32,}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")


class InvalidReferenceError(ValueError):
    pass


@dataclass(frozen=True)
class ImageReference:
    domain: str
    path: str  # e.g. "library/busybox"
    tag: str = ""
    digest: str = ""

    @property
    def repository(self) -> str:
        return f"{self.domain}/{self.path}"

    @property
    def pull_tag(self) -> str:
        """What goes in the pull API's `tag` parameter; Docker pulls every tag when it is empty."""
        return self.digest or self.tag or DEFAULT_TAG

    def __str__(self) -> str:
        if self.digest:
            tag = f":{self.tag}" if self.tag else ""
            return f"{self.repository}{tag}@{self.digest}"
        return f"{self.repository}:{self.tag or DEFAULT_TAG}"


def parse_reference(image: str) -> ImageReference:
    """`busybox` -> docker.io/library/busybox:latest; `host:5000/x@sha256:..` keeps its domain."""
    if not image or image != image.strip():
        raise InvalidReferenceError(f"invalid reference format: {image!r}")
    remainder, _, digest = image.partition("@")
    if digest and not _DIGEST.match(digest):
        raise InvalidReferenceError(f"invalid digest in reference {image!r}")
    tag = ""
    last_colon = remainder.rfind(":")
    if last_colon > remainder.rfind("/"):
        remainder, tag = remainder[:last_colon], remainder[last_colon + 1 :]
        if not _TAG.match(tag):
            raise InvalidReferenceError(f"invalid tag in reference {image!r}")
    first, sep, rest = remainder.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        domain, path = first, rest
    else:
        domain, path = DEFAULT_DOMAIN, remainder
    if domain == LEGACY_DEFAULT_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = OFFICIAL_REPO_PREFIX + path
    if not path or not all(_PATH_COMPONENT.match(part) for part in path.split("/")):
        raise InvalidReferenceError(f"invalid reference format: repository name must be lowercase: {image!r}")
    return ImageReference(domain, path, tag, digest)


def image_ref_for(image_id: str, image_inspect: dict[str, Any] | None) -> str:
    """ContainerStatus.imageID as cri-dockerd reports it (toPullableImageID)."""
    digests = (image_inspect or {}).get("RepoDigests") or []
    if digests:
        return DOCKER_PULLABLE_IMAGE_ID_PREFIX + str(digests[0])
    return DOCKER_IMAGE_ID_PREFIX + image_id

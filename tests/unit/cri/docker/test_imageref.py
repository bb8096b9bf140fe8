"""Image reference normalisation as Docker does it, and cri-dockerd's imageID format."""

from __future__ import annotations

import pytest

from cri.docker.imageref import InvalidReferenceError, image_ref_for, parse_reference

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("image", "full", "repository", "pull_tag"),
    [
        ("busybox", "docker.io/library/busybox:latest", "docker.io/library/busybox", "latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36", "docker.io/library/busybox", "1.36"),
        ("bitnami/nginx", "docker.io/bitnami/nginx:latest", "docker.io/bitnami/nginx", "latest"),
        ("index.docker.io/nginx:1", "docker.io/library/nginx:1", "docker.io/library/nginx", "1"),
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10", "registry.k8s.io/pause", "3.10"),
        ("localhost:5000/app", "localhost:5000/app:latest", "localhost:5000/app", "latest"),
        ("localhost/app:v2", "localhost/app:v2", "localhost/app", "v2"),
        (f"nginx@{DIGEST}", f"docker.io/library/nginx@{DIGEST}", "docker.io/library/nginx", DIGEST),
        (f"nginx:1.25@{DIGEST}", f"docker.io/library/nginx:1.25@{DIGEST}", "docker.io/library/nginx", DIGEST),
    ],
)
def test_parse_reference(image: str, full: str, repository: str, pull_tag: str) -> None:
    ref = parse_reference(image)
    assert (str(ref), ref.repository, ref.pull_tag) == (full, repository, pull_tag)


@pytest.mark.parametrize("image", ["", "Busybox", "busybox:", "nginx@sha256:xyz", " busybox", "a//b"])
def test_invalid_references(image: str) -> None:
    with pytest.raises(InvalidReferenceError):
        parse_reference(image)


def test_image_ref_prefers_repo_digest() -> None:
    image_id = "sha256:" + "cd" * 32
    assert image_ref_for(image_id, None) == f"docker://{image_id}"
    assert image_ref_for(image_id, {"RepoDigests": []}) == f"docker://{image_id}"
    digests = {"RepoDigests": [f"busybox@{DIGEST}", f"mirror/busybox@{DIGEST}"]}
    assert image_ref_for(image_id, digests) == f"docker-pullable://busybox@{DIGEST}"

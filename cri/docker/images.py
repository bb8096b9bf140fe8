"""Image operations (CRI ImageService) on the Docker Engine."""

from __future__ import annotations

import base64
import json

from cri.docker.client import DockerAPIError, DockerClient
from cri.docker.convert import image_from_inspect, image_from_summary
from cri.docker.imageref import InvalidReferenceError, parse_reference
from cri.errors import ImagePullError, NotFoundError, RuntimeError_
from cri.types import AuthConfig, Image


def registry_auth_header(auth: AuthConfig) -> str:
    """X-Registry-Auth: base64url JSON, as the Docker CLI sends it."""
    payload = {
        "username": auth.username,
        "password": auth.password,
        "auth": auth.auth,
        "serveraddress": auth.server_address,
        "identitytoken": auth.identity_token,
    }
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


class DockerImages:
    def __init__(self, client: DockerClient) -> None:
        self._client = client

    async def pull_image(self, image: str, auth: AuthConfig | None = None) -> str:
        try:
            ref = parse_reference(image)
        except InvalidReferenceError as exc:
            raise ImagePullError(str(exc)) from exc
        headers = {"X-Registry-Auth": registry_auth_header(auth)} if auth is not None else {}
        params = {"fromImage": ref.repository, "tag": ref.pull_tag}
        try:
            async with self._client.stream(
                "images/create", "POST", params=params, headers=headers, kind=ImagePullError
            ) as response:
                async for line in response.content:
                    if not line.strip():
                        continue
                    progress = json.loads(line)
                    # Pull failures arrive in-band after a 200 status.
                    if "error" in progress:
                        raise ImagePullError(str(progress["error"]))
        except NotFoundError as exc:
            raise ImagePullError(str(exc)) from exc
        except DockerAPIError as exc:
            raise ImagePullError(exc.message) from exc
        status = await self.image_status(str(ref))
        if status is None:
            raise ImagePullError(f"image {image!r} not present after pull")
        return status.id

    async def image_status(self, image: str) -> Image | None:
        try:
            return image_from_inspect(await self._client.get(f"images/{image}/json"))
        except NotFoundError:
            return None

    async def list_images(self) -> list[Image]:
        return [image_from_summary(summary) for summary in await self._client.get("images/json")]

    async def remove_image(self, image: str) -> None:
        status = await self.image_status(image)
        if status is None:
            return
        # Removing by ID fails while several repositories tag it; untag each instead.
        targets = list(status.repo_tags) if len(status.repo_tags) > 1 else [status.id]
        for target in targets:
            try:
                await self._client.delete(f"images/{target}")
            except NotFoundError:
                pass
            except DockerAPIError as exc:
                raise RuntimeError_(f"cannot remove image {target}: {exc.message}") from exc

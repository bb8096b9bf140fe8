"""Errors raised across the runtime boundary; callers turn them into pod status reasons."""


class RuntimeError_(Exception):
    """Base class for runtime failures (named with a trailing underscore to avoid the builtin)."""


class NotFoundError(RuntimeError_):
    """The sandbox, container or image does not exist."""


class ImagePullError(RuntimeError_):
    """The registry refused or could not serve the image (-> ErrImagePull)."""


class CreateContainerError(RuntimeError_):
    """The runtime rejected the container config (-> CreateContainerError)."""


class StartContainerError(RuntimeError_):
    """The container was created but its process failed to start (-> RunContainerError)."""


class RuntimeUnavailableError(RuntimeError_):
    """The runtime endpoint does not answer."""

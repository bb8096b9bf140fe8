"""An honest kube-apiserver test double: what a kubelet meets, as recorded in tests/fixtures/kubernetes/."""

from tests.apiserver.client import ApiStatusError, Client, Identity, Reply
from tests.apiserver.harness import ApiServer

__all__ = ["ApiServer", "ApiStatusError", "Client", "Identity", "Reply"]

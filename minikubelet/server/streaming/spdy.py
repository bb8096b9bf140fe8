"""The SPDY/3.1 framing moved to `cri.spdy` (the CRI runtime's streaming client needs it too, and `cri` may not
import `minikubelet`); this name stays for code written against the old place."""

from cri.spdy import *  # noqa: F403

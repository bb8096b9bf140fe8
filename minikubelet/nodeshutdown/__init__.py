"""Graceful node shutdown (upstream pkg/kubelet/nodeshutdown): a logind delay inhibitor, pods killed by priority."""

"""`explain`: why a pod on this node is in its state, from what the agent decided (docs/explain.md).

`record.py` holds what the pod worker, the pod manager and the eviction manager record when they decide (plain
data, bounded per pod); the document is assembled from it on request (`services/explain.py`)."""

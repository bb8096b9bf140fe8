from tests.unit.cri.remote.partial_runtime import served

__all__ = ["served"]

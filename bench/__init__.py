"""Benchmarks for minikubelet (not tests): `python -m bench <name>` or `bench/run <name>`."""

"""Benchmarks (``scripts/benchmark_*.py``): the index, the oracle's cost, explanation quality."""

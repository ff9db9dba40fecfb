"""Scoring explanations: metrics, curves, summaries, robustness, ground truth, the checks
after a search.

Pure functions over results and records, no I/O but where a docstring says so.
"""

"""Explaining sets of events and measuring the explanations."""

from cftgnn.evaluation.runner import explain_events, sample_events, summarize

__all__ = ["explain_events", "sample_events", "summarize"]

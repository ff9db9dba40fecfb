"""The prediction groups a run samples from and its summaries split by (no torch: the
options check imports it before torch loads)."""

from __future__ import annotations

from enum import Enum


class PredictionGroup(str, Enum):
    """Which predictions to sample.

    * ``correct`` / ``incorrect`` — only that group;
    * ``both`` — half of the events from each group (``ceil(n/2)`` correct);
    * ``any`` — uniformly from the whole range, whatever the prediction.
    """

    CORRECT = "correct"
    INCORRECT = "incorrect"
    BOTH = "both"
    ANY = "any"


__all__ = ["PredictionGroup"]

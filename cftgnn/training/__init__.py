"""Training, checkpoints and model resolution, apart from the models' definitions.

* :mod:`cftgnn.training.loop`: the training loop (``scripts/train.py``) and ``score_range``.
* :mod:`cftgnn.training.checkpoint`: checkpoint files and their cards.
* :mod:`cftgnn.training.resolve`: model and device resolution for the entry points.
* :mod:`cftgnn.training.metrics`: link-prediction metrics (AP, ROC AUC).
"""

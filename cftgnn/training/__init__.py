"""Training, checkpoints and model resolution, apart from the models' definitions.

* ``cftgnn.training.loop``: the training loop (``scripts/train.py``) and ``score_range``.
* ``cftgnn.training.checkpoint``: checkpoint files and their cards.
* ``cftgnn.training.kinds``: what a checkpoint file is (model, PGExplainer, TempME, training
  state), reading one with one-line errors, and the tensors' hash the cards record.
* ``cftgnn.training.resolve``: model and device resolution for the entry points.
* ``cftgnn.training.devices``: the device a config names (torch only, for the early checks).
* ``cftgnn.training.metrics``: link-prediction metrics (AP, ROC AUC).
"""

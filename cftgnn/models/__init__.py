"""Temporal models (architectures and state): TGN, TGAT, GraphMixer and DyGFormer behind one
replayable interface, the state-verb protocol and the one batching rule, ``eval_mode``. Their
batched masked replay lives in ``cftgnn.replay``, training and checkpoints in
``cftgnn.training``."""

import cftgnn._compat  # noqa: F401  (first: torch_geometric is imported quietly)
from cftgnn.models.base import TemporalModel
from cftgnn.models.dygformer import DyGFormer
from cftgnn.models.graphmixer import GraphMixer
from cftgnn.models.protocol import ModelStateError, ReplayableModel
from cftgnn.models.pyg_tgn import PyGTGN
from cftgnn.models.state import State
from cftgnn.models.tgat import TGAT
from cftgnn.models.tgn import TGN

__all__ = ["TGAT", "TGN", "DyGFormer", "GraphMixer", "ModelStateError", "PyGTGN",
           "ReplayableModel", "State", "TemporalModel"]

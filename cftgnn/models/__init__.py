"""Temporal link-prediction models (TGN, TGAT, PyG's TGN) behind one replayable interface."""

from cftgnn.models.base import TemporalModel
from cftgnn.models.protocol import ModelStateError, ReplayableModel
from cftgnn.models.pyg_tgn import PyGTGN
from cftgnn.models.state import State
from cftgnn.models.tgat import TGAT
from cftgnn.models.tgn import TGN

__all__ = ["TGAT", "TGN", "ModelStateError", "PyGTGN", "ReplayableModel", "State",
           "TemporalModel"]

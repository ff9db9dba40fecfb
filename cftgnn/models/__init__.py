"""Temporal link-prediction models (TGN, TGAT) behind one replayable interface."""

from cftgnn.models.base import TemporalModel
from cftgnn.models.protocol import ModelStateError
from cftgnn.models.state import State
from cftgnn.models.tgat import TGAT
from cftgnn.models.tgn import TGN

__all__ = ["TGAT", "TGN", "ModelStateError", "State", "TemporalModel"]

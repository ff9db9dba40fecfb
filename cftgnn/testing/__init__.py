"""Test helpers shipped with the package: toy oracle backends, candidate builders, brute force.

These have known answers, so explainers can be tested without a trained model (like PyG's
``torch_geometric.testing`` and Captum's toy models).
"""

from cftgnn.testing.backends import (
    AdditiveBackend,
    AdditivePairsBackend,
    HashedBackend,
    InteractionBackend,
    ScriptedBackend,
    ShiftedBackend,
    ToyBackend,
)
from cftgnn.testing.search import (
    ScriptedStrategy,
    ToyProblem,
    brute_force_minimal,
    make_candidates,
    make_oracle,
)

__all__ = [
    "AdditiveBackend",
    "AdditivePairsBackend",
    "HashedBackend",
    "InteractionBackend",
    "ScriptedBackend",
    "ScriptedStrategy",
    "ShiftedBackend",
    "ToyBackend",
    "ToyProblem",
    "brute_force_minimal",
    "make_candidates",
    "make_oracle",
]

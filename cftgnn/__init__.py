"""cftgnn: counterfactual explanations for temporal graph neural networks."""

from cftgnn.errors import CftgnnError

__all__ = ["CftgnnError"]
__version__ = "0.1.0"

"""cftgnn: counterfactual explanations for temporal graph neural networks."""

import cftgnn._compat  # noqa: F401  (imports torch_geometric quietly, before any module does)
from cftgnn.errors import CftgnnError

__all__ = ["CftgnnError"]
__version__ = "0.1.0"

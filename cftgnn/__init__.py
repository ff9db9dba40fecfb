"""cftgnn: counterfactual explanations for temporal graph neural networks.

Importing the package loads nothing heavy (the entry points check their options before torch
and PyG load); ``cftgnn.models`` imports ``cftgnn._compat`` first, so torch_geometric
is imported quietly whichever module needs it first.
"""

from cftgnn.errors import CftgnnError

__all__ = ["CftgnnError"]
__version__ = "0.1.0"

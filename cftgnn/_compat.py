"""Imports of third-party packages that need a word of care.

Imported first by ``cftgnn.models`` (whose modules are the ones that build on PyG) and by
every other module before its first ``torch_geometric`` import, never by ``cftgnn`` itself:
the entry points check their options before torch_geometric loads (seconds).
"""

from __future__ import annotations

import warnings

# torch_geometric scripts a few helpers with ``torch.jit.script`` at import time, which recent
# torch releases answer with a deprecation warning on every run of every script. The warning is
# about PyG's code, not ours or the user's, so it is silenced for that one import (only there).
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*deprecated",
                            category=Warning)  # FutureWarning or DeprecationWarning
    import torch_geometric  # noqa: F401

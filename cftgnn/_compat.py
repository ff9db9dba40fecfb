"""Imports of third-party packages that need a word of care.

Imported first by ``cftgnn.models`` (whose modules are the ones that build on PyG) and by
every other module before its first ``torch_geometric`` import, never by ``cftgnn`` itself:
the entry points check their options before torch_geometric loads (seconds).
"""

from __future__ import annotations

import sys
import warnings

# torch_geometric imports numba, when it is installed, for two helpers cftgnn never calls
# (``torch_geometric.utils.ppr`` and ``loader.ibmb_loader``, which check for it): about 50 MB
# of resident memory in every process (in the peak RSS of long runs). It is kept out of that one
# import, unless something imported it before; a later ``import numba`` works as usual.
_HIDE_NUMBA = "numba" not in sys.modules
if _HIDE_NUMBA:
    sys.modules["numba"] = None  # type: ignore[assignment]  # ``import numba`` raises
try:
    # torch_geometric scripts a few helpers with ``torch.jit.script`` at import time, which
    # recent torch releases answer with a deprecation warning on every run of every script.
    # The warning is about PyG's code, not ours or the user's, so it is silenced for that
    # one import (only there).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*deprecated",
                                category=Warning)  # FutureWarning or DeprecationWarning
        import torch_geometric  # noqa: F401
finally:
    if _HIDE_NUMBA and sys.modules.get("numba", 0) is None:
        del sys.modules["numba"]

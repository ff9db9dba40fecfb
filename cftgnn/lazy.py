"""Packages whose public names load on first use (PEP 562), so that importing one light
submodule (e.g. ``cftgnn.oracle.history`` for an option check) does not load the package's
heavy modules (torch, PyG) as well."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def lazy_attribute(package: str, exports: Mapping[str, tuple[str, ...]], name: str) -> Any:
    """The public ``name`` of ``package``, imported from the submodule ``exports`` lists it
    under (``{"cftgnn.oracle.oracle": ("Oracle", ...)}``), and kept in the package.

    Raises:
        AttributeError: For a name no submodule exports (then ``from package import sub``
            imports the submodule ``sub`` as usual).
    """
    for module, names in exports.items():
        if name in names:
            value = getattr(importlib.import_module(module), name)
            setattr(importlib.import_module(package), name, value)
            return value
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


__all__ = ["lazy_attribute"]

"""Hydra/OmegaConf helpers shared by the entry points."""

from __future__ import annotations

from omegaconf import OmegaConf

from cftgnn.data.paths import project_root


def register_resolvers() -> None:
    """Register ``${cftgnn_root:}`` (the project root) once; safe to call repeatedly."""
    if not OmegaConf.has_resolver("cftgnn_root"):
        OmegaConf.register_new_resolver("cftgnn_root", lambda: str(project_root()))


register_resolvers()

"""Hydra/OmegaConf helpers shared by the entry points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf


def _root() -> str:
    from cftgnn.data.paths import project_root  # here: cftgnn.data loads pandas

    return str(project_root())


def register_resolvers() -> None:
    """Register ``${cftgnn_root:}`` (the project root) once; safe to call repeatedly."""
    if not OmegaConf.has_resolver("cftgnn_root"):
        OmegaConf.register_new_resolver("cftgnn_root", _root)


register_resolvers()


def group_options(cfg: Any, group: str) -> list[str] | None:
    """The options of config group ``group`` (``model`` -> ``["dygformer", ...]``): the
    ``.yaml`` files of ``group/`` in every file config source of the composition (the
    package's ``conf/`` and the command line's ``hydra.searchpath``), read from ``cfg``'s
    ``hydra`` node (a config composed with ``return_hydra_config=True``) or from the running
    Hydra app; None when neither is there.
    """
    from hydra.core.hydra_config import HydraConfig

    if "hydra" in cfg:
        sources = cfg.hydra.runtime.config_sources
    elif HydraConfig.initialized():
        sources = HydraConfig.get().runtime.config_sources
    else:
        return None
    folders = [Path(s.path) / group for s in sources if s.schema == "file"]
    return sorted({p.stem for folder in folders for p in folder.glob("*.yaml")})

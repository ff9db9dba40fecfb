"""``train_explainer.py``'s options, checked before anything loads (no torch): the shared
top-level ones, which explainer is trained (``trained_explainer``) and TempME's ``tempme:``
block."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from cftgnn.errors import ConfigError
from cftgnn.explain.params import check_explainer_options
from cftgnn.options import boolean, choice, integer, number, text
from cftgnn.training.options import checkpoint_file, device


def check_train_explainer_options(cfg: Any) -> None:
    """Refuse a bad top-level option of ``conf/train_explainer.yaml`` before anything loads.

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "seed")
    integer(cfg, "n_train_events", minimum=1)
    integer(cfg, "epochs", minimum=1)
    integer(cfg, "batch_size", minimum=1)
    integer(cfg, "hidden", minimum=1)
    integer(cfg, "num_threads", minimum=1)
    integer(cfg, "m_max", minimum=1)
    integer(cfg, "k", minimum=1, optional=True)
    number(cfg, "lr", minimum=0, strict_minimum=True, optional=True)
    integer(cfg, "n_val_events", minimum=1)
    choice(cfg, "features", ("reference", "probe"))
    text(cfg, "note", optional=True)
    share = cfg.train_range
    if (isinstance(share, str) or not hasattr(share, "__len__") or len(share) != 2
            or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in share)
            or not 0 <= share[0] < share[1] <= 1):
        raise ConfigError(f"train_range must be [start, end] with 0 <= start < end <= 1 (a "
                          f"share of the training split), got {share!r}")
    boolean(cfg, "progress")
    boolean(cfg, "overwrite")
    checkpoint_file(cfg)
    text(cfg, "out_dir", optional=True)
    if trained_explainer(cfg) == "tempme":
        check_tempme_options(cfg)
    check_explainer_options(cfg.get("explainer"))
    device(cfg)


#: What ``train_explainer.py`` trains (its ``explainer=`` option), by class.
TRAINED_EXPLAINERS = {"PGExplainer": "pgexplainer", "TempMEExplainer": "tempme"}


def trained_explainer(cfg: Any) -> str:
    """Which explainer ``train_explainer.py`` trains: ``pgexplainer`` or ``tempme`` (read off
    the ``explainer`` group's ``_target_``; no group: ``pgexplainer``).

    Raises:
        ConfigError: For an explainer that is not trained.
    """
    node = cfg.get("explainer")
    if node is None:
        return "pgexplainer"
    target = str(node.get("_target_", "")) if hasattr(node, "get") else str(node)
    name = TRAINED_EXPLAINERS.get(target.rsplit(".", 1)[-1])
    if name is None:
        chosen = (OmegaConf.select(cfg, "hydra.runtime.choices.explainer", default=None)
                  if OmegaConf.is_config(cfg) else None) or target or node
        raise ConfigError(f"train_explainer.py trains explainer=pgexplainer or "
                          f"explainer=tempme, the explainers that learn (got "
                          f"explainer={chosen}); the others need no training")
    return name


def check_tempme_options(cfg: Any) -> None:
    """Refuse a bad ``tempme.*`` option of ``conf/train_explainer.yaml``
    (``explainer=tempme``).

    Raises:
        ConfigError: Naming the first bad option.
    """
    if cfg.get("tempme") is None:
        raise ConfigError("explainer=tempme needs the tempme: block of "
                          "conf/train_explainer.yaml")
    for key in ("n_walks", "length", "degree", "hidden", "time_dim"):
        integer(cfg, f"tempme.{key}", minimum=1)
    integer(cfg, "tempme.n_val_events", minimum=0)
    integer(cfg, "tempme.null_events", minimum=1)
    number(cfg, "tempme.dropout", minimum=0, maximum=0.99)
    number(cfg, "tempme.temp", minimum=0, strict_minimum=True)
    number(cfg, "tempme.prior_p", minimum=0, maximum=0.99, strict_minimum=True)
    number(cfg, "tempme.beta", minimum=0)
    if int(cfg.tempme.length) > 5:
        raise ConfigError(f"tempme.length must be <= 5 (the motif classes grow "
                          f"exponentially with it), got {cfg.tempme.length}")


__all__ = ["TRAINED_EXPLAINERS", "check_tempme_options", "check_train_explainer_options",
           "trained_explainer"]

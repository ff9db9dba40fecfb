"""``train.py``'s top-level options, checked before anything loads (this module imports
neither torch nor the models: ``cftgnn.cli.main_guard`` runs it first)."""

from __future__ import annotations

from typing import Any

from cftgnn.errors import ConfigError
from cftgnn.options import boolean, device, integer, number, text


def check_train_options(cfg: Any) -> None:
    """Refuse a top-level option of ``conf/train.yaml`` of the wrong type or range before
    anything loads: ``epochs >= 1`` (no untrained checkpoint is saved), integer counts
    (never truncated), ``0 < lr``, split shares that leave a training part, a ``device``
    this machine has (``cftgnn.options.device``).

    Raises:
        ConfigError: Naming the first bad option.
    """
    integer(cfg, "epochs", minimum=1)
    integer(cfg, "patience", minimum=0)
    integer(cfg, "seed")
    integer(cfg, "num_threads", minimum=1)
    number(cfg, "lr", minimum=0, strict_minimum=True)
    val = number(cfg, "split.val", minimum=0, maximum=1, strict_minimum=True)
    test = number(cfg, "split.test", minimum=0, maximum=1, strict_minimum=True)
    if val is not None and test is not None and val + test >= 1:
        raise ConfigError(f"split.val + split.test must be < 1 (the rest trains), got "
                          f"{val} + {test}")
    boolean(cfg, "progress")
    boolean(cfg, "save_checkpoint")
    boolean(cfg, "overwrite")
    text(cfg, "out_dir", optional=True)
    text(cfg, "model_name", optional=True)
    text(cfg, "name_suffix", optional=True)
    device(cfg)  # last: a device other than cpu or auto loads torch to be checked


__all__ = ["check_train_options"]

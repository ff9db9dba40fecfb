"""``train.py``'s top-level options, checked before anything loads (this module imports
neither torch nor the models: ``cftgnn.cli.main_guard`` runs it first)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cftgnn.errors import ConfigError
from cftgnn.options import PLAIN_DEVICES, boolean, integer, number, option_value, text


def device(cfg: Any, key: str = "device") -> None:
    """Check ``cfg.<key>``, a device name, before the run makes its directory.

    ``cpu`` and ``auto`` are taken as they are, without torch. Any other value (``cuda``,
    ``cuda:1``, a typo) is checked by the run's own rule,
    ``cftgnn.training.devices.resolve_device``, which loads torch to ask whether this machine
    has that device: a run with such a device loads torch next anyway, so the check costs it
    nothing, and a machine without the device is refused before anything is written.

    Raises:
        ConfigError: For a value that is not a torch device, or a device this machine or
            torch build does not have.
    """
    device_name(option_value(cfg, key))


def device_name(value: Any) -> None:
    """Check one device name by ``device``'s rule (``cpu`` and ``auto`` without torch; any
    other name by ``cftgnn.training.devices.resolve_device``, which loads torch); for an
    option holding several (``benchmark_gpu.py``'s ``devices``).

    Raises:
        ConfigError: For a value that is not a torch device, or a device this machine or
            torch build does not have.
    """
    if isinstance(value, str) and value in PLAIN_DEVICES:
        return
    from cftgnn.training.devices import resolve_device  # torch: only for such a device

    resolve_device(value)


#: What a ``checkpoint=`` option takes besides a path (``checkpoint_file``'s message).
CHECKPOINT_CHOICES = "checkpoint=auto: the committed one, checkpoint=null: fresh weights"


def missing_checkpoint(path: str | os.PathLike[str], option: str = "checkpoint",
                       choices: str = CHECKPOINT_CHOICES) -> str | None:
    """Why the checkpoint file a user named cannot be read, in one line (it does not exist,
    or is a folder), or None when it is a file."""
    given = Path(path)
    if given.is_file():
        return None
    if given.is_dir():
        return f"{option} {str(given)!r} is a folder, not a checkpoint file ({choices})"
    return f"{option} {str(given)!r} does not exist ({choices})"


def checkpoint_file(cfg: Any, key: str = "checkpoint",
                    choices: str = CHECKPOINT_CHOICES) -> None:
    """Check ``cfg.<key>``, the model's checkpoint: ``auto``, null, or the path of a file
    that exists (``missing_checkpoint``), before anything loads.

    Raises:
        ConfigError: For a path that does not exist or is a folder, or a value that is not a
            text.
    """
    value = text(cfg, key, optional=True)
    if value is None or value == "auto":
        return
    problem = missing_checkpoint(value, key, choices)
    if problem is not None:
        raise ConfigError(problem)


def check_train_options(cfg: Any) -> None:
    """Refuse a top-level option of ``conf/train.yaml`` of the wrong type or range before
    anything loads: ``epochs >= 1`` (no untrained checkpoint is saved), integer counts
    (never truncated; ``tgb.hits_k`` and ``tgb.max_pairs`` >= 1), ``0 < lr``, split shares
    that leave a training part, a ``device`` this machine has (``device``).

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
    integer(cfg, "tgb.hits_k", minimum=1)
    integer(cfg, "tgb.max_pairs", minimum=1)
    boolean(cfg, "progress")
    boolean(cfg, "save_checkpoint")
    boolean(cfg, "overwrite")
    text(cfg, "out_dir", optional=True)
    text(cfg, "model_name", optional=True)
    text(cfg, "name_suffix", optional=True)
    device(cfg)  # last: a device other than cpu or auto loads torch to be checked


__all__ = ["CHECKPOINT_CHOICES", "check_train_options", "checkpoint_file", "device",
           "device_name", "missing_checkpoint"]

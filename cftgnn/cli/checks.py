"""Checks of a composed config before the run: a sweep without ``-m``, the logger's mode,
the script's own light ``check`` (``config_problem``), and its output options writable
(``check_outputs``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cftgnn.errors import user_error

#: The kinds of output an option names (``main_guard``'s ``writes``): one file, or a folder.
OUTPUT_KINDS = ("file", "folder")


def check_outputs(cfg: Any, writes: Mapping[str, str]) -> None:
    """Check, before any work and without creating anything, that each output option of
    ``writes`` (option -> ``"file"`` or ``"folder"``) set in ``cfg`` can be written there:
    ``cftgnn.files.check_can_write``, which probes the nearest existing folder with a real
    file (a read-only mount, ``/proc``, a file in the way, a full disk). Null options, and
    values that only Hydra's own run resolves (``${hydra:...}``), are not checked.

    Raises:
        ConfigError: Naming the option, the path and the reason.
    """
    from omegaconf.errors import OmegaConfBaseException

    from cftgnn.files import check_can_write
    from cftgnn.options import option_value

    for option, kind in writes.items():
        if kind not in OUTPUT_KINDS:
            raise ValueError(f"writes[{option!r}] must be one of {OUTPUT_KINDS}, got {kind!r}")
        try:
            value = option_value(cfg, option)
        except OmegaConfBaseException:
            continue
        if value is None or value == "" or isinstance(value, list | dict | bool):
            continue  # unset, or of a type the script's own check names
        check_can_write(str(value), option, file=kind == "file")


def checking_outputs(check: Callable[[Any], None] | None,
                     writes: Mapping[str, str] | None) -> Callable[[Any], None] | None:
    """``check`` followed by ``check_outputs`` of ``writes`` (``check`` itself without any)."""
    if not writes:
        return check

    def checked(cfg: Any) -> None:
        if check is not None:
            check(cfg)
        check_outputs(cfg, writes)

    return checked


def config_problem(argv: Sequence[str], cfg: Any, config_name: str,
                   check: Callable[[Any], None] | None = None) -> str | None:
    """What is wrong with a composed config that Hydra would run, in one line, or None.

    * a sweep (``sweep=baselines``, or any ``hydra.sweeper.params``) without ``-m``, which
      Hydra would run as one default job;
    * a logger's ``mode`` that is not one of ``cftgnn.tracking.WANDB_MODES``;
    * whatever the script's own light ``check`` refuses (a
      ``CftgnnError``: types, ranges, choices).
    """
    multirun = any(a in ("-m", "--multirun") for a in argv)
    sweeper = cfg.get("hydra", {}).get("sweeper", {}).get("params") if "hydra" in cfg else None
    if not multirun and sweeper:
        given = next((a for a in argv if a.lstrip("+").startswith("sweep=")), None)
        what = given or "hydra.sweeper.params"
        return (f"{what} is a sweep, which runs only with -m: "
                f"python scripts/{config_name}.py -m {shlex.join(argv)}")
    logger = cfg.get("logger")
    try:
        if logger is not None and hasattr(logger, "get") and "mode" in logger:
            from cftgnn.tracking import check_logger_mode  # pandas: only with a logger

            check_logger_mode(logger.get("mode"))
        if check is not None:
            check(cfg)
    except Exception as exc:
        error = user_error(exc)
        if error is None:
            raise
        return str(error)
    return None

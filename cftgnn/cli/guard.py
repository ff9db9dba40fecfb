"""``main_guard``: a Hydra script's command line checked, in order, by the other modules of
``cftgnn.cli`` before Hydra makes a run directory and before the script's heavy modules
load; then the script's ``main``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cftgnn.cli.checks import checking_outputs, config_problem
from cftgnn.cli.command_line import find_unknown_choice, flag_problem, search_paths
from cftgnn.cli.compose import compose_command_line
from cftgnn.cli.friendly import RESUME_HINT, fail, friendly_errors
from cftgnn.cli.run_dir import (
    default_run_dir_problem,
    folder_problem,
    quoted_value,
    run_dir_follows,
    unwritable_run_dir,
)
from cftgnn.cli.sweeps import name_the_job, sweep_problem


def _config_name(main: Callable[[], None]) -> str | None:
    """The ``config_name`` a ``@hydra.main`` function was decorated with (None if unknown)."""
    try:
        name = inspect.getclosurevars(main).nonlocals.get("config_name")
    except TypeError:
        return None
    return name if isinstance(name, str) else None


def main_guard(main: Callable[[], None], conf_dir: str | Path,
               argv: Sequence[str] | None = None, config_name: str | None = None,
               on_interrupt: str = RESUME_HINT, check: Callable[[Any], None] | None = None,
               run_dir_from: str | None = None,
               writes: Mapping[str, str] | None = None) -> None:
    """Call a Hydra ``main`` unless the command line is one that fails: an environment
    variable of the project's set to a value it does not take (``environment_problem``, by
    ``friendly_errors``, which this runs under), a flag that is not Hydra's or ``-m`` after
    the overrides (``flag_problem``), a ``group=option`` naming no config file
    (``unknown_choice``), a run directory that cannot be made (``unwritable_run_dir``), an
    override that does not parse or names a key the config lacks (``compose_command_line``),
    or a composed config that ``config_problem`` refuses (a sweep without ``-m``, a bad
    logger mode, what ``check`` refuses, an output of
    ``writes`` that cannot be written), under ``-m`` for any job of the sweep
    (``sweep_problem``: every combination of its values) — then one line on stderr and exit
    status 2, before Hydra makes a run directory and before the script's heavy modules load
    (``main`` imports them itself). Ctrl-C ends in one line, ``on_interrupt``, and exit
    status 130.

    Args:
        main: The ``@hydra.main`` function.
        conf_dir: The config folder.
        argv: The command line (default ``sys.argv[1:]``).
        config_name: The primary config (default: the one ``main`` was decorated with).
        on_interrupt: What to tell the user after Ctrl-C (how to resume).
        check: The script's check of its top-level options (types, ranges, choices), given
            the composed config; it raises ``ConfigError``. It must
            import nothing heavy.
        run_dir_from: An option (``out_dir``) that, when set in a single run without
            ``hydra.run.dir``, becomes the run directory (Hydra's ``.hydra/`` goes there,
            not under ``./outputs``). Only when ``argv`` is the process's own command line.
        writes: The script's output options, each ``"file"`` or ``"folder"`` (``{"out":
            "file"}``): checked writable when set (``check_outputs``), so that a bad path
            is refused before the work, not after it.
    """
    own = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    check = checking_outputs(check, writes)
    with friendly_errors(on_interrupt):
        missing = [p for p in search_paths(args) if not p.is_dir()]
        name = config_name or _config_name(main)
        script = Path(sys.argv[0]).name if own and sys.argv[0].endswith(".py") \
            else f"{name}.py"
        message = flag_problem(args, script)
        found = None if missing or message else find_unknown_choice(args, conf_dir)
        choice = found[0] if found is not None else None
        if found is not None and found[1] and name is not None:  # a swept value: its job
            choice = name_the_job(found[0], args, None, conf_dir, name, check)
        message = message or (
            f"hydra.searchpath folder {str(missing[0])!r} does not exist" if missing
            else choice or unwritable_run_dir(args))
        cfg = None
        if message is None and name is not None:
            message, cfg = compose_command_line(args, conf_dir, name)
            if message is None and cfg is not None:
                message = config_problem(args, cfg, name, check)
                if message is None:
                    message = sweep_problem(args, cfg, conf_dir, name, check)
            if message is not None:
                message = name_the_job(message, args, cfg, conf_dir, name, check)
        follow = run_dir_follows(args, cfg, run_dir_from) if message is None else None
        if follow is not None:
            message = folder_problem(str(run_dir_from), follow)
        elif message is None and cfg is not None:
            message = default_run_dir_problem(args, cfg)
        if message is not None:
            fail(message)
        if follow is not None and own:
            sys.argv.append(f"hydra.run.dir={quoted_value(follow)}")
        main()

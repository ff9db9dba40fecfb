"""Every job of a ``-m`` command line, as Hydra's basic sweeper makes them (``sweep_jobs``),
each composed and checked as a single run is (``sweep_problem``), and a refusal ending with
the job it belongs to (``name_the_job``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cftgnn.cli.checks import config_problem
from cftgnn.cli.command_line import unknown_choice
from cftgnn.cli.compose import compose_command_line, compose_overrides, first_line

#: The ``_target_`` of Hydra's default sweeper, whose grammar ``sweep_jobs`` expands.
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def sweep_jobs(argv: Sequence[str], cfg: Any, conf_dir: str | Path) -> tuple[str | None,
                                                                             list[list[str]]]:
    """The overrides of every job of a ``-m`` command line, as Hydra's basic sweeper makes
    them: the config's ``hydra.sweeper.params`` (a file of ``conf/sweep/``) then the command
    line, parsed by Hydra's override parser (``a,b``, ``range(...)``, ``choice(...)``,
    ``glob(...)`` of a group), every combination (``BasicSweeper.split_arguments``).

    Args:
        argv: The command line.
        cfg: The config of its first job (``compose_command_line``).
        conf_dir: The config folder.

    Returns:
        ``(None, jobs)``; ``(message, [])`` when the basic sweeper would refuse the sweep (an
        ``interval(...)``); ``(None, [])`` without ``-m``, with another sweeper (its own
        grammar: left to it) or when the sweeper's params do not resolve here.
    """
    from hydra import initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if not any(a in ("-m", "--multirun") for a in argv) or "hydra" not in cfg:
        return None, []
    sweeper = cfg.hydra.get("sweeper")
    if sweeper is None or sweeper.get("_target_") != BASIC_SWEEPER:
        return None, []
    try:
        params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    except OmegaConfBaseException:  # an interpolation only Hydra's own run resolves
        return None, []
    args = [a for a in argv if a not in ("-m", "--multirun")]
    try:
        with initialize_config_dir(str(Path(conf_dir).resolve()), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            overrides = OverridesParser.create(config_loader=loader).parse_overrides(
                [*params, *args])
            return None, [list(job) for batch in BasicSweeper.split_arguments(overrides, None)
                          for job in batch]
    except HydraException as exc:
        return first_line(str(exc)), []


def sweep_problem(argv: Sequence[str], cfg: Any, conf_dir: str | Path, config_name: str,
                  check: Callable[[Any], None] | None = None) -> str | None:
    """What is wrong with any job of a ``-m`` command line, in one line, or None: every
    combination of the sweep's values (``sweep_jobs``) is composed and checked as a single
    run is (``unknown_choice``, the composition, ``config_problem`` with ``check``), so a bad
    value anywhere in a sweep is refused before its first job starts. The message ends with
    the job (Hydra's number) and its swept values; ``main_guard`` ends the refusal of the
    first job (the command line's own config) so too.
    """
    message, jobs = sweep_jobs(argv, cfg, conf_dir)
    if message is not None:
        return message
    if len(jobs) < 2:
        return None  # the first job is the command line's config: already checked
    varying = [i for i in range(len(jobs[0])) if len({job[i] for job in jobs}) > 1]
    for number, job in enumerate(jobs):
        message = unknown_choice(job, conf_dir)
        if message is None:
            message, job_cfg = compose_overrides(job, Path(conf_dir).resolve(), config_name)
            if message is None:
                message = config_problem(argv, job_cfg, config_name, check)
        if message is not None:
            values = " ".join(job[i] for i in varying)
            return f"{message} (job #{number} of the sweep's {len(jobs)}: {values})"
    return None


def name_the_job(message: str, argv: Sequence[str], cfg: Any, conf_dir: str | Path,
                 config_name: str, check: Callable[[Any], None] | None) -> str:
    """``message`` (why the command line's own config, the sweep's first values, is refused)
    ending with the job it belongs to under ``-m``, as ``sweep_problem`` names the others:
    the first job of the sweep that is refused, found again by ``sweep_problem`` (its own
    message then). Unchanged without ``-m``, for a sweep of one job, when it already names a
    job, or when no job's config is refused (an error of the command line as a whole)."""
    if not any(a in ("-m", "--multirun") for a in argv) or "(job #" in message:
        return message
    if cfg is None:  # the first values do not compose: the sweeper's params without them
        hydra_args = [a for a in argv if a.lstrip("+~").split("=")[0].split("@")[0] == "sweep"
                      or a.lstrip("+~").startswith("hydra")]
        _, cfg = compose_command_line(hydra_args, conf_dir, config_name)
        if cfg is None:
            return message
    return sweep_problem(argv, cfg, conf_dir, config_name, check) or message

"""Helpers shared by the entry points in ``scripts/``: friendly one-line errors.

Every script runs under ``friendly_errors``, which first checks the project's environment
variables (``environment_problem``). Before a Hydra script runs, ``main_guard`` checks the
command line the way Hydra will read it: a flag that is not Hydra's (``--n_events 3``) or
``-m`` after the overrides (``flag_problem``), an unknown ``group=option``, an override
that does not parse (``n_events=[1,2``), a key the config does not have (``nevents=4``,
``+n_evnts=2``, ``compose_command_line``) ends in one ``error:`` line naming it and the
nearest valid key, exit status 2, instead of Hydra's multi-line message; then the composed
config is checked (``config_problem``: a sweep without ``-m``, the logger, the script's own
option checks, its output options writable, ``check_outputs``), under ``-m`` that of every
job of the sweep (``sweep_problem``). All of it runs before the script's heavy modules
(torch, PyG, the models) load, which its ``main`` imports itself, and before Hydra makes a
run directory; a run refused later leaves no run directory that holds only Hydra's files
(``discard_empty_run_dir``). Ctrl-C in any script ends in one line (exit status 130)
instead of a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from cftgnn.errors import user_error

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130
#: Hydra flags after which the command line is not a run (help, config printing, completion):
#: left to Hydra.
_HYDRA_INFO_FLAGS = ("-h", "--help", "--hydra-help", "--info", "-i", "--cfg", "-c",
                     "--shell-completion", "-sc", "--version", "--resolve", "-p", "--package",
                     "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
                     "--experimental-rerun")

#: Hydra's flags that say how the overrides run (a sweep or one run); they go before them.
_MODE_FLAGS = ("-m", "--multirun", "-r", "--run")

#: ``[+|++]group=value[,value...]`` on the command line.
_CHOICE = re.compile(r"^\+{0,2}([A-Za-z_]\w*)=(.*)$")


def flag_problem(argv: Sequence[str], script: str) -> str | None:
    """A one-line message for a command line Hydra's argument parser would refuse with its
    usage block: a flag that is not Hydra's (``--n_events 3``: options are ``key=value``),
    or ``-m`` (``--multirun``) written after an override with more overrides after it
    (``n_events=2 -m sweep=shards``: ``-m`` goes first). None when Hydra takes the command
    line, or when it asks Hydra for help or another config (left to Hydra).

    Args:
        argv: The command line.
        script: The script's file name (``explain.py``), for the corrected command line.
    """
    if any(a.split("=")[0] in _HYDRA_INFO_FLAGS for a in argv):
        return None
    overrides = [a for a in argv if not a.startswith("-")]
    for i, arg in enumerate(argv):
        if arg in _MODE_FLAGS:
            before = [a for a in argv[:i] if not a.startswith("-")]
            after = [a for a in argv[i + 1:] if not a.startswith("-")]
            if before and after:
                return (f"{arg} goes first, before the overrides (options are key=value): "
                        f"python scripts/{script} {shlex.join([arg, *overrides])}")
        elif arg.startswith("-"):
            key, eq, value = arg.lstrip("-").partition("=")
            if key and not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-") \
                    and "=" not in argv[i + 1]:
                value = argv[i + 1]
            given = arg if eq or not value else f"{arg} {value}"
            write = f"write {key}={value or '...'} instead of {given!r}" if key \
                else f"{given!r} is not one"
            return (f"options are key=value, not flags: {write} (-m, for a sweep, goes first, "
                    "before the overrides)")
    return None


def search_paths(argv: Sequence[str]) -> list[Path]:
    """The folders of ``hydra.searchpath=[file://...]`` on the command line (a user's own
    config folder, e.g. ``explainer/<name>.yaml`` of an explainer outside the package)."""
    out: list[Path] = []
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key != "hydra.searchpath":
            continue
        for item in value.strip("[]").split(","):
            item = item.strip().strip("'\"")
            if item.startswith("file://"):
                out.append(Path(item[len("file://"):]))
    return out


def unknown_choice(argv: Sequence[str], conf_dir: str | Path) -> str | None:
    """A one-line message for the first ``group=option`` naming a missing config file.

    Only top-level config groups (folders of ``conf_dir`` and of the command line's
    ``hydra.searchpath``) are checked; sweep values (``a,b``) are checked one by one; ``null``
    is always allowed.

    Returns:
        The message, or None when every option exists.
    """
    found = _unknown_choice(argv, conf_dir)
    return found[0] if found is not None else None


def _unknown_choice(argv: Sequence[str], conf_dir: str | Path) -> tuple[str, bool] | None:
    """``unknown_choice``'s message, and whether the value is one of several of its option
    (``a,b``: a sweep's, whose job ``main_guard`` names), or None."""
    confs = [Path(conf_dir), *search_paths(argv)]
    for arg in argv:
        m = _CHOICE.match(arg)
        if not m or not any((conf / m.group(1)).is_dir() for conf in confs):
            continue
        group, values = m.group(1), m.group(2)
        if values.startswith(("range(", "choice(", "glob(", "interval(")):
            continue
        options = sorted({p.stem for conf in confs for p in (conf / group).glob("*.yaml")})
        listed = values.split(",")
        for value in listed:
            if value not in options and value != "null":
                return (f"unknown {group} {value!r} (choose from: {', '.join(options)})",
                        len(listed) > 1)
    return None


def environment_problem() -> str | None:
    """What is wrong with the project's environment variables (``CFTGNN_JIT`` not an on/off
    word), or None; every script asks this first (``friendly_errors``)."""
    from cftgnn.errors import ConfigError
    from cftgnn.options import JIT_ENV, environment_switch

    try:
        environment_switch(JIT_ENV)
    except ConfigError as error:
        return str(error)
    return None


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


def _checking_outputs(check: Callable[[Any], None] | None,
                      writes: Mapping[str, str] | None) -> Callable[[Any], None] | None:
    """``check`` followed by ``check_outputs`` of ``writes`` (``check`` itself without any)."""
    if not writes:
        return check

    def checked(cfg: Any) -> None:
        if check is not None:
            check(cfg)
        check_outputs(cfg, writes)

    return checked


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def _one_value(override: Any, text: str) -> str | None:
    """``text`` with a sweep (``a,b``, ``range(1,3)``) replaced by its first value, so the
    keys of a ``-m`` command can be checked by composing one of its jobs; None when the
    sweep has no listable first value (``glob``, ``interval``)."""
    if not override.is_sweep_override():
        return text
    try:
        first = next(iter(override.sweep_string_iterator()))
    except Exception:  # noqa: BLE001  (a sweep of another kind: not checked)
        return None
    return f"{override.get_key_element()}={first}"


def _nearest_key(key: str, overrides: Sequence[str], conf_dir: Path,
                 config_name: str) -> str:
    """`` (did you mean 'x'?)`` for a key the config lacks, by ``difflib`` among the keys
    of the deepest node of ``key`` that exists; empty when nothing is close."""
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig

    try:
        with initialize_config_dir(str(conf_dir), version_base="1.3"):
            cfg: Any = compose(config_name, overrides=list(overrides),
                               return_hydra_config=key.startswith("hydra."))
    except Exception:  # noqa: BLE001  (the other overrides fail too: compare with defaults)
        try:
            with initialize_config_dir(str(conf_dir), version_base="1.3"):
                cfg = compose(config_name)
        except Exception:  # noqa: BLE001
            return ""
    parts = key.split(".")
    node, prefix = cfg, ""
    for part in parts[:-1]:
        if not isinstance(node, DictConfig) or part not in node:
            break
        node, prefix = node[part], f"{prefix}{part}."
    if not isinstance(node, DictConfig):
        return ""
    rest = key[len(prefix):]
    names = [str(k) for k in node]
    close, tail = [], ""
    if "." not in rest:
        close = difflib.get_close_matches(rest, names, n=1, cutoff=0.5)
    else:  # a typo in a group's name: keep the key below it
        head, tail = rest.split(".", 1)
        close = difflib.get_close_matches(head, names, n=1, cutoff=0.5)
        child = node[close[0]] if close else None
        tail = f".{tail}" if isinstance(child, DictConfig) and tail.split(".")[0] in child \
            else ""
    if not close:
        return ""
    near = f"{prefix}{close[0]}{tail}"
    return f" (did you mean {near!r}?)"


def compose_command_line(argv: Sequence[str], conf_dir: str | Path,
                         config_name: str) -> tuple[str | None, Any]:
    """Compose the config of this command line as Hydra will (a sweep's first value standing
    in for the sweep), or say in one line why Hydra would refuse it.

    Each override is parsed as Hydra parses it, then the config is composed with them (with
    its ``hydra`` node): a bad override (``n_events=[1,2``), a key the config lacks
    (``nevents=4``, with the nearest valid key) or another composition error is returned as
    one line. Command lines asking Hydra for help or another config are left to Hydra.

    Returns:
        ``(message, None)`` when Hydra would refuse the command line; ``(None, config)``
        when it composes; ``(None, None)`` when it is left to Hydra.
    """
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a.split("=")[0] in _HYDRA_INFO_FLAGS for a in argv):
        return None, None
    args = [a for a in argv if a not in ("-m", "--multirun")]
    if any(a.startswith("-") for a in args):
        return None, None  # a flag this check does not know: Hydra decides
    conf = Path(conf_dir).resolve()
    with initialize_config_dir(str(conf), version_base="1.3"):  # glob(...) lists a group's files
        parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
    single: list[str] = []
    for arg in args:
        try:
            override = parser.parse_override(arg)
        except HydraException as exc:
            reason = [ln for ln in str(exc).splitlines()
                      if ln.strip() and not ln.startswith(("See https", "Error parsing"))]
            return (f"cannot read the option {arg!r}: {reason[0] if reason else 'bad syntax'} "
                    "(write key=value, e.g. n_events=4 or events=[1,2])"), None
        key = override.key_or_group
        if (override.is_add() and not any(c in key for c in "./@")
                and not any(p.joinpath(key).is_dir() for p in (conf, *search_paths(argv)))):
            others = [o for o in args if o != arg]
            return (f"unknown option {key!r}{_nearest_key(key, others, conf, config_name)}: "
                    f"'+{key}=' adds a key that nothing reads"), None
        override.config_loader = parser.config_loader  # parse_override leaves it out
        one = _one_value(override, arg)
        if one is not None:
            single.append(one)
    return _composed(single, conf, config_name)


def _composed(overrides: Sequence[str], conf: Path, config_name: str) -> tuple[str | None, Any]:
    """Compose ``config_name`` with plain overrides (no sweep) and its ``hydra`` node:
    ``(None, config)``, or ``(message, None)`` saying in one line why Hydra would refuse
    them (a key the config lacks: with the nearest valid key)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException, HydraException
    from omegaconf.errors import OmegaConfBaseException

    single = list(overrides)
    try:
        with initialize_config_dir(str(conf), version_base="1.3"):
            cfg = compose(config_name, overrides=single, return_hydra_config=True)
    except ConfigCompositionException as exc:
        found = re.search(r"Could not (?:override|append to|delete from) '([^']+)'", str(exc))
        if found:
            key = found.group(1)
            others = [o for o in single if o.lstrip("+~").split("=")[0].split("@")[0] != key]
            return (_fixed_key(key, single, conf, config_name)
                    or f"unknown option {key!r}{_nearest_key(key, others, conf, config_name)}"
                    ), None
        return _first_line(str(exc)), None
    except (HydraException, OmegaConfBaseException) as exc:
        return _first_line(str(exc)), None
    return None, cfg


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
        return _first_line(str(exc)), []


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
            message, job_cfg = _composed(job, Path(conf_dir).resolve(), config_name)
            if message is None:
                message = config_problem(argv, job_cfg, config_name, check)
        if message is not None:
            values = " ".join(job[i] for i in varying)
            return f"{message} (job #{number} of the sweep's {len(jobs)}: {values})"
    return None


def _job_named(message: str, argv: Sequence[str], cfg: Any, conf_dir: str | Path,
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


def _fixed_key(key: str, overrides: Sequence[str], conf_dir: Path,
               config_name: str) -> str | None:
    """The message for ``key=value`` where ``key`` is a plain top-level option of the config
    that is also the name of a config group (``explainer`` of ``train_explainer``): Hydra
    reads the override as a group choice and refuses it, so the option cannot be changed."""
    from hydra import compose, initialize_config_dir

    if "." in key or not (conf_dir / key).is_dir():
        return None
    try:
        with initialize_config_dir(str(conf_dir), version_base="1.3"):
            default = compose(config_name).get(key)
    except Exception:  # noqa: BLE001  (the nearest-key message says it instead)
        return None
    if default is None or not isinstance(default, str | int | float):
        return None
    given = next((o.split("=", 1)[1] for o in overrides
                  if o.lstrip("+~").split("=")[0] == key), "?")
    script = f"{config_name}.py"
    if given == str(default):
        return f"{script} takes {key}={default} only, its default: leave {key}= out"
    return f"{script} takes {key}={default} only (got {key}={given})"


def hydra_problem(argv: Sequence[str], conf_dir: str | Path, config_name: str) -> str | None:
    """The one-line message of what Hydra would refuse on this command line, or None
    (``compose_command_line`` without the config)."""
    return compose_command_line(argv, conf_dir, config_name)[0]


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


#: Free bytes below which a run directory counts as full (Hydra writes ``.hydra/*.yaml``, a
#: few kilobytes, before the script's code runs).
RUN_DIR_MIN_FREE = 64 * 1024


def folder_problem(option: str, value: str) -> str | None:
    """A one-line message when the folder ``value`` of ``option`` cannot be made: its nearest
    existing ancestor is a file, is not writable, or takes no new folder (``/proc``, which
    ``os.access`` calls writable for root: a folder is made there and removed at once), or
    sits on a disk with less than ``RUN_DIR_MIN_FREE`` free. None when it can be made
    (nothing is left behind)."""
    from cftgnn.files import disk_full_message, nearest_existing

    folder = Path(value)
    existing = nearest_existing(folder)
    if existing is None:
        return None
    where = existing.absolute()
    if not existing.is_dir():
        return f"{option} {value!r} cannot be written ({where} is not a folder)"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{option} {value!r} cannot be written (no write permission in {where})"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".cftgnn-probe-", dir=existing))
    except OSError as exc:
        return (f"{option} {value!r} cannot be created (no folder can be made in {where}: "
                f"{exc.strerror or exc})")
    if shutil.disk_usage(existing).free < RUN_DIR_MIN_FREE:
        return f"{option}: {disk_full_message(folder, folder=True)}"
    return None


def unwritable_run_dir(argv: Sequence[str]) -> str | None:
    """A one-line message when ``hydra.run.dir`` / ``hydra.sweep.dir`` (as given on the
    command line, without interpolations) cannot be created or its disk is full
    (``folder_problem``): Hydra makes these folders and writes its files there before the
    script's code runs. None when they can be, or were not given."""
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        value = value.strip("'\"")
        if key not in ("hydra.run.dir", "hydra.sweep.dir") or not value or "${" in value:
            continue
        if (problem := folder_problem(key, value)) is not None:
            return problem
    return None


def default_run_dir_problem(argv: Sequence[str], cfg: Any) -> str | None:
    """``folder_problem`` for the run (or sweep) directory the config names when the
    command line names none: its fixed part (``outputs/explain`` of
    ``outputs/explain/${...}/${now:...}``) must take a new folder, e.g. not when the current
    directory is read-only. None when it can, or when nothing would be written there."""
    from omegaconf import OmegaConf

    key = "hydra.sweep.dir" if any(a in ("-m", "--multirun") for a in argv) else "hydra.run.dir"
    if "hydra" not in cfg or any(a.lstrip("+").startswith(f"{key}=") for a in argv):
        return None
    node = OmegaConf.to_container(cfg.hydra.sweep if key == "hydra.sweep.dir" else cfg.hydra.run,
                                  resolve=False)
    raw = node.get("dir") if isinstance(node, dict) else None
    if not isinstance(raw, str) or not raw:
        return None
    if "${" not in raw:
        if Path(raw).is_dir() and cfg.hydra.get("output_subdir") is None:
            return None  # an existing folder where Hydra writes nothing (the benchmarks' ".")
        return folder_problem(key, raw)
    fixed = raw.split("${")[0]
    if "/" not in fixed:
        return None
    return folder_problem(key, fixed.rsplit("/", 1)[0] or "/")


def _quoted(value: str) -> str:
    """``value`` as a quoted Hydra override value (a path with spaces or commas)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _run_dir_follows(args: Sequence[str], cfg: Any, option: str | None) -> str | None:
    """``cfg[option]`` when a single run names ``option`` (``out_dir``) and no run directory
    of its own: it becomes the run directory, so Hydra's ``.hydra/`` goes there too."""
    if option is None or cfg is None or any(a in ("-m", "--multirun") for a in args):
        return None
    if any(a.lstrip("+").startswith(("hydra.run.dir=", "hydra.run=")) for a in args):
        return None
    value = cfg.get(option)
    if not isinstance(value, str) or not value or "${" in value:
        return None
    return value


def _config_name(main: Callable[[], None]) -> str | None:
    """The ``config_name`` a ``@hydra.main`` function was decorated with (None if unknown)."""
    try:
        name = inspect.getclosurevars(main).nonlocals.get("config_name")
    except TypeError:
        return None
    return name if isinstance(name, str) else None


def _ctrl_c_raises() -> None:
    """Let Ctrl-C raise ``KeyboardInterrupt`` again (the scripts' start-up handler of
    ``scripts/_ctrl_c.py`` only covers loading the libraries)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted(hint: str) -> NoReturn:
    """One line for Ctrl-C and exit status ``INTERRUPTED`` (no traceback)."""
    print(f"interrupted (Ctrl-C): {hint}", file=sys.stderr)
    raise SystemExit(INTERRUPTED)


#: What Ctrl-C says when a script names nothing better.
RESUME_HINT = "nothing complete was lost; rerun the same command to start again"


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
    check = _checking_outputs(check, writes)
    with friendly_errors(on_interrupt):
        missing = [p for p in search_paths(args) if not p.is_dir()]
        name = config_name or _config_name(main)
        script = Path(sys.argv[0]).name if own and sys.argv[0].endswith(".py") \
            else f"{name}.py"
        message = flag_problem(args, script)
        found = None if missing or message else _unknown_choice(args, conf_dir)
        choice = found[0] if found is not None else None
        if found is not None and found[1] and name is not None:  # a swept value: its job
            choice = _job_named(found[0], args, None, conf_dir, name, check)
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
                message = _job_named(message, args, cfg, conf_dir, name, check)
        follow = _run_dir_follows(args, cfg, run_dir_from) if message is None else None
        if follow is not None:
            message = folder_problem(str(run_dir_from), follow)
        elif message is None and cfg is not None:
            message = default_run_dir_problem(args, cfg)
        if message is not None:
            _fail(message)
        if follow is not None and own:
            sys.argv.append(f"hydra.run.dir={_quoted(follow)}")
        main()


#: What Hydra writes into a run directory before the script's code runs: ``.hydra/`` (its
#: ``output_subdir``) with these files, and the job's log file.
HYDRA_FILES = frozenset({"config.yaml", "hydra.yaml", "overrides.yaml"})


def discard_empty_run_dir() -> Path | None:
    """Remove the run directory Hydra made for this run when it holds nothing but Hydra's
    own files (``.hydra/`` of ``HYDRA_FILES``, the job's ``<name>.log``): a run refused
    after Hydra made it leaves nothing behind. Then its parents that are left empty, up to
    the folder the command ran in (``outputs/explain/<choices>/``), and a sweep directory
    left with only Hydra's ``multirun.yaml``. Nothing is removed outside a Hydra run, where
    Hydra wrote no ``.hydra/`` (the benchmarks' ``.``), or where anything else is found.

    Returns:
        The run directory removed, or None.
    """
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if not HydraConfig.initialized():
            return None
        hydra = HydraConfig.get()
        subdir, job = hydra.output_subdir, str(hydra.job.name)
        run_dir = Path(str(hydra.runtime.output_dir)).absolute()
        top = Path(str(hydra.runtime.cwd)).absolute()
        multirun = hydra.mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001  (no Hydra run here, or another version's config)
        return None
    if subdir is None or not (run_dir / str(subdir)).is_dir() or run_dir in (top, Path("/")):
        return None
    own = {str(subdir), f"{job}.log"}
    if any(entry.name not in own or (entry.is_dir() and entry.name != str(subdir))
           for entry in run_dir.iterdir()):
        return None
    if any(entry.name not in HYDRA_FILES or not entry.is_file()
           for entry in (run_dir / str(subdir)).iterdir()):
        return None
    try:
        shutil.rmtree(run_dir)
        parent = run_dir.parent
        if multirun and [e.name for e in parent.iterdir()] == ["multirun.yaml"]:
            (parent / "multirun.yaml").unlink()
        while parent != top and parent.is_relative_to(top) and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    except OSError:  # another process writes there, or the folder is read-only: leave it
        pass
    return run_dir


def _refuse(message: str) -> NoReturn:
    """``_fail`` of a run refused while it runs: its empty run directory is removed first
    (``discard_empty_run_dir``)."""
    discard_empty_run_dir()
    _fail(message)


@contextmanager
def friendly_errors(on_interrupt: str = RESUME_HINT) -> Iterator[None]:
    """Every script runs under this (``main_guard`` too): first the project's environment
    variables are checked (``environment_problem``: ``CFTGNN_JIT=maybe`` is refused by
    every script, in one line); then bad input (``CftgnnError``, also when
    ``instantiate`` wrapped it) ends in one line on stderr and exit status 2 instead of a
    traceback, and so does a full disk (an ``ENOSPC``/``EDQUOT`` error behind the exception,
    ``cftgnn.files.no_space``: the file and its disk), a Hydra run's directory removed when
    it holds nothing but Hydra's own files (``discard_empty_run_dir``); Ctrl-C in one line,
    ``on_interrupt``, and exit status 130."""
    _ctrl_c_raises()
    problem = environment_problem()
    if problem is not None:
        _refuse(problem)
    try:
        yield
    except KeyboardInterrupt:
        interrupted(on_interrupt)
    except Exception as exc:
        error = user_error(exc)
        if error is not None:
            _refuse(str(error))
        from cftgnn.files import disk_full_message, no_space

        full = no_space(exc)
        if full is None:
            raise
        _refuse(disk_full_message(full.filename, full))


class ArgumentParser(argparse.ArgumentParser):
    """The argument parser of the argparse scripts (``report.py``, ``compare_runs.py``, ...):
    a bad argument (a missing one, a wrong type, an unknown flag) ends in one ``error:`` line
    naming it and exit status 2, instead of argparse's usage block; ``--help`` is unchanged.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``error: <message> (see <prog> --help)`` on stderr; exit status 2."""
        _fail(f"{message} (see {self.prog} --help)")


__all__ = ["HYDRA_FILES", "INTERRUPTED", "OUTPUT_KINDS", "RESUME_HINT", "ArgumentParser",
           "check_outputs", "compose_command_line", "config_problem", "default_run_dir_problem",
           "discard_empty_run_dir", "environment_problem", "flag_problem", "folder_problem",
           "friendly_errors", "hydra_problem", "interrupted", "main_guard", "search_paths",
           "sweep_jobs", "sweep_problem", "unknown_choice", "unwritable_run_dir"]

"""The ``python scripts/...`` commands a document shows, read and composed as a user types them.

Used by the tests that keep the README honest: every command in its fenced shell blocks is
parsed (continuation lines joined, ``VAR=value`` prefixes kept as environment, ``&&`` chains
split, comments dropped, ``<placeholders>`` filled, optional ``[--flag X]`` groups opened), and
a Hydra script's configuration is composed exactly as Hydra would compose it, multiruns
included: the sweeper expands its parameters into jobs, the launcher is instantiated, and
every job's configuration is composed (nothing is run).
"""

from __future__ import annotations

import argparse
import ast
import re
import runpy
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Languages of fenced blocks that hold shell commands (an unlabelled fence counts too).
SHELL_FENCES = frozenset({"", "bash", "sh", "shell", "console", "zsh"})
_FENCE = re.compile(r"^\s*```\s*([A-Za-z0-9_+-]*)\s*$")
_PLACEHOLDER = re.compile(r"<([^<>\n]+)>")
_OPTIONAL = re.compile(r"(?<!\S)\[([^\[\]]*)\]")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = frozenset({"&&", "||", ";", "|"})


@dataclass(frozen=True)
class Command:
    """One ``python scripts/<name>.py ...`` command of a document.

    Attributes:
        script: The script's path as written (``scripts/explain.py``).
        args: Its arguments after placeholders were filled, in order.
        env: ``VAR=value`` assignments written before ``python``.
        line: 1-based line of the document where the command starts.
        text: The command as written (continuations joined).
    """

    script: str
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    line: int = 0
    text: str = ""

    @property
    def multirun(self) -> bool:
        """Whether Hydra runs it as a multirun (``-m`` / ``--multirun``)."""
        return any(a in ("-m", "--multirun") for a in self.args)

    @property
    def overrides(self) -> list[str]:
        """The Hydra overrides: the arguments without ``-m``."""
        return [a for a in self.args if a not in ("-m", "--multirun")]

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


def _logical_lines(block: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Lines of a shell block with ``\\`` continuations joined; yields (first line no, text)."""
    start, parts = 0, list[str]()
    for no, raw in block:
        if not parts:
            start = no
        text = raw.rstrip()
        if text.endswith("\\"):
            parts.append(text[:-1])
            continue
        parts.append(text)
        yield start, " ".join(p.strip() for p in parts)
        parts = []
    if parts:
        yield start, " ".join(p.strip() for p in parts)


def shell_blocks(text: str) -> Iterator[tuple[int, str]]:
    """Logical lines of every fenced shell block of a Markdown text, as (line no, line)."""
    block: list[tuple[int, str]] = []
    inside, shell = False, False
    for no, line in enumerate(text.splitlines(), start=1):
        fence = _FENCE.match(line)
        if fence and not inside:
            inside, shell, block = True, fence.group(1).lower() in SHELL_FENCES, []
        elif fence:
            if shell:
                yield from _logical_lines(block)
            inside = False
        elif inside:
            block.append((no, line))


def fill_placeholders(line: str, values: Callable[[str], str]) -> str:
    """Replace ``<name>`` by ``values(name)`` and open or drop ``[...]`` optional groups.

    An optional group that starts with an option (``[--out DIR]``) is kept without its
    brackets, so the option is checked too; any other (``[more runs or sweeps]``) is dropped.
    Brackets that are part of a value (``events=[1,2]``) are left alone.
    """

    def optional(m: re.Match[str]) -> str:
        inner = m.group(1).strip()
        return inner if inner.startswith("-") else ""

    line = _OPTIONAL.sub(optional, line)
    return _PLACEHOLDER.sub(lambda m: shlex.quote(values(m.group(1).strip())), line)


def script_commands(text: str, values: Callable[[str], str] = lambda name: name.replace(" ", "_"),
                    ) -> list[Command]:
    """Every ``python scripts/...`` command in the fenced shell blocks of a Markdown text.

    Args:
        text: The document.
        values: Test value for a ``<placeholder>`` (given the text between the brackets).

    Returns:
        The commands in document order.
    """
    commands: list[Command] = []
    for no, line in shell_blocks(text):
        tokens = shlex.split(fill_placeholders(line, values), comments=True)
        chunk: list[str] = []
        for tok in [*tokens, ";"]:
            if tok not in _SEPARATORS:
                chunk.append(tok)
                continue
            env: dict[str, str] = {}
            while chunk and _ENV.match(chunk[0]):
                key, _, value = chunk.pop(0).partition("=")
                env[key] = value
            if (len(chunk) >= 2 and re.fullmatch(r"python[0-9.]*", chunk[0])
                    and chunk[1].startswith("scripts/") and chunk[1].endswith(".py")):
                commands.append(Command(chunk[1], tuple(chunk[2:]), env, no, line.strip()))
            chunk = []
    return commands


@dataclass(frozen=True)
class HydraApp:
    """Where a script's ``@hydra.main`` finds its configuration."""

    config_dir: Path
    config_name: str


def hydra_app(script: Path) -> HydraApp | None:
    """The ``@hydra.main(config_path=..., config_name=...)`` of a script, None if it has none."""
    tree = ast.parse(script.read_text(), filename=str(script))
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and ast.unparse(dec.func) in ("hydra.main", "main")):
                continue
            kw = {k.arg: k.value for k in dec.keywords}
            path, name = kw.get("config_path"), kw.get("config_name")
            if isinstance(path, ast.Constant) and isinstance(name, ast.Constant):
                return HydraApp((script.parent / str(path.value)).resolve(), str(name.value))
    return None


def compose_command(app: HydraApp, command: Command, sweep_dir: Path | None = None,
                    ) -> list[Any]:
    """Compose a Hydra command's configuration as Hydra does, without running its task.

    A single run gives one configuration. A multirun is composed in ``MULTIRUN`` mode; the
    configured sweeper is instantiated (and with it the launcher, whose settings are checked
    by its constructor), expands its parameters and the command line's sweeps into jobs, and
    each job's configuration is composed by Hydra's own ``load_sweep_config``. The sweeper
    writes ``multirun.yaml`` to the sweep directory, so pass ``sweep_dir`` to keep it out of
    the working tree.

    Args:
        app: The script's configuration (see ``hydra_app``).
        command: The command.
        sweep_dir: Replaces ``hydra.sweep.dir`` after composition (a multirun writes there).

    Returns:
        The job configurations (``DictConfig`` with the ``hydra`` node), one per job.

    Raises:
        Exception: Whatever Hydra, the sweeper or the launcher raise for a command that does
            not compose.
    """
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.plugins import Plugins
    from hydra.core.utils import JobReturn, JobStatus
    from hydra.plugins.launcher import Launcher
    from hydra.types import HydraContext, RunMode
    from omegaconf import OmegaConf, open_dict

    with initialize_config_dir(str(app.config_dir), version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        if not command.multirun:
            cfg = hydra.compose_config(app.config_name, command.overrides,
                                       run_mode=RunMode.RUN, with_log_configuration=False)
            return [cfg]
        from hydra._internal.callbacks import Callbacks  # what Hydra.multirun passes

        cfg = hydra.compose_config(app.config_name, command.overrides,
                                   run_mode=RunMode.MULTIRUN, with_log_configuration=False)
        if sweep_dir is not None:
            with open_dict(cfg):
                cfg.hydra.sweep.dir = str(sweep_dir)
        loader = hydra.config_loader
        sweeper = Plugins.instance().instantiate_sweeper(
            config=cfg, hydra_context=HydraContext(config_loader=loader, callbacks=Callbacks(cfg)),
            task_function=lambda _: None)
        jobs: list[Any] = []

        class _Compose(Launcher):
            """Stands in for the launcher: composes each job instead of running it."""

            def setup(self, **kwargs: Any) -> None:  # noqa: D102
                pass

            def launch(self, job_overrides: Sequence[Sequence[str]],
                       initial_job_idx: int) -> Sequence[JobReturn]:
                returns = []
                for overrides in job_overrides:
                    jobs.append(loader.load_sweep_config(cfg, list(overrides)))
                    ret = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
                    ret.return_value = None
                    returns.append(ret)
                return returns

        assert getattr(sweeper, "launcher", None) is not None, "the sweeper has no launcher"
        sweeper.launcher = _Compose()
        # the sweeper composes every job to validate it before launching; _Compose does that
        sweeper.validate_batch_is_legal = lambda batch: None  # type: ignore[method-assign]
        task_overrides = OmegaConf.to_container(cfg.hydra.overrides.task, resolve=False)
        assert isinstance(task_overrides, list)
        sweeper.sweep(arguments=[str(o) for o in task_overrides])
        return jobs


@contextmanager
def hydra_job(cfg: Any) -> Iterator[Any]:
    """A composed configuration as Hydra hands it to the task, for calling ``main(cfg)``.

    Like Hydra's ``run_job``: ``HydraConfig`` holds the ``hydra`` node (for ``${hydra:...}``
    and ``HydraConfig.get()``) and the task sees the configuration without it. The previous
    ``HydraConfig`` is restored on exit.

    Args:
        cfg: A configuration from ``compose_command``.

    Yields:
        The task's configuration.
    """
    import copy

    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    holder = HydraConfig.instance()
    saved = holder.cfg
    holder.set_config(cfg)
    task = copy.deepcopy(cfg)
    with open_dict(task):
        del task["hydra"]
    try:
        yield task
    finally:
        holder.cfg = saved


class ArgumentsParsed(BaseException):
    """Raised by ``parse_arguments`` once argparse accepted a command's arguments."""

    def __init__(self, namespace: argparse.Namespace) -> None:
        super().__init__("arguments parsed")
        self.namespace = namespace


@contextmanager
def _stop_after_parsing() -> Iterator[None]:
    original = argparse.ArgumentParser.parse_known_args

    def parse_then_stop(self: argparse.ArgumentParser, args: Any = None,
                        namespace: Any = None) -> Any:
        known, extra = original(self, args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        raise ArgumentsParsed(known)

    argparse.ArgumentParser.parse_known_args = parse_then_stop  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]


def parse_arguments(script: Path, args: Sequence[str]) -> argparse.Namespace:
    """Run an argparse script up to the point where its arguments are parsed, then stop.

    The script runs as ``__main__`` with ``sys.argv`` set to the command; the first
    ``parse_args`` / ``parse_known_args`` call returns control here, so nothing after it runs.

    Returns:
        The parsed arguments.

    Raises:
        SystemExit: argparse refused the arguments (status 2, usage on stderr).
        AssertionError: The script finished without parsing any arguments.
    """
    saved = sys.argv
    sys.argv = [str(script), *args]
    try:
        with _stop_after_parsing():
            runpy.run_path(str(script), run_name="__main__")
    except ArgumentsParsed as done:
        return done.namespace
    finally:
        sys.argv = saved
    raise AssertionError(f"{script} parsed no arguments")


__all__ = [
    "ArgumentsParsed",
    "Command",
    "HydraApp",
    "compose_command",
    "fill_placeholders",
    "hydra_app",
    "hydra_job",
    "parse_arguments",
    "script_commands",
    "shell_blocks",
]

"""Every ``python scripts/...`` command in the README's code blocks, and in the documentation
site's pages (docs/*.md; the extension guides run theirs in their own tests), works as written.

Each command is composed exactly as Hydra composes it from the command line (a multirun through
its sweeper, which expands the sweep into jobs and instantiates the launcher); argparse
scripts get their arguments parsed. ``<placeholders>`` get test values. Commands that are
cheap on the 300-event debug stream also run: the values that belong to a real stream or a
trained model (dataset, event and node ids, timestamps, logit thresholds, checkpoint) are
dropped, and sizes made tiny.
"""

from __future__ import annotations

import re
import runpy
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from testsupport.commands import (
    Command,
    HydraApp,
    compose_command,
    hydra_app,
    hydra_job,
    parse_arguments,
    script_commands,
)

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.cli import unknown_choice
from cftgnn.runs.records import read_records

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Test values for the README's ``<placeholders>``; others become their name.
PLACEHOLDERS = {"p": "debug", "partition": "debug", "time": "2026-11-23_10-00-00",
                "run dir": "outputs/explain/run", "event id": "51596", "sweep id": "abc123"}


def placeholder(name: str) -> str:
    return PLACEHOLDERS.get(name, name.replace(" ", "_"))


#: The README and the site's pages; the guides (docs/add_*.md) show commands for files they
#: create, and their tests run them (tests/test_extension_guides.py and
#: tests/explain/test_add_explainer_guide.py).
DOCUMENTS = [README, *sorted(p for p in (ROOT / "docs").rglob("*.md")
                             if not p.name.startswith("add_"))]


def _commands(document: Path) -> list[Command]:
    """A document's commands; those with a shell loop's variable (``baseline=$b`` inside a
    ``for`` loop of docs/baselines.md) are templates, not commands, and are left out."""
    name = document.relative_to(ROOT).as_posix()
    return [replace(c, text=f"{name}: {c.text}")
            for c in script_commands(document.read_text(), placeholder)
            if not any(re.search(r"\$[A-Za-z_{]", a) for a in c.args)]


README_COMMANDS = _commands(README)
COMMANDS = [c for document in DOCUMENTS for c in _commands(document)]


def _id(command: Command) -> str:
    document = command.text.split(":", 1)[0].removesuffix(".md").replace("/", "-")
    return (f"{document}-L{command.line}-{Path(command.script).stem}"
            + ("-m" if command.multirun else ""))


def test_the_readme_shows_the_commands_of_every_kind():
    scripts = {Path(c.script).name for c in README_COMMANDS}
    assert {"explain.py", "merge_records.py", "report.py", "show_explanation.py"} <= scripts
    assert any(c.multirun for c in README_COMMANDS) and any(c.env for c in README_COMMANDS)
    assert all(c.args or c.script.endswith("explain.py") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=_id)
def test_readme_command_composes_as_written(command, tmp_path, monkeypatch, capsys):
    script = ROOT / command.script
    assert script.is_file(), f"{command}: no such script"
    for key, value in command.env.items():
        monkeypatch.setenv(key, value)
    app = hydra_app(script)
    if app is None:  # an argparse script: its arguments must parse
        try:
            parse_arguments(script, command.args)
        except SystemExit as exc:
            pytest.fail(f"{command}: arguments refused ({exc.code}): {capsys.readouterr().err}")
        return
    assert unknown_choice(command.args, app.config_dir) is None, str(command)
    jobs = compose_command(app, command, sweep_dir=tmp_path / "sweep")
    assert jobs, f"{command}: no job"
    if command.multirun:
        assert (tmp_path / "sweep" / "multirun.yaml").is_file()


def _has_debug_option(app: HydraApp) -> bool:
    primary = yaml.safe_load((app.config_dir / f"{app.config_name}.yaml").read_text())
    return any(isinstance(d, dict) and "debug" in d for d in primary.get("defaults", []))


#: Overrides that name things of a real stream or a trained model, or sizes and outputs.
STREAM_SPECIFIC = {"dataset", "debug", "checkpoint", "events", "n_events", "out_dir", "out",
                   "progress", "hydra.run.dir", "constraints.nodes", "constraints.events",
                   "constraints.before", "sample.min_abs_logit", "sample.max_abs_logit",
                   "tgb_negatives"}
_ABSENT = object()
#: T-GNNExplainer navigators that read a trained PGExplainer (none exists for the debug stream).
TRAINED_NAVIGATORS = ("pgexplainer", "mlp")


def _key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def _debug_args(command: Command) -> tuple[str, ...]:
    """The arguments that still apply to the debug stream (a dataset's own options go with it)."""
    return tuple(a for a in command.args
                 if _key(a) not in STREAM_SPECIFIC and not _key(a).startswith("dataset."))


def _runnable() -> list[Command]:
    """Single runs of scripts with a ``debug`` option, one per distinct debug-stream run."""
    seen, out = set(), []
    for command in COMMANDS:
        app = hydra_app(ROOT / command.script)
        key = (command.script, _debug_args(command))
        if command.multirun or app is None or not _has_debug_option(app) or key in seen:
            continue
        seen.add(key)
        out.append(command)
    return out


RUNNABLE = _runnable()


@pytest.mark.parametrize("command", RUNNABLE, ids=_id)
def test_readme_command_runs_on_the_debug_stream(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CFTGNN_CACHE_DIR", str(tmp_path / "cache"))
    script = ROOT / command.script
    app = hydra_app(script)
    assert app is not None
    (full,) = compose_command(app, command)
    small = {"checkpoint": "null", "n_events": "2", "progress": "false",
             "out_dir": str(tmp_path / "run"), "out": str(tmp_path / "out")}
    args = [*_debug_args(command), "debug=default"] + [f"{k}={v}" for k, v in small.items()
                                 if OmegaConf.select(full, k, default=_ABSENT) is not _ABSENT]
    if OmegaConf.select(full, "explainer.navigator", default=None) in TRAINED_NAVIGATORS:
        # the debug stream has no trained PGExplainer: the search runs with the model's attention
        args.append("explainer.navigator=attention")
    (cfg,) = compose_command(app, replace(command, args=tuple(args)))
    main = runpy.run_path(str(script), run_name="readme_check")["main"]
    with hydra_job(cfg) as task:
        try:
            main(task)
        except SystemExit as exc:
            pytest.fail(f"{command} on the debug stream ({' '.join(args)}) exited {exc.code}: "
                        f"{capsys.readouterr().err}")
    if "out_dir" in cfg:
        assert (tmp_path / "run" / "run.json").is_file()
        assert read_records(tmp_path / "run").empty or "event_id" in read_records(tmp_path / "run")

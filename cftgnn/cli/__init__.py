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

The modules, by concern (each light: Hydra and OmegaConf load inside the functions that
compose a config, nothing heavier at all):

* ``cftgnn.cli.command_line``: the command line as typed (``flag_problem``,
  ``search_paths``, ``unknown_choice``);
* ``cftgnn.cli.compose``: the config composed as Hydra will (``compose_command_line``,
  ``hydra_problem``);
* ``cftgnn.cli.checks``: the composed config checked (``config_problem``,
  ``check_outputs``);
* ``cftgnn.cli.sweeps``: every job of a ``-m`` sweep checked (``sweep_jobs``,
  ``sweep_problem``);
* ``cftgnn.cli.run_dir``: the run directory, checked before and removed after a refusal
  (``folder_problem``, ``unwritable_run_dir``, ``default_run_dir_problem``,
  ``discard_empty_run_dir``);
* ``cftgnn.cli.friendly``: one line instead of a traceback (``friendly_errors``,
  ``environment_problem``, ``interrupted``, ``ArgumentParser``);
* ``cftgnn.cli.guard``: ``main_guard``, which runs the checks in order.
"""

from __future__ import annotations

from cftgnn.cli.checks import OUTPUT_KINDS, check_outputs, config_problem
from cftgnn.cli.command_line import flag_problem, search_paths, unknown_choice
from cftgnn.cli.compose import compose_command_line, hydra_problem
from cftgnn.cli.friendly import (
    INTERRUPTED,
    RESUME_HINT,
    ArgumentParser,
    environment_problem,
    friendly_errors,
    interrupted,
)
from cftgnn.cli.guard import main_guard
from cftgnn.cli.run_dir import (
    HYDRA_FILES,
    RUN_DIR_MIN_FREE,
    default_run_dir_problem,
    discard_empty_run_dir,
    folder_problem,
    unwritable_run_dir,
)
from cftgnn.cli.sweeps import BASIC_SWEEPER, sweep_jobs, sweep_problem

__all__ = ["BASIC_SWEEPER", "HYDRA_FILES", "INTERRUPTED", "OUTPUT_KINDS", "RESUME_HINT",
           "RUN_DIR_MIN_FREE", "ArgumentParser", "check_outputs", "compose_command_line",
           "config_problem", "default_run_dir_problem", "discard_empty_run_dir",
           "environment_problem", "flag_problem", "folder_problem", "friendly_errors",
           "hydra_problem", "interrupted", "main_guard", "search_paths", "sweep_jobs",
           "sweep_problem", "unknown_choice", "unwritable_run_dir"]

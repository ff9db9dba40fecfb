"""Explain a sample of predictions: ``python scripts/explain.py`` (options: conf/explain.yaml)."""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from pathlib import Path

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers the ${cftgnn_root:} resolver)
from cftgnn.cli import friendly_errors, main_guard
from cftgnn.runs.options import check_explain_options

CONF = Path(__file__).resolve().parents[1] / "conf"
#: What Ctrl-C tells the user.
RESUME = ("the records written so far are kept; to resume, rerun the same command with the "
          "same out_dir or hydra.run.dir (the 'records:' line above names it)")


@hydra.main(config_path="../conf", config_name="explain", version_base="1.3")
def main(cfg: DictConfig) -> None:
    with friendly_errors(on_interrupt=RESUME):
        from cftgnn.reporting.picture import save_picture  # matplotlib: likewise
        from cftgnn.runs.pipeline import run  # heavy (torch, PyG): after the checks

        run(cfg, draw=save_picture)


if __name__ == "__main__":
    main_guard(main, CONF, on_interrupt=RESUME, check=check_explain_options,
               run_dir_from="out_dir", writes={"out_dir": "folder"})

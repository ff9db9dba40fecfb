"""Train the temporal PGExplainer: ``python scripts/train_explainer.py model=tgn dataset=uci``,
or TempME: ``python scripts/train_explainer.py explainer=tempme model=tgn dataset=uci``.

Options: conf/train_explainer.yaml. The run directory (``outputs/train_explainer/...``) keeps
the state after each epoch; rerunning the same command resumes there.
"""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from pathlib import Path

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.cli import friendly_errors, main_guard
from cftgnn.explain.training.options import check_train_explainer_options

CONF = Path(__file__).resolve().parents[1] / "conf"
#: What Ctrl-C tells the user.
RESUME = ("the state after the last finished epoch is kept in the run directory; rerun the "
          "same command to resume")


@hydra.main(config_path="../conf", config_name="train_explainer", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Hydra entry point; all work happens in ``cftgnn.explain.training.run`` (the trainer of
    the ``trainer`` group, which follows ``explainer=``)."""
    with friendly_errors(on_interrupt=RESUME):
        from cftgnn.explain.training import run  # heavy (torch, PyG): after the checks

        run(cfg)


if __name__ == "__main__":
    main_guard(main, CONF, on_interrupt=RESUME, check=check_train_explainer_options,
               writes={"out_dir": "folder"})

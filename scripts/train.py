"""Train a temporal link predictor: ``python scripts/train.py model=tgn dataset=uci``.

The checkpoint and its card go into the run's own directory (``outputs/train/...`` or
``out_dir``); replacing an existing one, e.g. under ``checkpoints/``, takes ``overwrite=true``.
"""

import contextlib

with contextlib.suppress(ImportError):  # scripts/_ctrl_c.py (absent when run by runpy)
    import _ctrl_c  # noqa: F401  (first: Ctrl-C while the libraries load is one line)

from pathlib import Path

import hydra
from omegaconf import DictConfig

import cftgnn.config  # noqa: F401  (registers ${cftgnn_root:})
from cftgnn.cli import friendly_errors, main_guard
from cftgnn.training.options import check_train_options

CONF = Path(__file__).resolve().parents[1] / "conf"
#: What Ctrl-C tells the user.
RESUME = ("no checkpoint was written (it is saved when training ends); rerun the command "
          "to train again")


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Hydra entry point; all work happens in ``cftgnn.training.loop.run``."""
    with friendly_errors(on_interrupt=RESUME):
        from cftgnn.training.loop import run  # heavy (torch, PyG): after the checks

        run(cfg)


if __name__ == "__main__":
    main_guard(main, CONF, on_interrupt=RESUME, check=check_train_options,
               writes={"out_dir": "folder"})

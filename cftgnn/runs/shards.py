"""What a ``-m sweep=shards`` sweep prints once every shard is done: the summary table of all
shards together and the command that merges them (``cftgnn.runs.merge.sweep_summary``).

``conf/sweep/shards.yaml`` names ``ShardsSummary`` as a Hydra callback, which Hydra runs in the
process that launched the shards (joblib, submitit, SLURM alike) after the last one returned
(a sweep whose shard failed ends in that shard's error instead). This module imports only
Hydra's callback class: Hydra builds its callbacks before the shards start, and the parent
process of a sweep need not load torch while they run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class ShardsSummary(Callback):
    """Prints the table of the sweep's shards together (``sweep_summary``) when the sweep
    ends; where there is none (no record, shards of several configurations in one sweep
    folder), one ``note:`` line with the merge command instead."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from cftgnn.errors import CftgnnError, print_block
        from cftgnn.runs.merge import merge_command, sweep_summary

        sweep = Path(str(config.hydra.sweep.dir))
        try:
            text = sweep_summary(sweep)
        except CftgnnError as exc:
            text = (f"note: no table of the shards together ({exc}); merge them with "
                    f"{merge_command(sweep)}")
        print_block(text)


__all__ = ["ShardsSummary"]

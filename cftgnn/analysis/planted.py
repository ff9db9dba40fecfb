"""Ground-truth scores of a finished run on a planted stream (``score_run``)."""

from __future__ import annotations

import os
from typing import Any

from cftgnn.errors import ConfigError
from cftgnn.runs.records import read_records
from cftgnn.runs.rundir import load_run_stream, read_fingerprint
from cftgnn.scoring.ground_truth import score_records, summarize_ground_truth


def score_run(run_dir: str | os.PathLike[str]
              ) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """``score_records`` and ``summarize_ground_truth`` of a run directory on a planted
    stream: the stream (and its causes) is generated again from the dataset config of the
    run's ``run.json`` (the one I/O function here).

    Raises:
        ConfigError: The folder is not a run directory, or its stream has no planted causes.
    """
    stream = load_run_stream(read_fingerprint(run_dir))
    if stream.causes is None:
        raise ConfigError(f"{run_dir}: the run's stream {stream.name!r} has no planted causes; "
                          "ground-truth metrics need a run on dataset=planted")
    rows = [{str(k): v for k, v in row.items()}
            for row in read_records(run_dir).to_dict("records")]
    scored = score_records(rows, stream.causes)
    return scored, summarize_ground_truth(scored)


__all__ = ["score_run"]

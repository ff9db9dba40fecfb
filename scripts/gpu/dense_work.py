"""How many GRU row updates each form of TGN's exact cone replay makes on one event, for every
set of at most K of its candidates (``cftgnn.benchmarks.dense_work``): the dense replay that a
GPU runs, the cone without sharing, the row table without pruning. No replay runs, so it
needs no GPU:

    CFTGNN_DATA_DIR=../shared/data python scripts/gpu/dense_work.py \
        --dataset uci --event 57464 --max-size 2
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from cftgnn.cli import ArgumentParser, friendly_errors

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="uci", choices=("uci", "wikipedia"))
    parser.add_argument("--event", type=int, required=True)
    parser.add_argument("--max-size", type=int, default=2, choices=(1, 2, 3))
    parser.add_argument("--m-max", type=int, default=64)
    args = parser.parse_args()
    with friendly_errors():
        print(count(args.dataset, args.event, args.max_size, args.m_max))


def count(dataset: str, event: int, max_size: int, m_max: int) -> str:
    """The counts of ``dataset`` · TGN (the committed checkpoint) on ``event``, as a line."""
    from cftgnn.benchmarks.dense_work import replay_work
    from cftgnn.data import load_uci, load_wikipedia
    from cftgnn.errors import ConfigError
    from cftgnn.oracle.engine import EventReplay, ReplayEngine
    from cftgnn.replay.masks import RemovalSets

    stream = (load_uci if dataset == "uci" else load_wikipedia)()
    if not 0 < event < stream.num_events:
        raise ConfigError(f"--event must be in 1..{stream.num_events - 1}, got {event}")
    engine = ReplayEngine.from_checkpoint(ROOT / "checkpoints" / f"tgn_{dataset}.pt", stream)
    replay = EventReplay(engine, event, None, m_max)
    cand = replay.candidates.ids.tolist()
    sets = RemovalSets.from_sets([c for k in range(1, max_size + 1)
                                  for c in itertools.combinations(cand, k)])
    work = replay_work(engine.model, replay._plan.trajectory, sets)  # type: ignore[attr-defined]
    return (f"{dataset} · TGN event {event}, sets of at most {max_size} of {len(cand)} "
            f"candidates: {work['sets']:,} sets, {work['batches']} history batches, "
            f"{work['columns']} columns; GRU row updates: dense {work['dense']:,}, "
            f"cone {work['cone']:,}, row table without pruning {work['keyed']:,}")


if __name__ == "__main__":
    sys.exit(main())

"""Explain a sample of events with several explainers and summarise the records."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from tqdm.auto import tqdm

from cftgnn.data.stream import EventStream
from cftgnn.explain.base import Explainer
from cftgnn.explain.oracle import OracleMode
from cftgnn.explain.replay import ReplayEngine


def sample_events(
    stream: EventStream, n: int, seed: int = 0, start: float = 0.85, end: float = 1.0
) -> npt.NDArray[np.int64]:
    """``n`` event ids drawn without replacement (seeded) from a share of the stream, sorted.

    Args:
        stream: The stream.
        n: Number of events.
        seed: Random seed.
        start: Start of the range as a share of the stream (0.85 = the usual test split).
        end: End of the range as a share of the stream.
    """
    lo, hi = int(start * stream.num_events), int(end * stream.num_events)
    if not 0 <= lo < hi <= stream.num_events:
        raise ValueError(f"empty event range [{lo}, {hi}) for shares [{start}, {end})")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(np.arange(lo, hi), size=min(n, hi - lo), replace=False))


def explain_events(
    engine: ReplayEngine,
    explainers: Mapping[str, Callable[[], Explainer]],
    events: Sequence[int],
    k: int | None = None,
    m_max: int = 64,
    mode: OracleMode | str = OracleMode.APPROXIMATE,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Explain every event with every explainer; one flat record per (explainer, event).

    Events are visited in stream order (the engine's cursor moves forward), and each
    explainer gets its own fresh oracle, so no explainer profits from another's cache.

    Args:
        engine: Replay engine of the model and stream.
        explainers: Name → factory of a fresh explainer.
        events: Event ids to explain.
        k: Hop radius of the candidate sets (default: the model's number of layers).
        m_max: Maximum number of candidates.
        mode: Search mode of the oracles.
        progress: Show a progress bar.

    Returns:
        Records (``ExplanationResult.to_record()`` plus a ``run`` column naming the
        explainer).
    """
    records = []
    bar = tqdm(total=len(events) * len(explainers), desc="explaining", disable=not progress)
    for i in sorted(int(e) for e in events):
        for name, make in explainers.items():
            result = engine.explain(make(), i, k=k, m_max=m_max, mode=mode)
            records.append({"run": name, **result.to_record()})
            bar.update()
    bar.close()
    return records


def summarize(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per run: events, success rate, mean size of found counterfactuals, oracle calls, time.

    Time per event is the setup plus the search (``setup_time_s + wall_time_s``).
    """
    df = pd.DataFrame(list(records))
    df["time_s"] = df["setup_time_s"] + df["wall_time_s"]
    rows = []
    for run, g in df.groupby("run", sort=False):
        ok = g[g["status"] == "ok"]
        cf = ok[ok["is_counterfactual"]]
        rows.append(
            {
                "run": run,
                "events": len(g),
                "explained": len(ok),
                "success_rate": float(ok["is_counterfactual"].mean()) if len(ok) else float("nan"),
                "mean_size": float(cf["size"].mean()) if len(cf) else float("nan"),
                "mean_oracle_calls": float(ok["oracle_calls"].mean()) if len(ok) else float("nan"),
                "median_time_s": float(g["time_s"].median()),
            }
        )
    return pd.DataFrame(rows)

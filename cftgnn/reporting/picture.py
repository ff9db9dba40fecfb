"""A picture of one explained event: its candidate events in time and as a graph.

``python scripts/show_explanation.py RUN_DIR EVENT_ID [--out PNG] [--x order]`` reads the event's
record from a run directory, loads the run's stream (the dataset config stored in ``run.json``; the
data directory comes from ``$CFTGNN_DATA_DIR`` or ``<project>/data`` as for every loader),
recomputes the candidates' hop distances with
[``cftgnn.data.TemporalIndex``][cftgnn.data.TemporalIndex] and draws

* left, the candidate events on a time axis (relative to the explained event), one lane per
  endpoint pair, grouped by hop distance, the explanation's events highlighted and the
  explained event marked;
* right, the same events as a graph (networkx spring layout): the explained event's endpoints
  marked, the edges of removed events in a distinct colour, the predicted link dashed;
* in the title, the logit before and after removing the explanation (flipped or not) and the
  logit with only the explanation kept.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch

from cftgnn.cli import ArgumentParser
from cftgnn.data.index import M_MAX, TemporalIndex
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.files import check_can_write
from cftgnn.oracle.history import record_history_end
from cftgnn.oracle.oracle import is_flip
from cftgnn.reporting.plots import save_png
from cftgnn.runs.rundir import (
    load_run_stream,
    read_fingerprint,
    read_records,
    run_batch_size,
)
from cftgnn.runs.showcase import logit_text, time_unit

DPI = 120
REMOVED = "#d62728"  # the explanation's events and edges
KEPT = "#8c8c8c"  # the other candidates
ENDPOINT = "#1f77b4"  # the explained event and its endpoints


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ExplanationView:
    """Everything the picture shows about one explained event.

    Attributes:
        event_id: The explained event ``i``.
        src: Its source node ``u``.
        dst: Its destination node ``v``.
        t: Its timestamp.
        ids: Candidate event ids, oldest first, ``int64 [M]``.
        cand_src: Source node of each candidate, ``int64 [M]``.
        cand_dst: Destination node of each candidate, ``int64 [M]``.
        cand_t: Timestamp of each candidate, ``float64 [M]``.
        hops: Hop distance of each candidate from ``{u, v}``, ``int64 [M]``.
        removed: Whether each candidate is in the explanation, ``bool [M]``.
        explanation: The explanation's event ids in the order found.
        original_logit: Logit with the full history.
        final_logit: Logit with the explanation removed.
        keep_logit: Logit with only the explanation kept among the candidates (NaN if unknown).
        k: Hop radius of the candidates.
        m_max: Cap on the number of candidates.
        name: What produced the explanation (dataset · model · explainer/strategy).
        status: The record's status (``ok``, ``no_candidates``, ``zero_logit``).
    """

    event_id: int
    src: int
    dst: int
    t: float
    ids: npt.NDArray[np.int64]
    cand_src: npt.NDArray[np.int64]
    cand_dst: npt.NDArray[np.int64]
    cand_t: npt.NDArray[np.float64]
    hops: npt.NDArray[np.int64]
    removed: npt.NDArray[np.bool_]
    explanation: tuple[int, ...]
    original_logit: float
    final_logit: float
    keep_logit: float
    k: int
    m_max: int
    name: str = ""
    status: str = "ok"

    @property
    def flipped(self) -> bool:
        """Whether removing the explanation flips the prediction (``p0 · p < 0``)."""
        return is_flip(self.original_logit, self.final_logit)

    @property
    def highlighted(self) -> npt.NDArray[np.int64]:
        """The candidate ids drawn as removed (the explanation), oldest first."""
        return self.ids[self.removed]


def find_record(records: pd.DataFrame, event_id: int, where: str = "the run") -> pd.Series:
    """The record of ``event_id``.

    Raises:
        ConfigError: No record has that event id (the message lists a few that do).
    """
    ids = records["event_id"].astype(int).tolist() if "event_id" in records.columns else []
    if int(event_id) not in ids:
        shown = ", ".join(str(i) for i in ids[:8]) + (", ..." if len(ids) > 8 else "")
        raise ConfigError(f"event {event_id} is not in the records of {where} "
                          f"({len(ids)} events: {shown or 'none'})")
    return records[records["event_id"].astype(int) == int(event_id)].iloc[0]


def hop_radius(fingerprint: Mapping[str, Any]) -> int:
    """The run's ``k``; when null, the model's number of layers (as the explain pipeline)."""
    k = fingerprint.get("k")
    if k is None:
        k = (fingerprint.get("model", {}).get("config") or {}).get("num_layers", 1)
    return int(k)


def run_name(record: pd.Series | Mapping[str, Any]) -> str:
    """``dataset · model · explainer/strategy`` of a record."""
    parts = [str(record.get(c, "")) for c in ("dataset", "model")]
    method = f"{record.get('explainer', '')}/{record.get('strategy_name', '')}"
    return " · ".join([*(p for p in parts if p), method])


def explanation_view(stream: EventStream, record: pd.Series | Mapping[str, Any], k: int,
                     m_max: int, name: str = "", batch_size: int | None = None
                     ) -> ExplanationView:
    """Join a record with its stream: candidate endpoints, times and hop distances.

    Args:
        stream: The run's event stream.
        record: One record (``event_id``, ``candidate_ids``, ``explanation``, logits).
        k: The run's hop radius.
        m_max: The run's cap on the number of candidates.
        name: Shown in the title.
        batch_size: The run's model batch size (a ``history=batch_start`` record's
            candidates lie before its event's batch).

    Returns:
        The view.

    Raises:
        ConfigError: The stream's candidates of the event are not the record's (another
            stream, ``k`` or ``m_max`` than the run's).
    """
    event_id = int(record["event_id"])
    cands = TemporalIndex(stream).candidates(event_id, k, m_max,
                                             record_history_end(record, batch_size))
    recorded = np.sort(np.asarray(record["candidate_ids"], dtype=np.int64))
    if not np.array_equal(recorded, cands.ids):
        raise ConfigError(f"the candidates of event {event_id} in this stream (k={k}, "
                          f"m_max={m_max}) are not the record's; is it the run's stream?")
    explanation = tuple(int(e) for e in record["explanation"])
    keep = record.get("keep_logit", math.nan)
    return ExplanationView(
        event_id=event_id,
        src=int(stream.src[event_id]),
        dst=int(stream.dst[event_id]),
        t=float(stream.t[event_id]),
        ids=cands.ids,
        cand_src=stream.src[cands.ids],
        cand_dst=stream.dst[cands.ids],
        cand_t=np.asarray(stream.t[cands.ids], dtype=np.float64),
        hops=cands.hops,
        removed=np.isin(cands.ids, np.asarray(explanation, dtype=np.int64)),
        explanation=explanation,
        original_logit=float(record["original_logit"]),
        final_logit=float(record["final_logit"]),
        keep_logit=math.nan if keep is None else float(keep),
        k=k,
        m_max=m_max,
        name=name,
        status=str(record.get("status", "ok")),
    )


def load_view(run_dir: str | os.PathLike[str], event_id: int) -> ExplanationView:
    """The ``ExplanationView`` of ``event_id`` in a run directory.

    Raises:
        ConfigError: Not a run directory, the event has no record, or the stream does not
            match the run.
        CftgnnError: The run's data files cannot be read.
    """
    fingerprint = read_fingerprint(run_dir)
    record = find_record(read_records(run_dir), event_id, str(run_dir))
    stream = load_run_stream(fingerprint)
    return run_view(stream, record, fingerprint)


def run_view(stream: EventStream, record: pd.Series | Mapping[str, Any],
             fingerprint: Mapping[str, Any]) -> ExplanationView:
    """The ``ExplanationView`` of one record of a run whose stream is loaded: the run's
    ``k``, ``m_max`` and batch size from its ``run.json`` content (``fingerprint``)."""
    return explanation_view(stream, record, hop_radius(fingerprint),
                            int(fingerprint.get("m_max", M_MAX)), run_name(record),
                            run_batch_size(fingerprint))


# --------------------------------------------------------------------------- drawing


def _lanes(view: ExplanationView) -> tuple[list[tuple[int, int]], dict[tuple[int, int], int]]:
    """Endpoint pairs, one lane each: the explained pair first, then by hop and recency."""
    pairs = [tuple(sorted(p)) for p in zip(view.cand_src.tolist(), view.cand_dst.tolist(),
                                           strict=True)]
    hop: dict[tuple[int, int], int] = {}
    last: dict[tuple[int, int], int] = {}
    for n, pair in enumerate(pairs):
        hop[pair] = int(view.hops[n])
        last[pair] = n
    explained = (min(view.src, view.dst), max(view.src, view.dst))
    order = sorted(hop, key=lambda p: (p != explained, hop[p], -last[p]))
    if explained not in hop:
        order.insert(0, explained)
        hop[explained] = 0
    return order, hop


def _draw_timeline(ax: Axes, view: ExplanationView, x_axis: str = "time") -> None:
    """Candidate events against time (or their order), one lane per endpoint pair."""
    order, hop = _lanes(view)
    lane = {p: n for n, p in enumerate(order)}
    if x_axis == "order":
        x = np.arange(len(view.ids), dtype=np.float64) - len(view.ids)
        xlabel = "candidate position (−1 = the most recent before the explained event)"
    else:
        span = float(np.max(np.abs(view.cand_t - view.t))) if len(view.ids) else 0.0
        unit, size = time_unit(span)
        x = (view.cand_t - view.t) / size
        xlabel = f"time relative to the explained event ({unit})"
    y = np.array([lane[(min(s, d), max(s, d))] for s, d in
                  zip(view.cand_src.tolist(), view.cand_dst.tolist(), strict=True)], dtype=float)
    kept = ~view.removed
    ax.scatter(x[kept], y[kept], s=36, facecolors="none", edgecolors=KEPT, linewidths=1.2,
               label=f"kept candidate ({int(kept.sum())})", gid="kept", zorder=2)
    ax.scatter(x[view.removed], y[view.removed], s=60, color=REMOVED, edgecolors="black",
               linewidths=0.5, label=f"explanation, removed ({int(view.removed.sum())})",
               gid="explanation", zorder=3)
    explained = (min(view.src, view.dst), max(view.src, view.dst))
    ax.scatter([0.0], [lane[explained]], marker="*", s=260, color=ENDPOINT, edgecolors="black",
               linewidths=0.6, label=f"explained event {view.event_id}", gid="explained",
               zorder=4)
    ax.axvline(0.0, color=ENDPOINT, linestyle=":", linewidth=1)
    for n in range(1, len(order)):  # a rule between hop groups
        if hop[order[n]] != hop[order[n - 1]]:
            ax.axhline(n - 0.5, color="0.75", linewidth=0.8)
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"{a}–{b}  (hop {hop[(a, b)]})" for a, b in order],
                       fontsize=8 if len(order) <= 24 else 6.5)
    ax.set_ylim(len(order) - 0.5, -0.5)  # the explained pair on top
    ax.margins(x=0.04)
    ax.grid(axis="x", alpha=0.3)
    ax.set(xlabel=xlabel,
           ylabel="endpoint pair (one lane each)",
           title=f"{len(view.ids)} candidate events (k = {view.k}, m_max = {view.m_max})")
    if not len(view.ids):
        ax.set_xlim(-1.0, 0.5)
        ax.text(0.5, 0.5, f"no candidate events (status: {view.status})", ha="center",
                va="center", transform=ax.transAxes, color="0.4")


def _layout(graph: nx.Graph, explained: tuple[int, int]) -> dict[Any, npt.NDArray[np.float64]]:
    """Seeded spring layout; the explained pair and every other component are tied to ``u``
    (edges used for the layout only), so that far components do not squeeze the rest."""
    layout = graph.copy()
    layout.add_edge(*explained)
    for part in list(nx.connected_components(layout)):
        if explained[0] not in part:
            layout.add_edge(explained[0], min(part))
    n = max(layout.number_of_nodes(), 1)
    pos: dict[Any, npt.NDArray[np.float64]] = nx.spring_layout(
        layout, k=1.6 / math.sqrt(n), iterations=200, seed=0)
    return pos


def _draw_graph(ax: Axes, view: ExplanationView) -> list[Line2D]:
    """The candidate events as a graph: spring layout, removed edges highlighted.

    Returns:
        Legend handles of the edge kinds.
    """
    count: dict[tuple[int, int], int] = {}
    cut: dict[tuple[int, int], int] = {}
    for s, d, r in zip(view.cand_src.tolist(), view.cand_dst.tolist(), view.removed.tolist(),
                       strict=True):
        pair = (min(s, d), max(s, d))
        count[pair] = count.get(pair, 0) + 1
        cut[pair] = cut.get(pair, 0) + int(r)
    graph = nx.Graph()
    graph.add_nodes_from([view.src, view.dst])
    graph.add_edges_from(count)
    explained = (min(view.src, view.dst), max(view.src, view.dst))
    pos = _layout(graph, explained)

    def segments(pairs: Sequence[tuple[int, int]]) -> list[list[tuple[float, float]]]:
        return [[tuple(pos[a]), tuple(pos[b])] for a, b in pairs]

    kept = [p for p in count if cut[p] == 0]
    removed = [p for p in count if cut[p] > 0]
    ax.add_collection(LineCollection(segments(kept), colors=KEPT, alpha=0.8, zorder=1,
                                     linewidths=[0.8 + math.log2(count[p]) for p in kept]))
    ax.add_collection(LineCollection(segments(removed), colors=REMOVED, zorder=2, gid="removed",
                                     linewidths=[1.8 + math.log2(cut[p]) for p in removed]))
    ax.add_patch(FancyArrowPatch(  # the predicted link u → v, bent so it hides no edge
        tuple(pos[view.src]), tuple(pos[view.dst]), connectionstyle="arc3,rad=0.35",
        arrowstyle="-|>", mutation_scale=14, linestyle="--", linewidth=1.8, color=ENDPOINT,
        shrinkA=10, shrinkB=10, zorder=2))
    nodes = list(graph.nodes)
    xy = np.array([pos[n] for n in nodes])
    ends = np.array([n in explained for n in nodes])
    ax.scatter(xy[~ends, 0], xy[~ends, 1], s=190, color="#ececec", edgecolors="0.4", zorder=3)
    ax.scatter(xy[ends, 0], xy[ends, 1], s=360, color=ENDPOINT, edgecolors="black", zorder=3)
    for node, (px, py) in zip(nodes, xy, strict=True):
        ax.annotate(str(node), (px, py), ha="center", va="center", zorder=4,
                    fontsize=6 if len(nodes) > 30 else 6.5,
                    color="white" if node in explained else "black")
    ax.margins(0.08)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set(title=f"as a graph ({graph.number_of_nodes()} nodes, {len(count)} node pairs)",
           xlabel="spring layout; node = id, edge width grows with the events per pair")
    return [
        Line2D([], [], color=KEPT, label="edge: kept events"),
        Line2D([], [], color=REMOVED, linewidth=2.5, label="edge: removed events"),
        Line2D([], [], color=ENDPOINT, linestyle="--", linewidth=2,
               label=f"predicted link {view.src}→{view.dst}"),
    ]


def picture_title(view: ExplanationView) -> str:
    """``logit p0 → final (flipped / not flipped), keep logit …`` with the event and run."""
    verdict = "flipped" if view.flipped else "not flipped"
    head = " · ".join(p for p in (view.name, f"event {view.event_id} ({view.src}→{view.dst})")
                      if p)
    return (f"{head}\nlogit {logit_text(view.original_logit)} → "
            f"{logit_text(view.final_logit)} ({verdict})"
            f" with {len(view.explanation)} of {len(view.ids)} candidates removed · keep logit "
            f"(only the explanation kept) {logit_text(view.keep_logit)}")


def plot_explanation(view: ExplanationView, x_axis: str = "time") -> Figure:
    """The picture of one explained event (timeline left, graph right, logits in the title).

    Args:
        view: From ``explanation_view`` or ``load_view``.
        x_axis: ``"time"`` (relative to the explained event) or ``"order"`` (candidate
            position, evenly spaced: easier to read when events crowd in time).

    Returns:
        The figure (no pyplot; save it with ``fig.savefig``).
    """
    n_lanes = len(set(zip(view.cand_src.tolist(), view.cand_dst.tolist(), strict=True))) + 1
    height = float(np.clip(0.24 * n_lanes + 2.2, 5.0, 13.0))
    fig = Figure(figsize=(15.0, height), layout="constrained")
    ax_time, ax_graph = fig.subplots(1, 2, width_ratios=[1.5, 1.0])
    if x_axis not in ("time", "order"):
        raise ConfigError(f"x_axis must be 'time' or 'order', got {x_axis!r}")
    _draw_timeline(ax_time, view, x_axis)
    edges = _draw_graph(ax_graph, view)
    handles, _ = ax_time.get_legend_handles_labels()
    fig.legend(handles=[*handles, *edges], loc="outside lower center", ncol=6,
               fontsize="small", frameon=False)
    fig.suptitle(picture_title(view))
    return fig


def picture_path(run_dir: str | os.PathLike[str], event_id: int) -> Path:
    """Where a run's picture of ``event_id`` goes: ``<run dir>/explanation_<event>.png``."""
    return Path(run_dir) / f"explanation_{int(event_id)}.png"


def save_picture(stream: EventStream, record: pd.Series | Mapping[str, Any],
                 fingerprint: Mapping[str, Any], run_dir: str | os.PathLike[str]) -> Path:
    """Draw one record of a run into its directory (``explain.py`` draws the prediction it
    shows; ``cftgnn.runs.pipeline.Draw``).

    Args:
        stream: The run's stream (already loaded: nothing is read again).
        record: One of the run's records.
        fingerprint: The run's ``run.json`` content (``k``, ``m_max``, the model's config).
        run_dir: The run directory.

    Returns:
        The PNG's path (``picture_path``), written whole or not at all.
    """
    view = run_view(stream, record, fingerprint)
    return save_png(plot_explanation(view), picture_path(run_dir, view.event_id), DPI)


def main(argv: Sequence[str] | None = None) -> Path:
    """Command line: ``show_explanation.py RUN_DIR EVENT_ID [--out PNG]``."""
    parser = ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run_dir", help="a run directory (holding run.json and records/)")
    parser.add_argument("event_id", type=int, help="an explained event of that run")
    parser.add_argument("--out", help="PNG file (default: <run dir>/explanation_<event>.png)")
    parser.add_argument("--x", choices=("time", "order"), default="time", dest="x_axis",
                        help="x axis of the timeline: time (default) or candidate order")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else picture_path(args.run_dir, args.event_id)
    check_can_write(out, "--out", file=True)
    view = load_view(args.run_dir, args.event_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_png(plot_explanation(view, args.x_axis), out, DPI)  # complete or absent
    print(picture_title(view).replace("\n", " | "))
    print(f"wrote {out}")
    return out


__all__ = [
    "ExplanationView",
    "explanation_view",
    "find_record",
    "hop_radius",
    "load_view",
    "main",
    "picture_path",
    "picture_title",
    "plot_explanation",
    "run_name",
    "run_view",
    "save_picture",
    "time_unit",
]

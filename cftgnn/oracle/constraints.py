"""User constraints: which candidate events an explanation may remove (docs/design.md §7).

Adapted from UFCE's *actionable subset* (seed 001): a user names what may not change, and the
search runs over what is left. Here the changes are removals of past events. A
[``Constraints``][cftgnn.oracle.Constraints] shrinks the search space, never the oracle: the
candidate set ``C`` is built as before (k hops, ``m_max`` most recent), the *removable* set
``R ⊆ C`` drops the protected events, every oracle mode keeps the protected events in the history,
and every certificate speaks of ``R``.

Protected (never removed), any combination:

* ``protect_pair`` — the explained pair's own past events (events between ``u`` and ``v``, in
  either direction);
* ``before`` — events with a timestamp strictly before this time (the stream's time unit);
* ``nodes`` — events with an endpoint in these nodes (node ids as in the stream);
* ``events`` — these event ids;
* ``hops`` — ``[lo, hi]``: events whose hop distance lies outside this range.

``max_size`` bounds the size of any explanation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn.data.index import Candidates
from cftgnn.data.stream import EventStream
from cftgnn.errors import ConfigError
from cftgnn.options import as_integer

IntArray = npt.NDArray[np.int64]


def _int(value: Any, what: str) -> int:
    whole = as_integer(value)  # the one integer rule of every option (cftgnn.options)
    if whole is None:
        raise ConfigError(f"constraints.{what} must be an integer, got {value!r}")
    return whole


def _ints(values: Iterable[Any] | None, what: str) -> tuple[int, ...]:
    if values is None:
        return ()
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ConfigError(f"constraints.{what} must be a list of integers, got {values!r}")
    return tuple(sorted({_int(v, what) for v in values}))


@dataclass(frozen=True)
class Constraints:
    """Which candidate events may not be removed, and the largest explanation allowed.

    Args:
        protect_pair: Protect the explained pair's own past events.
        before: Protect events with timestamp ``< before`` (None: no bound).
        nodes: Protect events touching any of these nodes.
        events: Protect these event ids.
        hops: ``(lo, hi)``: protect events whose hop distance is outside ``[lo, hi]``.
        max_size: Largest explanation size (None: no bound).

    Raises:
        ConfigError: On values of the wrong type or out of range (``max_size < 1``, a
            negative node or event id, ``lo > hi``, a non-finite time).
    """

    protect_pair: bool = False
    before: float | None = None
    nodes: tuple[int, ...] = field(default=())
    events: tuple[int, ...] = field(default=())
    hops: tuple[int, int] | None = None
    max_size: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.protect_pair, bool | np.bool_):
            raise ConfigError(f"constraints.protect_pair must be true or false, "
                              f"got {self.protect_pair!r}")
        object.__setattr__(self, "protect_pair", bool(self.protect_pair))
        if self.before is not None:
            try:
                before = float(self.before)
            except (TypeError, ValueError) as err:
                raise ConfigError(f"constraints.before must be a time, got {self.before!r}"
                                  ) from err
            if not np.isfinite(before):
                raise ConfigError(f"constraints.before must be finite, got {self.before!r}")
            object.__setattr__(self, "before", before)
        nodes = _ints(self.nodes, "nodes")
        events = _ints(self.events, "events")
        for what, values in (("nodes", nodes), ("events", events)):
            if values and values[0] < 0:
                raise ConfigError(f"constraints.{what} holds a negative id: {values[0]}")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "events", events)
        if self.hops is not None:
            hops = list(self.hops) if isinstance(self.hops, Sequence) else [self.hops]
            if isinstance(self.hops, str) or len(hops) != 2:
                raise ConfigError(f"constraints.hops must be [lo, hi], got {self.hops!r}")
            lo, hi = _int(hops[0], "hops"), _int(hops[1], "hops")
            if lo < 0 or hi < lo:
                raise ConfigError(f"constraints.hops must satisfy 0 <= lo <= hi, got "
                                  f"[{lo}, {hi}]")
            object.__setattr__(self, "hops", (lo, hi))
        if self.max_size is not None:
            size = _int(self.max_size, "max_size")
            if size < 1:
                raise ConfigError(f"constraints.max_size must be >= 1, got {size}")
            object.__setattr__(self, "max_size", size)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> Constraints:
        """Build from a plain mapping (a Hydra node turned into a dict); None: no constraint.

        Raises:
            ConfigError: On an unknown key or a bad value.
        """
        if cfg is None:
            return cls()
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ConfigError(f"unknown constraint {unknown[0]!r} (known: "
                              f"{', '.join(sorted(known))})")
        return cls(**dict(cfg))

    @property
    def active(self) -> bool:
        """Whether anything is constrained."""
        return self != Constraints()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (lists for tuples)."""
        out = asdict(self)
        out["nodes"] = list(self.nodes)
        out["events"] = list(self.events)
        out["hops"] = None if self.hops is None else list(self.hops)
        return out

    def to_json(self) -> str:
        """A compact, key-sorted JSON string (as written into records)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def validate(self, stream: EventStream) -> None:
        """Check the named nodes and events exist in ``stream``.

        Raises:
            ConfigError: Naming the first unknown node or event id.
        """
        if self.nodes and self.nodes[-1] >= stream.num_nodes:
            raise ConfigError(f"constraints.nodes: unknown node {self.nodes[-1]} (the stream "
                              f"has nodes 0..{stream.num_nodes - 1})")
        if self.events and self.events[-1] >= stream.num_events:
            raise ConfigError(f"constraints.events: event id {self.events[-1]} is outside the "
                              f"stream (0..{stream.num_events - 1})")

    def protected(self, candidates: Candidates, stream: EventStream) -> npt.NDArray[np.bool_]:
        """Which candidates are protected, aligned with ``candidates.ids``, ``bool [M]``."""
        ids = np.asarray(candidates.ids, dtype=np.int64)
        out = np.zeros(len(ids), dtype=bool)
        if len(ids) == 0:
            return out
        src, dst = stream.src[ids], stream.dst[ids]
        if self.protect_pair:
            i = candidates.event_id
            u, v = int(stream.src[i]), int(stream.dst[i])
            out |= ((src == u) & (dst == v)) | ((src == v) & (dst == u))
        if self.before is not None:
            out |= stream.t[ids] < self.before
        if self.nodes:
            nodes = np.asarray(self.nodes, dtype=np.int64)
            out |= np.isin(src, nodes) | np.isin(dst, nodes)
        if self.events:
            out |= np.isin(ids, np.asarray(self.events, dtype=np.int64))
        if self.hops is not None:
            lo, hi = self.hops
            out |= (candidates.hops < lo) | (candidates.hops > hi)
        return out

    def removable(self, candidates: Candidates, stream: EventStream) -> IntArray:
        """``R``: the candidates that are not protected, ascending, ``int64 [R]``."""
        ids = np.asarray(candidates.ids, dtype=np.int64)
        return ids[~self.protected(candidates, stream)]


NO_CONSTRAINTS = Constraints()

__all__ = ["NO_CONSTRAINTS", "Constraints"]

"""``device=auto``'s rule: where an exact call of P removal sets runs faster, CPU or GPU.

One rule, written here and nowhere else. An exact call replays the
explained event's history batch by batch, so its seconds on a device are about

    ``batches · (s_per_batch + s_per_batch_set · P)``

with a fixed part per history batch (on the CPU the row table's host steps, on a GPU the
dense replay's kernel launches, which a small call is bound by) and a part per set (the rows
and the arithmetic: a GPU has about a thousand times the CPU's). The history's length
cancels in the comparison, so the rule is one call size: the GPU runs a call of at least
``DeviceCosts.crossover_sets`` sets, the CPU every smaller one (``place_call``). Single calls
(a CF-TGNN search's) would stay on the CPU and the batched calls of an exhaustive search or a
certification go to the GPU, by as much as the measured constants say.

The four constants are measured on a GPU machine, never guessed: ``fit_costs`` fits them to
timed calls (``scripts/benchmark_gpu.py`` times single exact calls and a batch on both
sides of every event and records each event's history batches, and reports the fit).
``MEASURED_COSTS`` holds them once a device session has measured them; until then it is
None and ``place_call`` keeps every call on the CPU, which is never slower than the CPU.

``explain.py``'s ``device=auto`` asks the rule once per run, for the explainer's largest
oracle call (``Explainer.largest_call``; ``cftgnn.runs.build.explain_device``), and each
record says where its event ran (``device``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Place(str, Enum):
    """Where a call runs."""

    CPU = "cpu"
    GPU = "gpu"


@dataclass(frozen=True)
class DeviceCosts:
    """Seconds per history batch of an exact call on each device (see the module docstring).

    Attributes:
        cpu_s_per_batch: CPU seconds per history batch, whatever the sets.
        cpu_s_per_batch_set: CPU seconds per history batch and set.
        gpu_s_per_batch: GPU seconds per history batch, whatever the sets (launches).
        gpu_s_per_batch_set: GPU seconds per history batch and set (the arithmetic).
    """

    cpu_s_per_batch: float
    cpu_s_per_batch_set: float
    gpu_s_per_batch: float
    gpu_s_per_batch_set: float

    def __post_init__(self) -> None:
        for name in ("cpu_s_per_batch", "cpu_s_per_batch_set", "gpu_s_per_batch",
                     "gpu_s_per_batch_set"):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value) or value < 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def seconds(self, place: Place, sets: int, batches: int = 1) -> float:
        """The predicted seconds of a call of ``sets`` sets over ``batches`` history
        batches on ``place``."""
        if place is Place.CPU:
            return batches * (self.cpu_s_per_batch + self.cpu_s_per_batch_set * sets)
        return batches * (self.gpu_s_per_batch + self.gpu_s_per_batch_set * sets)

    @property
    def crossover_sets(self) -> float:
        """The least call size the GPU is predicted faster for (``inf``: none; 1: every
        call)."""
        fixed = self.gpu_s_per_batch - self.cpu_s_per_batch
        gain = self.cpu_s_per_batch_set - self.gpu_s_per_batch_set
        if gain <= 0:  # the GPU gains nothing per set: faster for every size or none
            return 1.0 if fixed < 0 else math.inf
        return max(1.0, math.floor(fixed / gain) + 1.0)


#: The four constants as a GPU machine measured them (``fit_costs`` of
#: ``scripts/benchmark_gpu.py``'s ``placement`` figures), or None. They wait for the device
#: measurement (``scripts/gpu/check.sh``'s benchmark): until then ``place_call`` keeps
#: every call on the CPU, and so does ``explain.py``'s ``device=auto``, which reads it when a
#: run starts (``cftgnn.runs.build.explain_device``, on the explainer's ``largest_call``).
MEASURED_COSTS: DeviceCosts | None = None


def place_call(sets: int, costs: DeviceCosts | None = MEASURED_COSTS,
               gpu: bool = True) -> Place:
    """Where an exact call of ``sets`` sets runs: on the GPU when there is one (``gpu``),
    costs were measured and the GPU is predicted faster for that size, else on the CPU
    (ties stay there: never slower than the CPU by the prediction)."""
    if not gpu or costs is None or sets < 1:
        return Place.CPU
    faster = costs.seconds(Place.GPU, sets) < costs.seconds(Place.CPU, sets)
    return Place.GPU if faster else Place.CPU


@dataclass(frozen=True)
class CallTiming:
    """One measured exact call: its sets, the event's history batches, its seconds on each
    device (``scripts/benchmark_gpu.py``'s single calls and batches)."""

    sets: int
    batches: int
    cpu_s: float
    gpu_s: float


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares intercept and slope of ``ys`` against ``xs``, both clipped at 0."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    slope = max(0.0, slope)
    return max(0.0, my - slope * mx), slope


def fit_costs(timings: Sequence[CallTiming]) -> DeviceCosts:
    """The constants that fit measured calls: per device, the seconds per history batch
    (``s / batches``) against the sets by least squares, intercept and slope clipped at 0.

    Raises:
        ValueError: For a call of no sets or no batches, or without calls of at least two
            sizes.
    """
    if any(t.sets < 1 or t.batches < 1 for t in timings):
        raise ValueError("every timed call needs sets >= 1 and batches >= 1")
    if len({t.sets for t in timings}) < 2:
        raise ValueError("fitting the costs needs calls of at least two sizes")
    xs = [float(t.sets) for t in timings]
    cpu = _line(xs, [t.cpu_s / t.batches for t in timings])
    gpu = _line(xs, [t.gpu_s / t.batches for t in timings])
    return DeviceCosts(cpu[0], cpu[1], gpu[0], gpu[1])


__all__ = ["CallTiming", "DeviceCosts", "MEASURED_COSTS", "Place", "fit_costs", "place_call"]

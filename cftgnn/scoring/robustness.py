"""Robustness of an explanation (seed 002): does it survive being carried out imperfectly?

Three measures of one counterfactual ``s`` of an explained event, all with the exact oracle:

* **implementation noise** (seed 002's noisy recourse): variants of ``s`` that keep one of its
  events (``s \\ {e}``) or remove one more removable candidate (``s ∪ {c}``); the share of
  variants that still flip (``flip_share``). All variants when there are at most
  ``variants`` of them, else a seeded sample, half of each kind as far as they go; one batched
  exact call.
* **model noise**: whether ``s`` also flips the prediction of a second checkpoint of the same
  model trained with another seed (its own original logit against its logit without ``s``).
* a **local counterfactual rule** (``local_rule``): the smallest group ``G ⊇ s`` of
  removable candidates, ``|G| > r``, such that removing any ``r`` of its events flips with
  probability at least ``π`` (over uniformly drawn ``r``-subsets; all of them when there are at
  most ``samples``, else ``samples`` drawn, the count kept with the estimate). ``r``
  defaults to ``|s|``: "remove any ``|s|`` of these ``|G|`` events". Events join ``G`` after
  those of ``s`` in the order of their own effect (the Δ of removing each alone, one batched
  call), at most ``max_extra`` of them.

``robustness_columns`` computes all three for a record; the pure parts
(``implementation_variants``, ``flip_share``) are separate.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cftgnn.errors import ConfigError
from cftgnn.oracle.oracle import Oracle, delta, is_flip

#: Record columns written by ``robustness_columns`` (null when not measured).
ROBUSTNESS_COLUMNS: tuple[str, ...] = (
    "robust_impl", "robust_impl_n", "robust_model", "robust_model_logit0",
    "robust_model_logit", "rule_group", "rule_r", "rule_prob", "rule_samples",
    "robustness_time_s",
)


@dataclass(frozen=True)
class RobustnessOptions:
    """Settings of the robustness measures (``robustness.*`` in ``conf/explain.yaml``).

    Attributes:
        variants: Most implementation-noise variants per explanation.
        rule_r: ``r`` of the local rule (None: the explanation's size).
        rule_pi: ``π``, the flip probability a rule must reach.
        rule_samples: Most ``r``-subsets evaluated per candidate group.
        rule_max_extra: Most events a rule's group may hold beyond the explanation.
        seed: Seed of the sampled variants and subsets.

    Raises:
        ConfigError: On a value out of range.
    """

    variants: int = 32
    rule_r: int | None = None
    rule_pi: float = 0.9
    rule_samples: int = 32
    rule_max_extra: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.variants < 1:
            raise ConfigError(f"robustness.variants must be >= 1, got {self.variants}")
        if self.rule_r is not None and self.rule_r < 1:
            raise ConfigError(f"robustness.rule_r must be >= 1 or null, got {self.rule_r}")
        if not 0 < self.rule_pi <= 1:
            raise ConfigError(f"robustness.rule_pi must be in (0, 1], got {self.rule_pi}")
        if self.rule_samples < 1:
            raise ConfigError(f"robustness.rule_samples must be >= 1, got {self.rule_samples}")
        if self.rule_max_extra < 1:
            raise ConfigError(f"robustness.rule_max_extra must be >= 1, got "
                              f"{self.rule_max_extra}")


@dataclass(frozen=True)
class LocalRule:
    """A local counterfactual rule: remove any ``r`` events of ``group``.

    Attributes:
        group: The group's events (the explanation's first), or ``()`` when no group up to
            the size limit reaches ``π``.
        r: Events removed.
        prob: Estimated flip probability of the group found (of the last group tried when
            none reached ``π``; NaN when none was tried).
        samples: ``r``-subsets the estimate rests on.
    """

    group: tuple[int, ...]
    r: int
    prob: float
    samples: int


def implementation_variants(explanation: Sequence[int], removable: Sequence[int],
                            n: int, rng: np.random.Generator) -> list[frozenset[int]]:
    """Noisy implementations of an explanation: each keeps one of its events or removes one
    more removable candidate.

    Args:
        explanation: The counterfactual ``s`` (non-empty).
        removable: The removable candidates ``R``.
        n: Most variants returned.
        rng: Draws the sample when there are more than ``n``.

    Returns:
        Distinct variants: every ``s \\ {e}`` and ``s ∪ {c}`` when there are at most ``n``,
        else ``n`` of them, half of each kind as far as they go (drops first).
    """
    s = frozenset(int(e) for e in explanation)
    drops = [s - {e} for e in sorted(s)]
    adds = [s | {int(c)} for c in sorted(set(int(c) for c in removable) - s)]
    if len(drops) + len(adds) <= n:
        return drops + adds
    k_drop = min(len(drops), n // 2)
    k_add = min(len(adds), n - k_drop)
    k_drop = min(len(drops), n - k_add)
    pick_d = sorted(rng.choice(len(drops), size=k_drop, replace=False).tolist())
    pick_a = sorted(rng.choice(len(adds), size=k_add, replace=False).tolist())
    return [drops[j] for j in pick_d] + [adds[j] for j in pick_a]


def flip_share(original_logit: float, logits: npt.ArrayLike) -> float:
    """Share of logits that flip ``original_logit`` (NaN for none)."""
    p = np.asarray(logits, dtype=np.float64).reshape(-1)
    return float(np.mean(is_flip(original_logit, p))) if len(p) else math.nan


def _subsets(group: Sequence[int], r: int, samples: int,
             rng: np.random.Generator) -> list[frozenset[int]]:
    """Every ``r``-subset of ``group`` when there are at most ``samples``, else ``samples``
    distinct ones drawn uniformly."""
    if math.comb(len(group), r) <= samples:
        return [frozenset(c) for c in itertools.combinations(group, r)]
    seen: set[frozenset[int]] = set()
    arr = np.asarray(group, dtype=np.int64)
    while len(seen) < samples:
        seen.add(frozenset(rng.choice(arr, size=r, replace=False).tolist()))
    return sorted(seen, key=sorted)


def local_rule(oracle: Oracle, explanation: Sequence[int], options: RobustnessOptions,
               rng: np.random.Generator) -> LocalRule:
    """The smallest group around an explanation from which any ``r`` removals flip with
    probability ``≥ π`` (see the module docstring).

    Args:
        oracle: The explained event's oracle (exact evaluations).
        explanation: The counterfactual ``s`` (non-empty).
        options: ``rule_r``, ``rule_pi``, ``rule_samples``, ``rule_max_extra``.
        rng: Draws the subsets.
    """
    s = [int(e) for e in explanation]
    r = len(s) if options.rule_r is None else int(options.rule_r)
    in_s = set(s)
    others = [int(c) for c in oracle.removable.tolist() if int(c) not in in_s]
    if others:  # the other candidates by their own effect, largest Δ first
        alone = oracle.exact_batch([frozenset({c}) for c in others])
        p0 = oracle.original_logit
        order = np.argsort([-delta(p0, float(p)) for p in alone], kind="stable")
        others = [others[j] for j in order]
    pool = s + others
    prob, count = math.nan, 0
    first = max(r + 1, len(s) + 1)
    last = min(len(pool), len(s) + options.rule_max_extra)
    for size in range(first, last + 1):
        group = pool[:size]
        subsets = _subsets(group, r, options.rule_samples, rng)
        logits = oracle.exact_batch(subsets)
        prob, count = flip_share(oracle.original_logit, logits), len(subsets)
        if prob >= options.rule_pi:
            return LocalRule(tuple(group), r, prob, count)
    return LocalRule((), r, prob, count)


def robustness_columns(oracle: Oracle, explanation: Sequence[int], is_counterfactual: bool,
                       options: RobustnessOptions, second: Oracle | None = None
                       ) -> dict[str, Any]:
    """The robustness columns of one record (``ROBUSTNESS_COLUMNS``).

    Args:
        oracle: The explained event's oracle.
        explanation: The answer.
        is_counterfactual: Whether it flips (the measures need a counterfactual; otherwise
            every column is null).
        options: The measures' settings.
        second: The same event's oracle under the second checkpoint (None: no model noise).

    Returns:
        ``{column: value}``.
    """
    out: dict[str, Any] = dict.fromkeys(ROBUSTNESS_COLUMNS)
    if not is_counterfactual or not explanation:
        return out
    start = time.perf_counter()
    rng = np.random.default_rng([options.seed, oracle.event_id])
    variants = implementation_variants(explanation, oracle.removable.tolist(),
                                       options.variants, rng)
    out["robust_impl"] = flip_share(oracle.original_logit, oracle.exact_batch(variants))
    out["robust_impl_n"] = len(variants)
    if second is not None:
        p0, p = second.original_logit, second.exact(frozenset(explanation))
        out.update(robust_model=is_flip(p0, p), robust_model_logit0=p0, robust_model_logit=p)
    rule = local_rule(oracle, explanation, options, rng)
    out.update(rule_group=list(rule.group), rule_r=rule.r, rule_prob=rule.prob,
               rule_samples=rule.samples)
    out["robustness_time_s"] = time.perf_counter() - start
    return out


__all__ = [
    "ROBUSTNESS_COLUMNS",
    "LocalRule",
    "RobustnessOptions",
    "flip_share",
    "implementation_variants",
    "local_rule",
    "robustness_columns",
]

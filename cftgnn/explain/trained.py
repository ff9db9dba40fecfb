"""What the trained explainers (the PGExplainer, TempME) share: the card check against the
run's model and stream, loading a checkpoint once per file, and their base class
(``TrainedExplainer``: the constructor, ``supports`` and the guard before scoring)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

from cftgnn.explain.attention import needs_probe
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FactualExplainer, FloatArray
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.oracle import Oracle
from cftgnn.oracle.probe import ModelProbe
from cftgnn.training.checkpoint import CheckpointMismatchError

T = TypeVar("T")

#: The card keys a trained explainer must share with the run: (key, the fingerprint's
#: attribute, what the message calls it).
CARD_CHECKS = (("dataset", "dataset", "dataset"), ("model", "model", "model"),
               ("dataset_sha256", "dataset_sha256", "stream checksum"),
               ("model_weights_sha256", "weights_sha256", "model checkpoint's SHA-256"))


def check_trained_card(card: dict[str, Any], fingerprint: ModelFingerprint, path: str,
                       name: str, train: str) -> None:
    """Refuse a trained explainer of another dataset, stream, model kind or model checkpoint.

    Args:
        card: The checkpoint's card.
        fingerprint: The run's model and stream.
        path: The checkpoint, for the message.
        name: The explainer, for the message (``PGExplainer``).
        train: The command that trains one for this run (its ``python scripts/...``).

    Raises:
        CheckpointMismatchError: One line naming the first difference and how to train one.
    """
    for key, attribute, what in CARD_CHECKS:
        have = getattr(fingerprint, attribute)
        if card.get(key) != have:
            shown = (lambda v: str(v)[:12]) if key.endswith("sha256") else str
            raise CheckpointMismatchError(
                f"{name} checkpoint {path} was trained for {what} {shown(card.get(key))}, "
                f"this run has {shown(have)}; train one with `{train}`")


def load_once(path: Path, load: Callable[[Path], T], cache: dict[tuple[str, int, int], T]) -> T:
    """``load(path)``, kept in ``cache`` (one entry) while the file is unchanged (its
    resolved path, modification time and size): ``explain.py`` builds a fresh explainer per
    event."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in cache:
        cache.clear()
        cache[key] = load(path)
    return cache[key]


class TrainedExplainer(FactualExplainer, Generic[T]):
    """A factual explainer that ranks by a trained checkpoint's scores (no oracle call).

    Args:
        strategy: Unused for the ranking (kept for the common constructor).
        post: The steps after the search.
        trained: A trained checkpoint to use instead of loading ``checkpoint`` (tests,
            training).
        **options: The subclass's ``Params`` (``checkpoint``: ``auto`` or a path).

    A subclass implements ``resolve`` (the checkpoint the options name, checked against the
    run) and ``scores`` (reading ``trained_for``).
    """

    def __init__(self, strategy: Any = None, post: Any = None, trained: T | None = None,
                 **options: Any) -> None:
        super().__init__(strategy, post, **options)
        self.trained = trained

    @abstractmethod
    def resolve(self, fingerprint: ModelFingerprint | None) -> T:
        """The trained checkpoint of the ``checkpoint`` option, checked against
        ``fingerprint`` (None: unchecked)."""

    @abstractmethod
    def scores(self, oracle: Oracle) -> FloatArray:
        """Each removable event's importance, aligned with ``oracle.removable``."""

    def supports(self, fingerprint: ModelFingerprint | None = None,
                 protocols: Iterable[str] = ()) -> None:
        super().supports(fingerprint, protocols)
        if fingerprint is None:
            return
        if not fingerprint.probe:
            raise needs_probe(self.name, fingerprint.model)
        if self.trained is None:
            self.resolve(fingerprint)

    def trained_for(self, oracle: Oracle) -> tuple[T, ModelProbe]:
        """The trained checkpoint that scores ``oracle``'s event, and the oracle's probe.

        Raises:
            ExplainerError: The oracle has no probe.
            ConfigError, CheckpointError, CheckpointMismatchError: See ``resolve``.
        """
        if oracle.probe is None:
            fp = oracle.fingerprint
            raise needs_probe(self.name, None if fp is None else fp.model)
        return self.trained or self.resolve(oracle.fingerprint), oracle.probe

    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        return self.scores(oracle)


__all__ = ["CARD_CHECKS", "TrainedExplainer", "check_trained_card", "load_once"]

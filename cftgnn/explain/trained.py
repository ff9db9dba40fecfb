"""What the trained explainers (the PGExplainer, TempME) share about their checkpoints: the
card check against the run's model and stream, and loading a checkpoint once per file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cftgnn.oracle.fingerprint import ModelFingerprint
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


__all__ = ["CARD_CHECKS", "check_trained_card", "load_once"]

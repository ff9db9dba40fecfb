"""How well a model trained on a planted stream learned its causes:
``python scripts/planted_fit.py CHECKPOINT [CHECKPOINT ...]``.

A model that did not learn the planted rule cannot be explained by it, and the
test AP of its card mixes the events the rule makes (those with a cause) with background
events that no model can predict (noise between random nodes, or a Hawkes process's
immigrants). This scores the test range of each checkpoint's card again, exactly as training
did (``cftgnn.training.loop.evaluate_test``: replay to the end of validation, one random
negative destination per event from the card's ``eval_seed``), and splits the AP and AUC by
whether the event has a planted cause. The stream is generated again from the card's
``train_config.dataset``, so the checkpoint alone names everything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate

from cftgnn.cli import ArgumentParser
from cftgnn.errors import ConfigError


def _card(checkpoint: Path) -> dict[str, Any]:
    """The card next to ``checkpoint``, checked to be one of a planted stream."""
    card_path = checkpoint.with_suffix(".json")
    if not checkpoint.is_file():
        raise ConfigError(f"checkpoint {str(checkpoint)!r} does not exist")
    try:
        card = json.loads(card_path.read_text())
        dataset = card["train_config"]["dataset"]
        split = card["split"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{card_path}: no readable model card with train_config.dataset and "
                          f"split ({type(exc).__name__})") from None
    if not str(dataset.get("_target_", "")).endswith("make_planted_stream"):
        raise ConfigError(f"{checkpoint}: trained on {card['dataset']['name']!r}, not a planted "
                          "stream (dataset=planted): it has no causes to split by")
    return {"dataset": dataset, "split": split, "seed": int(card.get("eval_seed", 2)),
            "ap": float(card["metrics"]["test"]["transductive"]["ap"])}


def planted_fit(checkpoint: str | os.PathLike[str]) -> dict[str, Any]:
    """Test AP and AUC of a checkpoint on its planted stream, split by cause.

    Args:
        checkpoint: A ``.pt`` of ``scripts/train.py`` on ``dataset=planted`` (its ``.json``
            card beside it).

    Returns:
        ``model``, ``stream``, ``card_ap`` (the card's test AP), ``ap``/``auc`` (all test
        events; equal to the card's when the replay is faithful), ``caused_ap``,
        ``caused_auc``, ``caused_n`` (test events with a planted cause) and
        ``background_ap``, ``background_auc``, ``background_n`` (those without).

    Raises:
        ConfigError: No such checkpoint, no card, or a card of another stream.
    """
    from cftgnn.training.checkpoint import load_checkpoint, model_kind
    from cftgnn.training.loop import link_metrics, score_range

    path = Path(checkpoint)
    card = _card(path)
    stream = instantiate(card["dataset"])
    model = load_checkpoint(path, stream)
    lo, hi = int(card["split"]["val_end"]), int(card["split"]["num_events"])
    model.reset()
    model.advance(0, lo)
    pos, neg, _ = score_range(model, lo, hi, card["seed"])
    assert stream.causes is not None
    caused = np.diff(stream.causes.indptr)[lo:hi] > 0
    every, with_cause = link_metrics(pos, neg), link_metrics(pos[caused], neg[caused])
    background = link_metrics(pos[~caused], neg[~caused])
    return {"model": model_kind(type(model).__module__ + "." + type(model).__name__),
            "stream": stream.name, "card_ap": card["ap"], "ap": every["ap"],
            "auc": every["auc"], "caused_ap": with_cause["ap"], "caused_auc": with_cause["auc"],
            "caused_n": with_cause["n"], "background_ap": background["ap"],
            "background_auc": background["auc"], "background_n": background["n"]}


#: Table heading of each ``planted_fit`` key, in order.
HEADINGS = {"model": "model", "stream": "stream", "ap": "test AP", "caused_ap": "AP, caused",
            "caused_auc": "AUC, caused", "caused_n": "caused events",
            "background_ap": "AP, background", "background_n": "background events"}


def fit_table(rows: Sequence[dict[str, Any]]) -> str:
    """``planted_fit`` rows as a markdown table (``HEADINGS``; floats to 3 decimals)."""
    lines = ["| " + " | ".join(HEADINGS.values()) + " |",
             "| " + " | ".join(":---" if k in ("model", "stream") else "---:"
                              for k in HEADINGS) + " |"]
    for row in rows:
        cells = [f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k])
                 for k in HEADINGS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Command line: ``planted_fit.py CHECKPOINT [CHECKPOINT ...]``; prints the table."""
    parser = ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", help="checkpoints (.pt) of planted streams")
    args = parser.parse_args(argv)
    for path in args.checkpoints:  # every card checked before any stream is generated
        _card(Path(path))
    rows = [planted_fit(p) for p in args.checkpoints]
    print(fit_table(rows))
    return rows


__all__ = ["HEADINGS", "fit_table", "main", "planted_fit"]

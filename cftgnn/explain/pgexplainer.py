"""The temporal PGExplainer: an MLP scores each candidate event from embeddings.

PGExplainer (Luo et al., NeurIPS 2020) trains one MLP that maps an edge's embedding to an
importance, instead of optimising a mask per explained instance. The temporal version of the
T-GNNExplainer reference system (``PGExplainerExt``; Xia et al., ICLR 2023) scores candidate
event ``e`` for explained event ``i`` from the concatenation of both events' node embeddings,
edge features and time encodings, with ``Linear(D, 128) → ReLU → Linear(128, 1)``, and trains
it with the MLP's outputs as soft weights on the candidate events inside the model.

Here (docs/design.md §8):

* **input**: the oracle's probe (``features``), one row
  per removable event, ``[z(u_e), z(v_e), z(src_i), z(dst_i), edge_feat(e), time_enc(t_i −
  t_e)]`` (the model's embeddings at ``t_i`` with the full history, so the time of both
  events enters through ``t_i − t_e``), ``float32 [|R|, D]``;
* **MLP** (``EdgeScorer``): the reference's ``D → 128 → 1``;
* **training** (``pg_loss``, run by ``scripts/train_explainer.py``): soft weights
  ``w = sigmoid(score)`` go through the probe's differentiable soft removal
  (``soft_logit``), and the loss keeps the weighted
  history's prediction at the original one: binary cross-entropy of the soft logit towards the
  original predicted label, plus PGExplainer's size regulariser ``size_coef · Σ w`` and its
  mask-entropy regulariser ``entropy_coef · mean H(w)`` (defaults 0.05, Luo et al.'s, and
  0.1: their 1.0 goes with concrete sampling and a temperature schedule; with deterministic
  weights it pushes every weight to 1 before the size term acts, and a planted cause is
  then missed, ``tests/explain/test_pgexplainer.py``).
  The reference's temporal version maximises the signed logit instead and leaves both
  regularisers out; we keep PGExplainer's own objective, since without the size term every
  weight may as well be 1 and the scores would not separate causes. Weights are deterministic
  (no concrete sampling), as in the temporal reference;
* **inference**: importance = the MLP's score (one forward pass; no oracle call), ranked and
  answered as the shortest flipping prefix
  ([``FactualExplainer``][cftgnn.explain.FactualExplainer]).

A trained MLP lives in a checkpoint (``save_scorer``: weights and a card; ``.pt`` loaded
with ``weights_only=True``, the card also as ``.json`` next to it), by default
``<checkpoint_dir>/pgexplainer_<model>_<dataset>.pt`` (``scorer_path``). The card names the
model kind, the dataset, the stream's checksum and the model checkpoint's SHA-256; a run of
another model, stream or model checkpoint is refused (``check_card``), by ``explain.py``
before any event ([``PGExplainer.check_run``][cftgnn.explain.PGExplainer.check_run]).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from cftgnn.errors import ConfigError, ExplainerError
from cftgnn.explain.attention import needs_probe
from cftgnn.explain.budget import BudgetMeter
from cftgnn.explain.factual import FactualExplainer, FloatArray
from cftgnn.explain.pgexplainer_params import PGExplainerParams
from cftgnn.files import atomic_output, atomic_write, file_sha256
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.oracle import Oracle
from cftgnn.training.checkpoint import CheckpointError, CheckpointMismatchError

#: The reference's hidden width (``PGExplainerExt``: ``Linear(D, 128)``).
HIDDEN = 128
#: What ``train_explainer.py`` trains; the checkpoint file's prefix.
KIND = "pgexplainer"


class EdgeScorer(nn.Module):
    """PGExplainer's MLP: ``Linear(D, hidden) → ReLU → Linear(hidden, 1)``.

    Args:
        input_dim: ``D``, the probe's feature width.
        hidden: Hidden width.
    """

    def __init__(self, input_dim: int, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.input_dim = int(input_dim)
        self.hidden = int(hidden)
        self.net = nn.Sequential(nn.Linear(self.input_dim, self.hidden), nn.ReLU(),
                                 nn.Linear(self.hidden, 1))

    def forward(self, features: Tensor) -> Tensor:
        """Scores ``float32 [m]`` of feature rows ``float32 [m, D]`` (larger = more
        important)."""
        out: Tensor = self.net(features).squeeze(-1)
        return out


def pg_loss(logit: Tensor, label: float, weights: Tensor, size_coef: float,
            entropy_coef: float) -> Tensor:
    """PGExplainer's loss of one explained event (Luo et al. 2020, eq. 9 with the size and
    entropy regularisers of their code).

    ``BCE(logit, label) + size_coef · Σ w + entropy_coef · mean(−w log w − (1 − w) log(1 − w))``.

    Args:
        logit: The soft-removal logit with ``weights`` on the removable events, ``[]``.
        label: The original prediction, 1.0 (positive logit) or 0.0.
        weights: The soft weights ``sigmoid(score)``, ``[m]``.
        size_coef: Weight of the size term.
        entropy_coef: Weight of the entropy term.

    Returns:
        The loss, ``[]``.
    """
    target = torch.full_like(logit, float(label))
    fit = nn.functional.binary_cross_entropy_with_logits(logit, target)
    w = weights.clamp(1e-6, 1 - 1e-6)
    entropy = -(w * torch.log(w) + (1 - w) * torch.log(1 - w))
    return fit + size_coef * weights.sum() + entropy_coef * entropy.mean()


def scorer_path(directory: str | os.PathLike[str], model: str, dataset: str) -> Path:
    """``<directory>/pgexplainer_<model>_<dataset>.pt``: where ``train_explainer.py`` writes a
    trained PGExplainer and ``checkpoint=auto`` looks for it."""
    return Path(directory) / f"{KIND}_{model}_{dataset}.pt"


@dataclass(frozen=True)
class TrainedScorer:
    """A trained PGExplainer MLP and its card (training events, epochs, time, checksums)."""

    mlp: EdgeScorer
    card: dict[str, Any]
    path: str = ""


def card_of(fingerprint: ModelFingerprint, **training: Any) -> dict[str, Any]:
    """The identity part of a card (what ``check_card`` compares), plus ``training``."""
    return {"explainer": KIND, "dataset": fingerprint.dataset,
            "dataset_sha256": fingerprint.dataset_sha256, "model": fingerprint.model,
            "model_weights": Path(fingerprint.weights).name,
            "model_weights_sha256": fingerprint.weights_sha256, **training}


def save_scorer(path: str | os.PathLike[str], mlp: EdgeScorer, card: dict[str, Any]
                ) -> tuple[Path, Path]:
    """Write ``path`` (``.pt``: the MLP's weights, its shape and the card) and the card as
    ``.json`` next to it (with the ``.pt``'s SHA-256); returns both paths."""
    pt = Path(path)
    pt.parent.mkdir(parents=True, exist_ok=True)
    blob = {"state_dict": {k: v.detach().cpu() for k, v in mlp.state_dict().items()},
            "input_dim": mlp.input_dim, "hidden": mlp.hidden, "card": card}
    with atomic_output(pt) as f:  # complete or absent, also on a full disk
        torch.save(blob, f)
    js = pt.with_suffix(".json")
    atomic_write(js, (json.dumps({**card, "weights_sha256": file_sha256(pt)}, indent=2)
                      + "\n").encode())
    return pt, js


def load_scorer(path: str | os.PathLike[str]) -> TrainedScorer:
    """Load a trained PGExplainer (``torch.load(..., weights_only=True)``: a pickle's code is
    never run, and no other way of loading is offered).

    Raises:
        CheckpointError: When the file does not load as one (one line, naming it).
    """
    file = Path(path)
    not_one = f"{file} is not a PGExplainer checkpoint of this project"
    try:
        with warnings.catch_warnings():  # torch's notes on loading are no news here
            warnings.simplefilter("ignore")
            blob = torch.load(file, map_location="cpu", weights_only=True)
        mlp = EdgeScorer(int(blob["input_dim"]), int(blob["hidden"]))
        mlp.load_state_dict(blob["state_dict"])
        card = dict(blob["card"])
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL (\S+)", str(err))
        why = (f"it holds a pickled Python object ({found.group(1)}), which safe "
               "weights-only loading refuses; nothing in it was run" if found
               else "not a torch file, or cut short")
        raise CheckpointError(f"{not_one} ({why}); train one with "
                              "scripts/train_explainer.py") from None
    except (OSError, RuntimeError, KeyError, TypeError, ValueError, EOFError,
            AttributeError, IndexError, zipfile.BadZipFile) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise CheckpointError(f"{not_one} ({type(err).__name__}: {reason}); train one with "
                              "scripts/train_explainer.py") from None
    mlp.eval()
    return TrainedScorer(mlp, card, str(file))


def check_card(card: dict[str, Any], fingerprint: ModelFingerprint, path: str) -> None:
    """Refuse a trained PGExplainer of another dataset, stream, model kind or model checkpoint.

    Raises:
        CheckpointMismatchError: One line naming the first difference and how to train one.
    """
    train = (f"train one with `python scripts/train_explainer.py model={fingerprint.model} "
             f"dataset={fingerprint.dataset}`")
    for key, have, what in (("dataset", fingerprint.dataset, "dataset"),
                            ("model", fingerprint.model, "model"),
                            ("dataset_sha256", fingerprint.dataset_sha256, "stream checksum"),
                            ("model_weights_sha256", fingerprint.weights_sha256,
                             "model checkpoint's SHA-256")):
        if card.get(key) != have:
            shown = (lambda v: str(v)[:12]) if key.endswith("sha256") else str
            raise CheckpointMismatchError(
                f"PGExplainer checkpoint {path} was trained for {what} "
                f"{shown(card.get(key))}, this run has {shown(have)}; {train}")


def missing_scorer(checkpoint: str, path: Path, fingerprint: ModelFingerprint | None) -> str:
    """The one line for a PGExplainer checkpoint ``path`` that does not exist: the file, and
    the command that trains one for the run's model and dataset (``checkpoint=auto``: into
    the folder ``auto`` reads; a named file: the command, then that file named again)."""
    if fingerprint is None:
        return (f"no trained PGExplainer at {path} (no such file); train one with "
                "`python scripts/train_explainer.py model=<model> dataset=<dataset>` and pass "
                "the pgexplainer_<model>_<dataset>.pt it writes")
    kind, data = fingerprint.model, fingerprint.dataset
    train = f"python scripts/train_explainer.py model={kind} dataset={data}"
    if checkpoint == "auto":
        return (f"no trained PGExplainer at {path} (checkpoint=auto); train one with "
                f"`{train} out_dir={path.parent}`")
    return (f"no trained PGExplainer at {path} (checkpoint={checkpoint}: no such file); "
            f"train one with `{train}` and pass the {scorer_path('', kind, data)} it writes "
            "(its run directory, or out_dir=<folder>) as checkpoint=<that file>, or use "
            "checkpoint=auto")


_LOADED: dict[tuple[str, int, int], TrainedScorer] = {}


def resolve_scorer(checkpoint: str, fingerprint: ModelFingerprint | None) -> TrainedScorer:
    """The trained MLP that ``checkpoint`` names, checked against ``fingerprint``.

    Args:
        checkpoint: ``auto`` (``scorer_path`` in the fingerprint's checkpoint folder) or
            a path.
        fingerprint: The run's model and stream (None: a path is loaded unchecked; ``auto``
            is refused).

    Raises:
        ConfigError: ``auto`` without a fingerprint, or no file (saying how to train one).
        CheckpointError: A file that is not such a checkpoint.
        CheckpointMismatchError: A checkpoint of another model or stream.
    """
    if checkpoint == "auto":
        if fingerprint is None:
            raise ConfigError("pgexplainer checkpoint=auto needs the run's model and dataset "
                              "(the oracle has no fingerprint); pass checkpoint=<path>")
        path = scorer_path(fingerprint.checkpoint_dir, fingerprint.model, fingerprint.dataset)
    else:
        path = Path(checkpoint)
    if not path.is_file():
        raise ConfigError(missing_scorer(checkpoint, path, fingerprint))
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _LOADED:  # explain.py builds a fresh explainer per event
        _LOADED.clear()
        _LOADED[key] = load_scorer(path)
    scorer = _LOADED[key]
    if fingerprint is not None:
        check_card(scorer.card, fingerprint, str(path))
    return scorer


class PGExplainer(FactualExplainer):
    """Ranks each removable event by a trained MLP's score of its features.

    Args:
        strategy: Unused for the ranking (kept for the common constructor).
        post: The steps after the search.
        scorer: A trained MLP to use instead of loading ``checkpoint`` (tests, training).
        **options: [``PGExplainerParams``][cftgnn.explain.PGExplainerParams].
    """

    name = "pgexplainer"
    Params = PGExplainerParams
    params: PGExplainerParams

    def __init__(self, strategy: Any = None, post: Any = None,
                 scorer: TrainedScorer | None = None, **options: Any) -> None:
        super().__init__(strategy, post, **options)
        self.scorer = scorer

    def check_run(self, fingerprint: ModelFingerprint) -> None:
        if not fingerprint.probe:
            raise needs_probe(self.name, fingerprint.model)
        if self.scorer is None:
            resolve_scorer(self.params.checkpoint, fingerprint)

    def scores(self, oracle: Oracle) -> FloatArray:
        """The MLP's score of each removable event, aligned with ``oracle.removable``
        (T-GNNExplainer's navigator reads these).

        Raises:
            ExplainerError: The oracle has no probe, or the MLP expects other features.
            ConfigError, CheckpointError, CheckpointMismatchError: See
                ``resolve_scorer``.
        """
        if oracle.probe is None:
            fp = oracle.fingerprint
            raise needs_probe(self.name, None if fp is None else fp.model)
        scorer = self.scorer or resolve_scorer(self.params.checkpoint, oracle.fingerprint)
        feats = oracle.probe.features()
        if feats.shape[1] != scorer.mlp.input_dim:
            raise ExplainerError(f"the PGExplainer at {scorer.path or '(given)'} reads "
                                 f"{scorer.mlp.input_dim} features, the model gives "
                                 f"{feats.shape[1]}")
        with torch.no_grad():
            out = scorer.mlp(feats.to("cpu"))
        return np.asarray(out.numpy(), dtype=np.float64).reshape(-1)

    def _score(self, oracle: Oracle, budget: BudgetMeter) -> FloatArray:
        return self.scores(oracle)


__all__ = ["HIDDEN", "EdgeScorer", "PGExplainer", "PGExplainerParams", "TrainedScorer",
           "card_of", "check_card", "load_scorer", "missing_scorer", "pg_loss", "resolve_scorer",
           "save_scorer", "scorer_path"]

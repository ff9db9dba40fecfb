"""The temporal PGExplainer: an MLP scores each candidate event from its features.

PGExplainer (Luo et al., NeurIPS 2020) trains one MLP that maps an edge's features to an
importance, instead of optimising a mask per explained instance. Its temporal version in the
T-GNNExplainer reference system (``PGExplainerExt`` of ``other_baselines_tg.py``; Xia et al.,
ICLR 2023; also CoDy's ``TPGExplainer``) is what this module reproduces (docs/design.md §8,
docs/explainers/pgexplainer.md):

* **input**, two kinds (``features_of``). ``features="reference"``
  (``reference_features``): per candidate ``e`` of explained event ``i``,
  ``[time_enc(t_i), edge_feat(i), time_enc(t_e), edge_feat(e)]``, the model's own time
  encoding of the *absolute* timestamps and the stream's edge features of both events,
  ``D = 2·(T + F)``; the reference also puts the node inputs of both events' endpoints first,
  which are zero in our TGN and TGAT (an MLP cannot read them), so they are left out.
  ``features="probe"``, the default of ``train_explainer.py``: the model's embeddings of the
  four endpoints at ``t_i``, e's edge features and the time encoding of ``t_i − t_e``
  (``ModelProbe.features``). On the feature-less UCI and Wikipedia files the reference's input
  is two absolute timestamps, and it ranks below a random ranking
  (docs/explainers/pgexplainer.md measures both);
* **MLP** (``EdgeScorer``): the reference's ``D → 128 → 1``;
* **objective** (``fidelity_loss``): minus the fidelity of the signed logit,
  ``−(ŷ_w − ŷ)`` for a positive original logit ``ŷ`` and ``−(ŷ − ŷ_w)`` otherwise, where
  ``ŷ_w`` is the logit with the candidates softly weighted by the MLP. The reference code
  computes a size term (``reg_coefs``) and never adds it to the loss; its entropy term is
  commented out: no regulariser is applied, here neither. The reference adds the raw score
  ``s`` to the attention logits; our soft removal multiplies each slot's attention by a weight
  in ``[0, 1]`` (``ModelProbe.soft_logit``), and the weight is ``sigmoid(s)``, i.e. the
  attention logits get ``log sigmoid(s)``: the reference's ``s`` where ``s ≪ 0``, and no
  up-weighting beyond the unweighted model where ``s ≫ 0``. Weights are deterministic (no
  concrete sampling), as in the reference;
* **training** (``scripts/train_explainer.py``): fresh training-split events every epoch
  (the reference: 1,000 per epoch, 30–100 epochs, Adam at 1e-4, 16 events per step), and,
  unlike the reference (which keeps its last epoch), the epoch with the best AUFSC (kept) on
  validation-split events is the one saved;
* **inference**: importance = the MLP's score (one forward pass; no oracle call), ranked and
  answered as the shortest flipping prefix
  ([``FactualExplainer``][cftgnn.explain.FactualExplainer]).

A trained MLP lives in a checkpoint (``save_scorer``: weights, the feature kind, the format
version ``FORMAT`` and a card; ``.pt`` loaded with ``weights_only=True``, the card also as
``.json`` next to it), by default ``<checkpoint_dir>/pgexplainer_<model>_<dataset>.pt``
(``scorer_path``). A checkpoint of an earlier format (before ``FORMAT`` 2: another objective
and input) is refused in one line that says how to retrain it. The card names the model kind,
the dataset, the stream's checksum and the model checkpoint's SHA-256; a run of another model,
stream or model checkpoint is refused (``check_card``), by ``explain.py`` before any event
([``PGExplainer.supports``][cftgnn.explain.PGExplainer.supports]).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from cftgnn.errors import ConfigError, ExplainerError, short_reason
from cftgnn.explain.factual import FloatArray
from cftgnn.explain.pgexplainer_params import PGExplainerParams
from cftgnn.explain.trained import TrainedExplainer, check_trained_card, load_once
from cftgnn.files import atomic_output, atomic_write
from cftgnn.oracle.fingerprint import ModelFingerprint
from cftgnn.oracle.oracle import Oracle
from cftgnn.training.kinds import PGEXPLAINER, CheckpointError, read_checkpoint, tensors_sha256

#: The reference's hidden width (``PGExplainerExt``: ``Linear(D, 128)``).
HIDDEN = 128
#: What ``train_explainer.py`` trains; the checkpoint file's prefix.
KIND = "pgexplainer"
#: The checkpoint format this version writes and reads. 1 (no ``format`` key): BCE to the
#: predicted label with size and entropy terms, on the model's embeddings (before 2026-11-26).
FORMAT = 2
#: The MLP's inputs: the reference's (``reference_features``) or the probe's embeddings.
FEATURES = ("reference", "probe")


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


def fidelity_loss(masked_logit: Tensor, original_logit: float) -> Tensor:
    """The reference's loss of one explained event: minus the fidelity of the signed logit.

    ``−(ŷ_w − ŷ)`` when ``ŷ > 0``, else ``−(ŷ − ŷ_w)`` (``PGExplainerExt._loss`` and CoDy's
    ``TPGExplainer._loss``; the reference computes a size term there and does not add it, so
    there is no regulariser). Minimising it pushes the weighted prediction further to the
    original side: weights stay on the events that support the prediction and drop on those
    that oppose it.

    Args:
        masked_logit: The soft-removal logit ``ŷ_w`` with the MLP's weights, ``[]``.
        original_logit: The original logit ``ŷ`` (a constant).

    Returns:
        The loss, ``[]``.
    """
    original = float(original_logit)
    if original > 0:
        return -(masked_logit - original)
    return -(original - masked_logit)


def reference_features(probe: Any) -> Tensor:
    """The reference's input rows for ``probe``'s removable events ``R``.

    ``[time_enc(t_i), edge_feat(i), time_enc(t_e), edge_feat(e)]`` per event ``e`` of ``R``
    (``_create_explainer_input`` of the reference, without its node inputs, which are zero in
    our models): the model's time encoding (``encode_time``) of the absolute timestamps, as
    the reference's ``time_encoder(t)``, and the stream's edge features. It needs no replay: the
    rows depend only on the stream and the model's time encoder.

    Args:
        probe: A [``ModelProbe``][cftgnn.oracle.probe.ModelProbe] (its ``model``,
            ``event_id`` and ``removable``).

    Returns:
        ``float32 [|R|, 2·(T + F)]``, detached.
    """
    model = probe.model
    stream = model.stream
    ev = np.asarray(probe.removable, dtype=np.int64)
    rows = np.concatenate([[int(probe.event_id)], ev])
    dev = model.device
    with torch.no_grad():
        times = torch.as_tensor(np.asarray(stream.t[rows], dtype=np.float64), device=dev)
        enc = model.encode_time(times)  # [m + 1, T]
        feat = torch.as_tensor(np.asarray(stream.edge_feat[rows], dtype=np.float32),
                               device=dev)  # [m + 1, F]
        each = torch.cat([enc.float(), feat], dim=1)
        out = torch.cat([each[:1].expand(len(ev), -1), each[1:]], dim=1)
    return out.detach().float().cpu()


def features_of(probe: Any, kind: str) -> Tensor:
    """The MLP's input rows of ``probe``'s removable events: ``reference_features`` or the
    probe's own ``features()`` (``kind="probe"``).

    Raises:
        ExplainerError: An unknown ``kind``.
    """
    if kind == "reference":
        return reference_features(probe)
    if kind == "probe":
        return probe.features().detach().float().cpu()
    raise ExplainerError(f"unknown PGExplainer features {kind!r}; one of {', '.join(FEATURES)}")


def scorer_path(directory: str | os.PathLike[str], model: str, dataset: str) -> Path:
    """``<directory>/pgexplainer_<model>_<dataset>.pt``: where ``train_explainer.py`` writes a
    trained PGExplainer and ``checkpoint=auto`` looks for it."""
    return Path(directory) / f"{KIND}_{model}_{dataset}.pt"


@dataclass(frozen=True)
class TrainedScorer:
    """A trained PGExplainer MLP, its card (training events, epochs, time, checksums) and
    the kind of input it reads (``FEATURES``)."""

    mlp: EdgeScorer
    card: dict[str, Any]
    path: str = ""
    features: str = "probe"


def card_of(fingerprint: ModelFingerprint, **training: Any) -> dict[str, Any]:
    """The identity part of a card (what ``check_card`` compares), plus ``training``."""
    return {"explainer": KIND, "dataset": fingerprint.dataset,
            "dataset_sha256": fingerprint.dataset_sha256, "model": fingerprint.model,
            "model_weights": Path(fingerprint.weights).name,
            "model_weights_sha256": fingerprint.weights_sha256, **training}


def save_scorer(path: str | os.PathLike[str], mlp: EdgeScorer, card: dict[str, Any],
                features: str = "probe") -> tuple[Path, Path]:
    """Write ``path`` (``.pt``: the MLP's weights, its shape, its input kind, ``FORMAT`` and
    the card) and the card as ``.json`` next to it (with the SHA-256 of the MLP's tensors,
    ``tensors_sha256``, and the format); returns both paths."""
    pt = Path(path)
    pt.parent.mkdir(parents=True, exist_ok=True)
    card = {**card, "format": FORMAT, "features": features}
    tensors = {k: v.detach().cpu() for k, v in mlp.state_dict().items()}
    blob = {"state_dict": tensors,
            "input_dim": mlp.input_dim, "hidden": mlp.hidden, "card": card,
            "format": FORMAT, "features": features}
    with atomic_output(pt) as f:  # complete or absent, also on a full disk
        torch.save(blob, f)
    js = pt.with_suffix(".json")
    atomic_write(js, (json.dumps({**card, "weights_sha256": tensors_sha256(tensors)}, indent=2)
                      + "\n").encode())
    return pt, js


def old_format(path: str | os.PathLike[str], found: Any, card: Any) -> str:
    """The one line for a PGExplainer checkpoint of an earlier format: what it is, and the
    command that retrains it (its model and dataset from its card when it has them)."""
    card = card if isinstance(card, dict) else {}
    model, data = card.get("model", "<model>"), card.get("dataset", "<dataset>")
    version = found if isinstance(found, int) else 1
    return (f"{path} is a PGExplainer checkpoint of format {version}, trained on another "
            f"objective and input (format {FORMAT}: the reference's fidelity loss and "
            "features, since 2026-11-26), which this version does not read; retrain it with "
            f"`python scripts/train_explainer.py model={model} dataset={data}` (add "
            f"out_dir={Path(path).parent} overwrite=true to replace it)")


def load_scorer(path: str | os.PathLike[str]) -> TrainedScorer:
    """Load a trained PGExplainer (``torch.load(..., weights_only=True)``: a pickle's code is
    never run, and no other way of loading is offered).

    Raises:
        CheckpointError: When the file does not read (truncated, not a torch file), is a
            checkpoint of another kind (a TempME, a model: ``CheckpointKindError``, naming
            the option that takes it), or is a PGExplainer of an earlier format than
            ``FORMAT`` (saying how to retrain it); one line naming the file.
    """
    file = Path(path)
    blob = read_checkpoint(file, PGEXPLAINER)
    if blob.get("format") != FORMAT:
        raise CheckpointError(old_format(file, blob.get("format"), blob.get("card")))
    try:
        features = str(blob["features"])
        if features not in FEATURES:
            raise ValueError(f"unknown features {features!r}")
        mlp = EdgeScorer(int(blob["input_dim"]), int(blob["hidden"]))
        mlp.load_state_dict(blob["state_dict"])
        card = dict(blob["card"])
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise CheckpointError(f"PGExplainer checkpoint {file} does not rebuild its MLP "
                              f"({short_reason(err)}); {PGEXPLAINER.writer}") from None
    mlp.eval()
    return TrainedScorer(mlp, card, str(file), features)


def check_card(card: dict[str, Any], fingerprint: ModelFingerprint, path: str) -> None:
    """Refuse a trained PGExplainer of another dataset, stream, model kind or model checkpoint.

    Raises:
        CheckpointMismatchError: One line naming the first difference and how to train one.
    """
    check_trained_card(card, fingerprint, path, "PGExplainer",
                       f"python scripts/train_explainer.py model={fingerprint.model} "
                       f"dataset={fingerprint.dataset}")


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
    scorer = load_once(path, load_scorer, _LOADED)
    if fingerprint is not None:
        check_card(scorer.card, fingerprint, str(path))
    return scorer


class PGExplainer(TrainedExplainer[TrainedScorer]):
    """Ranks each removable event by a trained MLP's score of its features.

    Args:
        strategy: Unused for the ranking (kept for the common constructor).
        post: The steps after the search.
        trained: A trained MLP to use instead of loading ``checkpoint`` (tests, training).
        **options: [``PGExplainerParams``][cftgnn.explain.PGExplainerParams].
    """

    name = "pgexplainer"
    Params = PGExplainerParams
    params: PGExplainerParams

    def resolve(self, fingerprint: ModelFingerprint | None) -> TrainedScorer:
        return resolve_scorer(self.params.checkpoint, fingerprint)

    def scores(self, oracle: Oracle) -> FloatArray:
        """The MLP's score of each removable event, aligned with ``oracle.removable``
        (T-GNNExplainer's navigator reads these).

        Raises:
            ExplainerError: The oracle has no probe, or the MLP expects other features.
            ConfigError, CheckpointError, CheckpointMismatchError: See
                ``resolve_scorer``.
        """
        scorer, probe = self.trained_for(oracle)
        feats = features_of(probe, scorer.features)
        if feats.shape[1] != scorer.mlp.input_dim:
            raise ExplainerError(f"the PGExplainer at {scorer.path or '(given)'} reads "
                                 f"{scorer.mlp.input_dim} features, the model gives "
                                 f"{feats.shape[1]}")
        with torch.no_grad():
            out = scorer.mlp(feats.to("cpu"))
        return np.asarray(out.numpy(), dtype=np.float64).reshape(-1)


__all__ = ["FEATURES", "FORMAT", "HIDDEN", "EdgeScorer", "PGExplainer", "PGExplainerParams",
           "TrainedScorer", "card_of", "check_card", "features_of", "fidelity_loss",
           "load_scorer", "missing_scorer", "old_format", "reference_features", "resolve_scorer",
           "save_scorer", "scorer_path"]

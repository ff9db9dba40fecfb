"""Checkpoint I/O: ``<model>_<dataset>.pt`` (weights + config) and a ``.json`` model card.

The ``.pt`` file holds only tensors, strings and numbers, so it loads with
``torch.load(..., weights_only=True)``. Loading checks that the stream is the one the model was
trained for (dataset name, node count, edge feature size) and, when asked, that the model is of
the expected kind, and refuses otherwise. The card records the SHA-256 of the checkpoint's
tensors (``weights_sha256``, ``cftgnn.training.kinds.tensors_sha256``: names, dtypes, shapes
and values, not the file's bytes), so a card that no longer describes its weights can be told
(``card_mismatch``) and two trainings to the same weights have the same one. A file that does
not load as a model checkpoint (truncated, random bytes, a pickle holding code: ``weights_only``
loading never runs it, a trained explainer's checkpoint) is refused with one line naming the
file, what it is and the option that takes it (``cftgnn.training.kinds.read_checkpoint``).

Checkpoint files are named after the model kind, the ``model=`` option that builds the model
(``model_kind``: ``pyg_tgn`` for ``PyGTGN``): ``<kind>_<dataset><suffix>.pt``
(``checkpoint_path``), by ``train.py`` and ``checkpoint=auto`` alike.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf
from torch import nn

from cftgnn.data.stream import EventStream
from cftgnn.errors import CftgnnError, ConfigError
from cftgnn.files import atomic_output, atomic_write, file_sha256
from cftgnn.models.base import TemporalModel
from cftgnn.models.protocol import offers_soft_removal
from cftgnn.models.pyg_tgn import PyGTGN
from cftgnn.training.kinds import (
    MODEL,
    CheckpointError,
    CheckpointKindError,
    CheckpointMismatchError,
    read_checkpoint,
    tensors_sha256,
)

if TYPE_CHECKING:
    from torch_geometric.nn import TGNMemory


def stream_checksum(stream: EventStream) -> str:
    """SHA-256 over the stream's event arrays (src, dst, t, edge features) and node count."""
    h = hashlib.sha256()
    for arr in (stream.src, stream.dst, stream.t, stream.edge_feat):
        h.update(np.ascontiguousarray(arr).tobytes())
    h.update(str(stream.num_nodes).encode())
    return h.hexdigest()


def stream_fingerprint(stream: EventStream) -> dict[str, Any]:
    """What a checkpoint records about its training stream."""
    return {
        "name": stream.name,
        "num_nodes": stream.num_nodes,
        "num_events": stream.num_events,
        "feat_dim": stream.feat_dim,
        "sha256": stream_checksum(stream),
        "source_sha256": str(stream.meta.get("sha256", "")),
    }


def checkpoint_path(directory: str | os.PathLike[str], kind: str, dataset: str,
                    suffix: str = "") -> Path:
    """``<directory>/<kind>_<dataset><suffix>.pt``: where ``train.py`` writes a checkpoint and
    ``checkpoint=auto`` looks for it (``kind``: ``model_kind``, e.g. ``pyg_tgn``;
    ``suffix``: e.g. ``_seed1``)."""
    return Path(directory) / f"{kind}_{dataset}{suffix}.pt"


def legacy_checkpoint_path(directory: str | os.PathLike[str], target: str, dataset: str,
                           suffix: str = "") -> Path | None:
    """The file name an older ``checkpoint=auto`` looked for (the class name in lower case,
    ``pygtgn_uci.pt``), None where it is the same as ``checkpoint_path``'s."""
    old = _class_name(target).lower()
    if old == model_kind(target):
        return None
    return checkpoint_path(directory, old, dataset, suffix)


def save_checkpoint(model: TemporalModel, stream: EventStream, path: str | os.PathLike[str],
                    card: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Write the weights (``path``) and the model card (same name, ``.json``).

    The card holds the model config, the stream fingerprint, the SHA-256 of the saved
    tensors (``weights_sha256``: ``tensors_sha256``) and ``card``'s entries. Existing files
    are replaced; callers decide whether that is allowed (``cftgnn.training.loop`` refuses without
    ``overwrite=true``).

    Args:
        model: The trained model.
        stream: Its training stream.
        path: Destination ``.pt`` path (folders are created).
        card: Extra card entries (split, metrics, epochs, timing, ...).

    Returns:
        The ``.pt`` and ``.json`` paths.
    """
    pt = Path(path)
    pt.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = stream_fingerprint(stream)
    state_dict = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    with atomic_output(pt) as f:  # complete or absent, also on a full disk
        torch.save({"state_dict": state_dict, "config": model.config(), "dataset": fingerprint},
                   f)
    full_card = {"model": model.config(), "dataset": fingerprint,
                 "weights_sha256": tensors_sha256(state_dict), **(card or {})}
    js = pt.with_suffix(".json")
    atomic_write(js, (json.dumps(full_card, indent=2, sort_keys=False, default=str)
                      + "\n").encode())
    return pt, js


#: The ``model=`` options (``conf/model/*.yaml``), for naming a kind in messages.
MODEL_CONF = Path(__file__).resolve().parents[2] / "conf" / "model"


def model_kind(target: str, config: Any = None) -> str:
    """The kind of model a ``_target_`` names: the ``model=`` option whose config file has
    that class (``pyg_tgn`` for ``PyGTGN``), else its class name in lower case (``tgn``).

    Where several options build the class (``tgn`` and ``tgn2l``: TGN with 1 or 2 layers),
    the one ``config`` (a model config, or a checkpoint's hyperparameters) picks
    (``option_of``); the first by name (``tgn``) when it picks none.
    """
    options = _options(target)
    if not options:
        return _class_name(target).lower()
    return option_of(target, config) or options[0][0]


def option_of(target: str, config: Any) -> str | None:
    """The ``model=`` option of ``target``'s class whose values ``config`` has for the
    options those files set differently (``num_layers``: ``tgn`` or ``tgn2l``); None where
    ``config`` is None or has none's (a config without ``num_layers``). The class's only
    option where one file builds it."""
    options = _options(target)
    if len(options) == 1 or config is None:
        return options[0][0] if len(options) == 1 else None
    keys = {k for _, o in options for k in o
            if k != "_target_" and len({repr(p.get(k)) for _, p in options}) > 1}
    for stem, values in options:
        if all(config.get(k) == values.get(k) for k in keys):
            return stem
    return None


def _options(target: str) -> list[tuple[str, dict[Any, Any]]]:
    """The ``model=`` options (name, values) whose files build ``target``'s class."""
    options: list[tuple[str, dict[Any, Any]]] = []
    for option in sorted(MODEL_CONF.glob("*.yaml")):
        try:
            loaded = OmegaConf.to_container(OmegaConf.load(option), resolve=False)
        except Exception:  # noqa: BLE001  (an unreadable file names nothing)
            continue
        if not isinstance(loaded, dict):
            continue
        other = str(loaded.get("_target_", ""))
        if other and _class_name(other) == _class_name(target):
            options.append((option.stem, loaded))
    return options


def probed_model_kinds() -> list[str]:
    """The ``model=`` options (files of ``conf/model``) whose class the oracle gives a probe
    (``SoftRemovalModel``: soft removal and attention or pooling scores), sorted: what the
    explainers reading the probe need (``cftgnn.explain.attention.needs_probe``)."""
    kinds = []
    for option in sorted(MODEL_CONF.glob("*.yaml")):
        try:
            cls = get_class(str(OmegaConf.select(OmegaConf.load(option), "_target_")))
        except Exception:  # noqa: BLE001  (an unreadable file or a bad _target_ names nothing)
            continue
        if offers_soft_removal(cls):
            kinds.append(option.stem)
    return kinds


def probed_models_text() -> str:
    """``probed_model_kinds`` as a user types them, for messages: ``model=dygformer,
    model=graphmixer, model=tgat or model=tgn`` (empty when there is none)."""
    kinds = [f"model={k}" for k in probed_model_kinds()]
    return " or ".join([", ".join(kinds[:-1]), kinds[-1]] if len(kinds) > 1 else kinds)


def _class_name(target: str) -> str:
    return target.rsplit(".", 1)[-1]


def _same_class(a: str, b: str) -> bool:
    """Whether two ``_target_`` paths name one class (``cftgnn.models.TGN`` is
    ``cftgnn.models.tgn.TGN``); by class name when either does not import."""
    try:
        return get_class(a) is get_class(b)
    except Exception:  # noqa: BLE001  (hydra raises a bare Exception for a bad path)
        return _class_name(a) == _class_name(b)


def check_model_kind(path: str | os.PathLike[str], have: str, want: str) -> None:
    """Refuse a checkpoint whose model class ``have`` is not the configured ``want``.

    Raises:
        CheckpointMismatchError: Naming both kinds and the two ways out.
    """
    if not _same_class(have, want):
        raise CheckpointMismatchError(
            f"checkpoint {str(path)!r} holds a {model_kind(have)} model but "
            f"model={model_kind(want)}; use model={model_kind(have)} or a "
            f"{model_kind(want)} checkpoint")


def load_checkpoint(path: str | os.PathLike[str], stream: EventStream,
                    device: torch.device | str = "cpu", attach: bool = True,
                    expect_target: str | None = None,
                    check_checksum: bool = False) -> TemporalModel:
    """Rebuild a model from a checkpoint for ``stream`` (attached and in eval mode).

    Args:
        path: The ``.pt`` file.
        stream: The stream the model runs on.
        device: Torch device of the model.
        attach: Attach the model to ``stream``.
        expect_target: The configured model's ``_target_``; when given, a checkpoint of
            another model class is refused.
        check_checksum: Also compare the stream's checksum (``stream_checksum``) with
            the one the checkpoint recorded (the scripts do; a prefix of the training
            stream, which tests and notebooks use, has another). A stream of another name
            whose checksum matches (the same file renamed) is then accepted.

    Raises:
        CheckpointError: If the file does not read (truncated, not a torch file).
        CheckpointMismatchError: If the file is not a model checkpoint (a trained explainer's,
            the state dicts of PyG modules: ``CheckpointKindError``), if the checkpoint holds
            another model class than ``expect_target``, or if its dataset name, node count or
            edge feature size differs from the stream's; the message names both.
    """
    ckpt = read_checkpoint(path, MODEL)
    if not (isinstance(ckpt["config"], dict) and "_target_" in ckpt["config"]
            and isinstance(ckpt["dataset"], dict)
            and {"name", "num_nodes", "feat_dim"} <= ckpt["dataset"].keys()):
        raise CheckpointKindError(
            f"{path} is not a cftgnn checkpoint (its config or dataset entry is not a model "
            "checkpoint's); write a TGN trained with PyG's modules with "
            "cftgnn.training.checkpoint.save_pyg_tgn")
    if expect_target is not None:
        check_model_kind(path, str(ckpt["config"]["_target_"]), expect_target)
    check_stream(path, ckpt["dataset"], stream, check_checksum)
    try:
        model: TemporalModel = instantiate(dict(ckpt["config"]))
        model.load_state_dict(ckpt["state_dict"])
    except Exception as exc:  # noqa: BLE001  (any failure to rebuild: one line naming the file)
        if isinstance(exc, CftgnnError):
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"checkpoint {str(path)!r} does not rebuild its model "
                              f"({reason[:300]})") from None
    model.to(device).eval()
    if attach:
        model.attach(stream)
    return model


def check_stream(path: str | os.PathLike[str], ds: dict[str, Any], stream: EventStream,
                 check_checksum: bool = False) -> None:
    """Refuse a stream that is not the one a checkpoint (its dataset entry ``ds``) was
    trained on: another name, node count or feature size, or (``check_checksum``) other
    events. With ``check_checksum``, a stream of another name with the recorded checksum
    (the training file renamed) is accepted.

    Raises:
        CheckpointMismatchError: Naming both and the fix.
    """
    recorded = str(ds.get("sha256") or "")
    checksum = stream_checksum(stream) if check_checksum and recorded else None
    have = {"name": stream.name, "num_nodes": stream.num_nodes, "feat_dim": stream.feat_dim}
    diffs = [f"{k}: checkpoint {ds[k]!r} vs stream {v!r}" for k, v in have.items() if ds[k] != v]
    if diffs and checksum == recorded:
        return  # the same events under another name
    if diffs:
        hint = ""
        if checksum is None and diffs[0].startswith("name:") and len(diffs) == 1:
            hint = (f"; if it is the same data under another file name, say "
                    f"dataset.name={ds['name']}")
        raise CheckpointMismatchError(
            f"checkpoint {str(path)!r} was trained on dataset {ds['name']!r} "
            f"({ds['num_nodes']} nodes, {ds['feat_dim']} features) but the stream is "
            f"{stream.name!r} ({stream.num_nodes} nodes, {stream.feat_dim} features): "
            + "; ".join(diffs) + hint)
    if checksum is not None and checksum != recorded:
        raise CheckpointMismatchError(
            f"checkpoint {str(path)!r} was trained on a stream {ds['name']!r} of checksum "
            f"{recorded[:12]}…, but this stream {stream.name!r} has checksum {checksum[:12]}… "
            "(same name, nodes and features, other events); explain with the stream it was "
            "trained on, or write the checkpoint again for this one (scripts/train.py, or "
            "save_pyg_tgn with this stream)")


def card_mismatch(path: str | os.PathLike[str]) -> str | None:
    """A one-line warning when a checkpoint's tensors differ from the checksum its card records
    (``weights_sha256``: ``tensors_sha256``; a card written before 2026-12-01 recorded the
    file's SHA-256, which is accepted too).

    Args:
        path: The ``.pt`` file; its card is the ``.json`` of the same name.

    Returns:
        The warning, or None when the checksums agree or there is no card or no recorded
        checksum to compare with.
    """
    pt = Path(path)
    card_path = pt.with_suffix(".json")
    if not (pt.is_file() and card_path.is_file()):
        return None
    try:
        recorded = json.loads(card_path.read_text()).get("weights_sha256")
    except (json.JSONDecodeError, AttributeError):
        return f"{card_path} is not a readable model card; its metrics may not describe {pt}"
    if not recorded:
        return None
    try:
        tensors = read_checkpoint(pt, MODEL)["state_dict"]
    except CheckpointError:  # the loader says what is wrong with the file
        return None
    if recorded in (tensors_sha256(tensors), file_sha256(pt)):
        return None
    return (f"{pt} does not match the checksum its card {card_path.name} records: the card's "
            "metrics and training settings describe other weights")


def save_pyg_tgn(path: str | os.PathLike[str], memory: TGNMemory, gnn: nn.Module,
                 link_pred: nn.Module, stream: EventStream, num_neighbors: int = 10,
                 batch_size: int = 200, card: dict[str, Any] | None = None
                 ) -> tuple[Path, Path]:
    """Write a TGN trained with PyG's modules as a cftgnn checkpoint for ``stream``.

    ``python scripts/explain.py model=pyg_tgn checkpoint=<path> ...`` then explains it.

    Args:
        path: Destination ``.pt`` (a ``.json`` card is written next to it).
        memory: The trained ``TGNMemory``.
        gnn: The trained embedding (PyG example's ``GraphAttentionEmbedding``).
        link_pred: The trained predictor (PyG example's ``LinkPredictor``).
        stream: The stream it was trained on (its fingerprint goes into the checkpoint).
        num_neighbors: The ``LastNeighborLoader``'s ``size``.
        batch_size: The batch size history is fed in.
        card: Extra card entries.

    Returns:
        The ``.pt`` and ``.json`` paths.
    """
    model: Any = PyGTGN.from_modules(memory, gnn, link_pred, num_neighbors, batch_size,
                                     edge_dim=stream.feat_dim)
    try:  # what explain.py will rebuild must take these weights
        PyGTGN(**model.hparams).load_state_dict(model.state_dict())
    except RuntimeError as err:
        reason = str(err).splitlines()[0]
        raise ConfigError("these modules are not those of PyG's TGN example (TGNMemory "
                          "with IdentityMessage and LastAggregator, GraphAttentionEmbedding, "
                          f"LinkPredictor): {reason}") from None
    return save_checkpoint(model, stream, path, card)

"""What a checkpoint file of this project is: reading it, telling its kind, hashing its tensors.

The project writes three kinds of checkpoint, each read by its own options:

* a **model** (``scripts/train.py``, ``<model>_<dataset>.pt``), read by ``checkpoint=``;
* a **PGExplainer** (``scripts/train_explainer.py``, ``pgexplainer_<model>_<dataset>.pt``),
  read by ``explainer=pgexplainer``'s ``explainer.checkpoint=`` and by T-GNNExplainer's
  (its ``pgexplainer`` and ``mlp`` navigators are this MLP);
* a **TempME** (``scripts/train_explainer.py explainer=tempme``,
  ``tempme_<model>_<dataset>.pt``), read by ``explainer=tempme``'s ``explainer.checkpoint=``;

and ``train_explainer.py`` keeps a **training state** (``state.pt`` of its run directory) that
no option reads. ``read_checkpoint`` is every loader's way in: it reads the file
(``load_torch``: ``torch.load(..., weights_only=True)``, so a pickle's code is never run),
tells its kind by its entries (``checkpoint_kind``) and refuses, in one line, a file that is
truncated, damaged, not a torch file, or a checkpoint of another kind than the one asked for
(naming what it is and the option that takes it; advice to retrain or overwrite is only given
for an earlier format of the asked kind, by that kind's loader).

``tensors_sha256`` is what a card's ``weights_sha256`` records: the SHA-256 of the tensors
themselves, not of the file's bytes (``torch.save``'s archive holds more than the tensors and
need not be the same bytes for the same tensors, so two trainings to bitwise equal weights gave
two file checksums).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cftgnn.errors import CftgnnError

#: How a torch archive (``torch.save``'s format since torch 1.6) begins: a zip file.
ZIP_MAGIC = b"PK\x03\x04"


class CheckpointMismatchError(CftgnnError, ValueError):
    """A checkpoint was trained on a different stream than the one it is loaded for, or holds
    another kind of model than the one asked for."""


class CheckpointError(CftgnnError, ValueError):
    """A file does not load as a checkpoint of this project (cut short, not a checkpoint,
    a pickle that weights-only loading refuses)."""


class CheckpointKindError(CheckpointMismatchError, CheckpointError):
    """A torch file that is not a checkpoint of the kind asked for: one of another kind (a
    TempME where a PGExplainer is read), or none of this project's kinds."""


@dataclass(frozen=True)
class CheckpointKind:
    """One kind of checkpoint file: what its entries are, what it is called, who reads and
    who writes it.

    Attributes:
        name: Its short name (``model``, ``pgexplainer``, ``tempme``, ``state``).
        title: What messages call it (``TempME checkpoint``).
        keys: The entries every file of the kind holds (the first kind whose keys a file has
            is its kind).
        advice: What to do with a file of the kind given where another is read (the
            options that take it), with ``{path}`` for the file.
        readers: Who reads it, for a message refusing another kind in its place.
        writer: The command that writes one, as a clause (``… writes one``).
    """

    name: str
    title: str
    keys: tuple[str, ...]
    advice: str
    readers: str
    writer: str


MODEL = CheckpointKind(
    "model", "model checkpoint", ("state_dict", "config", "dataset"),
    "pass it as checkpoint={path}",
    "checkpoint= (the model) reads a model checkpoint",
    "`python scripts/train.py model=<model> dataset=<dataset>` writes one "
    "(cftgnn.training.checkpoint.save_pyg_tgn, for a TGN trained with PyG's modules)")
PGEXPLAINER = CheckpointKind(
    "pgexplainer", "PGExplainer checkpoint", ("state_dict", "input_dim", "hidden"),
    "pass it as explainer=pgexplainer explainer.checkpoint={path} (or as T-GNNExplainer's "
    "navigator, explainer=tgnnexplainer explainer.checkpoint={path})",
    "explainer=pgexplainer (and T-GNNExplainer's pgexplainer and mlp navigators) reads a "
    "PGExplainer checkpoint in explainer.checkpoint=",
    "`python scripts/train_explainer.py model=<model> dataset=<dataset>` writes one")
TEMPME = CheckpointKind(
    "tempme", "TempME checkpoint", ("state_dict", "shape", "n_walks", "degree"),
    "pass it as explainer=tempme explainer.checkpoint={path}",
    "explainer=tempme reads a TempME checkpoint in explainer.checkpoint=",
    "`python scripts/train_explainer.py explainer=tempme model=<model> dataset=<dataset>` "
    "writes one")
STATE = CheckpointKind(
    "state", "training state", ("mlp", "optimizer", "epoch", "history"),
    "rerun its training (the same train_explainer.py command, with hydra.run.dir= that run "
    "directory) to finish it and write the trained checkpoint",
    "train_explainer.py resumes from a training state",
    "`python scripts/train_explainer.py` writes one in its run directory")
#: Every kind, in the order ``checkpoint_kind`` tries them.
KINDS = (MODEL, PGEXPLAINER, TEMPME, STATE)


def checkpoint_kind(blob: Any) -> CheckpointKind | None:
    """The kind of checkpoint a loaded file's content ``blob`` is (by its entries), None
    for none of this project's."""
    if not isinstance(blob, Mapping):
        return None
    return next((kind for kind in KINDS if all(k in blob for k in kind.keys)), None)


def _what_it_is(kind: CheckpointKind) -> str:
    """A kind as the subject of a sentence: ``a TempME checkpoint``, ``the training state of
    …``."""
    if kind is STATE:
        return ("the training state of an unfinished scripts/train_explainer.py run (a run "
                "directory's state.pt)")
    return f"a {kind.title}"


def other_kind_message(path: str | os.PathLike[str], blob: Any, want: CheckpointKind) -> str:
    """The one line refusing ``blob`` (read from ``path``) where a ``want`` is read: what the
    file is, which option takes it, and what is read here."""
    kind = checkpoint_kind(blob)
    if kind is None:
        if isinstance(blob, Mapping) and blob:
            entries = ", ".join(sorted(map(str, blob))[:6]) + (", …" if len(blob) > 6 else "")
            holds = f"a torch file of the entries {entries}, none of this project's kinds"
        else:
            empty = "empty " if isinstance(blob, Mapping) else ""
            holds = f"a torch file holding one {empty}{type(blob).__name__}"
        return f"{path} is not a cftgnn checkpoint ({holds}); {want.readers}: {want.writer}"
    return (f"{path} is {_what_it_is(kind)}, not a {want.title}: "
            f"{kind.advice.format(path=path)}; {want.readers}: {want.writer}")


def _zip_problem(path: Path) -> str | None:
    """Why a file that begins as a torch archive does not read, None if its archive does."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except zipfile.BadZipFile:
        return ("is truncated: it begins as a torch checkpoint but its archive ends early "
                "(an interrupted copy or download, or a full disk)")
    except (OSError, EOFError, ValueError, NotImplementedError):
        return "is damaged: its torch archive does not read"
    if bad is not None:
        return f"is damaged: its torch archive's part {bad} fails its checksum"
    return None


def unreadable_reason(path: Path, exc: BaseException) -> str:
    """Why ``torch.load`` of ``path`` failed with ``exc``, as the predicate of a sentence
    about the file (``is truncated: …``): never torch's own message, which is long and
    speaks of its internals."""
    if isinstance(exc, pickle.UnpicklingError):
        found = re.search(r"GLOBAL (\S+)", str(exc))
        if found:
            return (f"holds a pickled Python object ({found.group(1).rstrip('.,;:')}), "
                    "which safe weights-only loading refuses; nothing in it was run")
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as err:
        return f"cannot be read ({err.strerror or type(err).__name__})"
    if head.startswith(ZIP_MAGIC):
        return _zip_problem(path) or "is damaged: its torch archive does not load"
    if head.lstrip()[:1] in (b"{", b"["):
        return ("is not a torch checkpoint: it is JSON text (a checkpoint's card is the .json "
                "next to its .pt)")
    if head[:1] == b"\x80":  # a pickle (torch's format before 1.6)
        return "is truncated or damaged: its pickle does not read to its end"
    return "is not a torch checkpoint: it is neither a torch archive nor a pickle"


def load_torch(path: str | os.PathLike[str], kind: CheckpointKind) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU (a pickle's code is never run),
    each failure one ``CheckpointError`` line: the file, what is wrong with it in a whole
    sentence, and who writes a ``kind``.

    Raises:
        CheckpointError: The file is absent, empty, truncated, damaged, not a torch file,
            or holds an object weights-only loading refuses.
    """
    file = Path(path)
    fix = f"; {kind.writer}"
    if not file.is_file():
        raise CheckpointError(f"{kind.title} {file} is not a file{fix}")
    if file.stat().st_size == 0:
        raise CheckpointError(f"{kind.title} {file} is empty (0 bytes){fix}")
    try:
        with warnings.catch_warnings():  # torch's notes on loading are no news here
            warnings.simplefilter("ignore")
            return torch.load(file, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, TypeError,
            zipfile.BadZipFile, UnicodeDecodeError, AttributeError, KeyError,
            IndexError) as exc:
        raise CheckpointError(f"{kind.title} {file} {unreadable_reason(file, exc)}{fix}"
                              ) from None


def read_checkpoint(path: str | os.PathLike[str], want: CheckpointKind) -> dict[str, Any]:
    """The content of ``path``, a checkpoint of kind ``want``: every loader's way in.

    Raises:
        CheckpointError: The file does not read (``load_torch``).
        CheckpointKindError: It is a checkpoint of another kind, or of none of this
            project's (``other_kind_message``).
    """
    blob = load_torch(path, want)
    if checkpoint_kind(blob) is not want:
        raise CheckpointKindError(other_kind_message(path, blob, want))
    return dict(blob)


def tensors_sha256(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of a state dict's tensors, the same for bitwise equal tensors however they were
    saved: for each tensor, by name in sorted order, its name, dtype and shape (as text, each
    ended by a NUL byte), then the byte count and the bytes of its values (C order, this
    machine's byte order: little-endian on the machines torch supports)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        h.update(f"{name}\0{str(t.dtype).removeprefix('torch.')}\0"
                 f"{list(t.shape)}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def weights_sha256(path: str | os.PathLike[str]) -> str:
    """What a checkpoint's card records as ``weights_sha256``: ``tensors_sha256`` of the
    ``state_dict`` of the checkpoint at ``path`` (any kind).

    Raises:
        CheckpointError: The file does not read, or holds no state dict.
    """
    blob = load_torch(path, MODEL)
    tensors = blob.get("state_dict") if isinstance(blob, Mapping) else None
    if not isinstance(tensors, Mapping):
        raise CheckpointError(f"{path} holds no state dict of tensors")
    return tensors_sha256(tensors)


__all__ = ["KINDS", "MODEL", "PGEXPLAINER", "STATE", "TEMPME", "CheckpointError",
           "CheckpointKind", "CheckpointKindError", "CheckpointMismatchError",
           "checkpoint_kind", "load_torch", "other_kind_message", "read_checkpoint",
           "tensors_sha256", "unreadable_reason", "weights_sha256"]

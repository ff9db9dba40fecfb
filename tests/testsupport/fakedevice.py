"""A test-only "foreign" tensor device that computes on the CPU.

Code written for the CPU often works on a GPU only by accident: a ``.numpy()`` that fails, a
CPU index tensor mixed into a device op, or a ``.item()`` in a loop that synchronises the
device at every step. ``fake_device()`` makes those visible on a machine without a GPU:

    with fake_device() as fake:
        model.to(fake.device)          # parameters now live on ``lazy:0``
        logits = engine.exact(sets)    # runs on the CPU, behaves like a foreign device
    fake.crossings                     # Counter: (kind, code site) -> count

Tensors on the fake device are ``FakeDeviceTensor``s, wrappers around a CPU tensor (a
``__torch_dispatch__`` subclass): every operator unwraps, runs on the CPU, and wraps, so the
numbers are the CPU's bit for bit. The device it reports is torch's ``lazy:0``, borrowed: it
is a device type of every torch build with the device guard autograd needs (a renamed
``PrivateUse1`` has none without C++), and cftgnn never uses it otherwise (torch's lazy backend
is not initialised: a factory with ``device=lazy`` outside ``fake_device()`` fails). So
``device=lazy`` in a config selects the fake device inside the block, with no hook in the
package.
Like CUDA, the device

- refuses ``.numpy()`` and ``np.asarray(t)`` (``TypeError``: transfer with ``.cpu()`` first);
- refuses an operator that mixes its tensors with CPU tensors of one or more dimensions
  (``RuntimeError``; CPU scalars, 0-dim, are allowed, as CUDA allows them), except indexing
  with CPU index tensors, which CUDA uploads implicitly (counted as ``implicit upload``);

and it counts every host<->device crossing by kind, at the innermost ``cftgnn`` frame that
made it:

- ``sync``: a value read back to the host (``.item()``, ``bool(t)``, ``int(t)``,
  ``.tolist()``, ``torch.equal``), or an operator whose output size depends on the data
  (``nonzero``, a boolean mask index, ``masked_select``, ``unique``, ``repeat_interleave``
  without ``output_size``), which CUDA answers by synchronising;
- ``download``: a copy to the CPU (``.cpu()``, ``.to("cpu")``, ``cpu_t.copy_(t)``);
- ``upload``: a copy from the CPU (``.to(device)`` of a CPU tensor, ``torch.tensor(data,
  device=...)``, ``torch.as_tensor(array, device=...)``, ``t.copy_(cpu_t)``);
- ``implicit upload``: a CPU index tensor in an indexing operator.

Creating a tensor on the device (``torch.zeros(..., device=fake.device)``, ``arange``,
``full``) crosses nothing. ``untyped_storage()`` answers with the CPU storage (its size and
identity: the replay's memory accounting reads them).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

import cftgnn

#: The device type borrowed: ``lazy`` has the device guard autograd needs in every torch
#: build and is never used by cftgnn (torch's lazy backend is not initialised by it).
NAME = "lazy"
CPU = torch.device("cpu")

aten = torch.ops.aten
#: Operators whose output size depends on the values: CUDA synchronises to size the output.
DATA_DEPENDENT = {
    aten.nonzero.default, aten.masked_select.default, aten._unique.default,
    aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default,
    aten.argwhere.default,
}
#: Operators that return a Python value read from the tensor (a synchronising read).
HOST_READS = {aten._local_scalar_dense.default, aten.equal.default, aten.is_nonzero.default}
#: Indexing operators that accept CPU index tensors on CUDA (uploading them).
INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default,
            aten._index_put_impl_.default}


DEVICE = torch.device(NAME, 0)


#: The folder of the ``cftgnn`` package that runs (whatever the checkout's folder is called).
PACKAGE = os.path.dirname(os.path.realpath(cftgnn.__file__))


@functools.cache
def package_path(filename: str, package: str = PACKAGE) -> str | None:
    """``filename`` relative to the package folder (``models/tgn.py``), or None outside it.

    Cut at the package's own folder, not at the first ``/cftgnn/`` of the path: a clone named
    ``cftgnn`` (``git clone``'s default) holds the package at ``…/cftgnn/cftgnn/``.
    """
    path = os.path.realpath(filename)
    if os.path.commonpath([path, package]) != package:
        return None
    return os.path.relpath(path, package).replace(os.sep, "/")


def _site() -> str:
    """The innermost ``cftgnn`` frame of the current stack (``path:line (function)``)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = package_path(frame.f_code.co_filename)
        if name is not None:
            return f"{name}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "(outside cftgnn)"


@dataclass
class Crossings:
    """What a ``fake_device()`` block counted; ``crossings[(kind, site)]`` is a count."""

    device: torch.device = DEVICE
    crossings: collections.Counter[tuple[str, str]] = field(
        default_factory=collections.Counter)

    def count(self, kind: str) -> None:
        self.crossings[(kind, _site())] += 1

    def by_kind(self) -> dict[str, int]:
        """The totals per kind (``sync``, ``download``, ``upload``, ``implicit upload``)."""
        out: collections.Counter[str] = collections.Counter()
        for (kind, _), n in self.crossings.items():
            out[kind] += n
        return dict(out)

    def total(self) -> int:
        return sum(self.crossings.values())

    def reset(self) -> None:
        self.crossings.clear()


_ACTIVE: list[Crossings] = []


def _count(kind: str) -> None:
    if _ACTIVE:
        _ACTIVE[-1].count(kind)


class FakeDeviceTensor(torch.Tensor):
    """A tensor on the fake device: a wrapper around the CPU tensor ``elem`` that holds its
    values. Only ``fake_device()`` and the operators make them."""

    elem: torch.Tensor
    __slots__ = ("elem",)

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> FakeDeviceTensor:
        assert type(elem) is torch.Tensor and elem.device == CPU, type(elem)
        out = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device=DEVICE,
            requires_grad=elem.requires_grad)
        out.elem = elem
        return out

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # noqa: D105
        return f"FakeDeviceTensor({self.elem!r}, device='{DEVICE}')"

    def numpy(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        raise TypeError(f"can't convert {DEVICE} device type tensor to numpy. Use "
                        "Tensor.cpu() to copy the tensor to host memory first.")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D105
        return self.numpy()

    def untyped_storage(self) -> torch.UntypedStorage:  # noqa: D102
        return self.elem.untyped_storage()  # its size and identity (memory accounting)

    def tolist(self) -> Any:  # noqa: D102
        _count("sync")
        return self.elem.tolist()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        return _dispatch(func, args, kwargs or {})


def _wrap(x: Any) -> Any:
    return FakeDeviceTensor(x) if type(x) is torch.Tensor else x


def _unwrap(x: Any) -> Any:
    return x.elem if isinstance(x, FakeDeviceTensor) else x


def _is_fake(dev: Any) -> bool:
    return dev is not None and torch.device(dev).type == NAME


def _dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``func`` on the CPU tensors inside, check devices, count crossings."""
    flat, _ = tree_flatten((args, kwargs))
    fakes = [x for x in flat if isinstance(x, FakeDeviceTensor)]
    cpus = [x for x in flat if type(x) is torch.Tensor and x.device == CPU]
    indexing = func in INDEXING
    target = kwargs.get("device")

    if func in (aten._to_copy.default, aten.copy_.default, aten._copy_from.default):
        return _transfer(func, args, kwargs)
    if not fakes:  # a factory on the device: created there, nothing crosses
        kw = dict(kwargs, device=CPU)
        return tree_map(_wrap, func(*args, **kw)) if _is_fake(target) else func(*args, **kwargs)
    if cpus and not all(t.dim() == 0 for t in cpus):
        if indexing:
            _count("implicit upload")
        else:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two "
                f"devices, {DEVICE} and cpu! ({func})")
    data_dependent = (
        func in HOST_READS or func in DATA_DEPENDENT
        or (func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None)
        or (indexing and any(t is not None and t.dtype == torch.bool
                             for t in _indices(func, args, kwargs))))
    if data_dependent:
        _count("sync")
    kw = dict(kwargs, device=CPU) if _is_fake(target) else kwargs
    out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kw))
    if func in HOST_READS:
        return out
    if func._schema.is_mutable and isinstance(out, torch.Tensor) and out is _unwrap(args[0]):
        return args[0]  # in place: the same wrapper
    return tree_map(_wrap, out)


def _indices(func: Any, args: tuple, kwargs: dict) -> list[Any]:
    idx = args[1] if len(args) > 1 else kwargs.get("indices", [])
    return list(idx) if isinstance(idx, (list, tuple)) else []


def _transfer(func: Any, args: tuple, kwargs: dict) -> Any:
    """``_to_copy`` and ``copy_``: moves between the CPU and the device, counted."""
    if func is aten._to_copy.default:
        src = args[0]
        on_fake = isinstance(src, FakeDeviceTensor)
        dest = kwargs.get("device")
        to_fake = on_fake if dest is None else _is_fake(dest)
        kw = dict(kwargs, device=CPU)
        out = func(_unwrap(src), *args[1:], **kw)
        if on_fake and not to_fake:
            _count("download")
            return out
        if to_fake and not on_fake:
            _count("upload")
        return _wrap(out) if to_fake else out
    dst, src = args[0], args[1]
    if isinstance(dst, FakeDeviceTensor) != isinstance(src, FakeDeviceTensor) and src.dim():
        _count("upload" if isinstance(dst, FakeDeviceTensor) else "download")
    func(_unwrap(dst), _unwrap(src), *args[2:], **kwargs)
    return dst


class _Dispatch(TorchDispatchMode):
    """Routes factories with ``device=lazy`` (no tensor argument) to the CPU."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if any(isinstance(x, FakeDeviceTensor) for x in flat) or _is_fake(kwargs.get("device")):
            return _dispatch(func, args, kwargs)
        return func(*args, **kwargs)


class _Functions(TorchFunctionMode):
    """``torch.tensor``/``as_tensor`` with ``device=lazy``: built on the CPU, uploaded."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        kwargs = kwargs or {}
        if func in (torch.tensor, torch.as_tensor) and _is_fake(kwargs.get("device")):
            data = args[0] if args else kwargs.get("data")
            on_fake = isinstance(data, FakeDeviceTensor)
            out = func(*args, **dict(kwargs, device=None if on_fake else CPU))
            if not on_fake:
                _count("upload")
                with torch._C.DisableTorchFunction():
                    return FakeDeviceTensor(out)
            return out
        return func(*args, **kwargs)


@contextlib.contextmanager
def fake_device() -> Iterator[Crossings]:
    """Make ``lazy:0`` the fake device inside the block and count its crossings (see the module)."""
    record = Crossings()
    _ACTIVE.append(record)
    try:
        with _Functions(), _Dispatch():
            yield record
    finally:
        _ACTIVE.remove(record)


if __name__ == "__main__":  # a smoke check: python tests/testsupport/fakedevice.py
    with fake_device() as fake:
        x = torch.arange(4.0).to(fake.device)
        print(x * 2, (x * 2).sum().item(), fake.crossings, file=sys.stderr)

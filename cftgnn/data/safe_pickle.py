"""Read a pickle of numpy arrays and scalars without executing anything else.

A pickle is a program: every global it names is imported and may be called while it loads, so
``pickle.load`` on a downloaded file runs whatever the file says. The Temporal Graph Benchmark
ships its negative destinations as pickles (``cftgnn.data.tgb``), so they are read here with an
unpickler whose ``find_class`` admits only the callables numpy's own pickles name, taken from a
fixed table (no module is imported by name):

- ``numpy.ndarray`` and ``numpy.dtype`` (the type and the dtype of an array);
- ``numpy._core.multiarray._reconstruct`` (protocols 0-4: an empty array, filled by ``BUILD``),
  ``numpy._core.numeric._frombuffer`` (protocol 5: an array over the pickled bytes) and
  ``numpy._core.multiarray.scalar`` (a numpy scalar such as ``np.int64(5)``), each also under
  the ``numpy.core`` name numpy 1.x wrote (TGB's files were written with numpy 1.x).

Those are what TGB's ``save_pickle`` (``pickle.HIGHEST_PROTOCOL``) writes for a dict from
tuples of numpy scalars to arrays, under numpy 1 and 2 and protocols 3 to 5 (listed with
``pickletools`` and a logging ``find_class``). Protocols 0-2 also name ``_codecs.encode`` for
bytes; TGB never writes them, so they are refused like any other global. Everything else
(``os.system``, ``builtins.eval``, ``builtins.open``, any class) is refused before it is looked
up, with ``DataFormatError`` naming the file and the global: nothing of it runs. The opcodes
that build dicts, tuples, numbers and strings need no global.

An array of ``object`` dtype is refused after loading (its elements are whatever the pickle
built; a negatives file holds numbers).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from cftgnn.errors import DataFormatError


def _numpy_core() -> tuple[Any, Any]:
    core = getattr(np, "_core", None) or np.core  # numpy >= 2 names it _core
    return core.multiarray, core.numeric


def _admitted() -> dict[tuple[str, str], Any]:
    multiarray, numeric = _numpy_core()
    table: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }
    for core in ("numpy.core", "numpy._core"):  # numpy's own names, as its pickles state them
        for module, name in ((multiarray, "_reconstruct"), (multiarray, "scalar"),
                             (numeric, "_frombuffer")):
            table[(f"{core}.{module.__name__.rsplit('.', 1)[1]}", name)] = getattr(module, name)
    return table


#: The globals a numpy pickle may name, and what each resolves to.
ADMITTED_GLOBALS: dict[tuple[str, str], Any] = _admitted()


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BufferedIOBase, where: str) -> None:
        super().__init__(file)
        self._where = where

    def find_class(self, module: str, name: str) -> Any:
        found = ADMITTED_GLOBALS.get((module, name))
        if found is None:
            raise DataFormatError(
                f"{self._where}: refused to unpickle the global {module}.{name}: the file may "
                "hold only numpy arrays and scalars in dicts and tuples; nothing was executed")
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise DataFormatError(f"{self._where}: refused a persistent id in the pickle; nothing "
                              "was executed")


def _refuse_objects(obj: Any, where: str, depth: int = 0) -> None:
    if isinstance(obj, np.ndarray) and obj.dtype.hasobject:
        raise DataFormatError(f"{where}: an array of dtype {obj.dtype} (Python objects); a "
                              "negatives file holds numeric arrays")
    if depth < 2 and isinstance(obj, dict):  # the table's values; keys are tuples of scalars
        for value in obj.values():
            _refuse_objects(value, where, depth + 1)


def load_numpy_pickle(path: Path) -> Any:
    """The object pickled in ``path``, built from numpy arrays, numpy scalars and Python's
    containers and numbers only.

    Raises:
        DataFormatError: The pickle names a global outside ``ADMITTED_GLOBALS`` (nothing of it
            was executed), is cut short or garbled, or holds an object-dtype array.
        DataNotFoundError: Not raised here; the caller checks the file exists.
    """
    where = str(path)
    try:
        with open(path, "rb") as f:
            obj = _NumpyOnlyUnpickler(f, where).load()
    except DataFormatError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, MemoryError, OverflowError) as exc:
        raise DataFormatError(f"{where}: not a readable pickle ({type(exc).__name__}: "
                              f"{str(exc)[:120]})") from exc
    except OSError as exc:
        raise DataFormatError(f"{where}: cannot read file: {exc}") from exc
    _refuse_objects(obj, where)
    return obj


__all__ = ["ADMITTED_GLOBALS", "load_numpy_pickle"]

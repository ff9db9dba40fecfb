"""Read what wandb wrote for an offline run (tests of the W&B tracker and pipeline).

wandb 0.31 keeps an offline run's config, summary, history and exit code only in its
transaction log ``run-<id>.wandb`` (no ``wandb-summary.json``), so tests read that file.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any


def read_transaction_log(path: Path) -> list[Any]:
    """Records of a ``run-<id>.wandb`` file (LevelDB log format, W&B header)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1, path
    block, pos, pending, out = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # block trailer
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        if kind == 0:  # zero padding up to the end of the block
            pos += left - 7
            continue
        if pos + length > len(data):  # a record still being written
            break
        pending += data[pos : pos + length]
        pos += length
        if kind in (1, 4):  # FULL or LAST chunk of a record
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def logged_run(run_dir: Path) -> dict[str, Any]:
    """Config, summary, history rows and exit code as written to the run's transaction log."""
    (log_file,) = run_dir.glob("run-*.wandb")
    result: dict[str, Any] = {"config": {}, "summary": {}, "history": [], "exit_code": None}
    for record in read_transaction_log(log_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            for item in record.run.config.update:
                result["config"][item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                result["config"][item.key] = json.loads(item.value_json)
        elif kind == "summary":
            for item in record.summary.update:
                key = item.key or "/".join(item.nested_key)
                result["summary"][key] = json.loads(item.value_json)
        elif kind == "history":
            result["history"].append(
                {
                    (i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                    for i in record.history.item
                }
            )
        elif kind == "exit":
            result["exit_code"] = record.exit.exit_code
    return result


def finished_run_log(run_dir: Path, timeout: float = 10.0) -> dict[str, Any]:
    """``logged_run`` once the exit record is on disk.

    wandb-core (0.31) acknowledges ``run.finish()`` before its writer has flushed the last
    records to ``run-<id>.wandb``; the tail appears a few milliseconds later.
    """
    from google.protobuf.message import DecodeError

    deadline = time.monotonic() + timeout
    while True:
        try:
            logged = logged_run(run_dir)
        except DecodeError:  # a half-written record; read again
            logged = None
        if logged is not None and logged["exit_code"] is not None:
            return logged
        if time.monotonic() > deadline:
            raise AssertionError(f"no exit record in {run_dir} after {timeout}s")
        time.sleep(0.01)


__all__ = ["finished_run_log", "logged_run", "read_transaction_log"]

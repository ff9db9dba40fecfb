"""The gpu tests' device rule: a missing CUDA device skips with its reason, or fails where
one is required (``CFTGNN_REQUIRE_GPU=1``, set by ``scripts/gpu/check.sh``)."""

from __future__ import annotations

import os

import pytest
import torch


def device_or_skip(name: str) -> torch.device:
    """``name`` as a device; a missing CUDA device skips (fails with CFTGNN_REQUIRE_GPU=1)."""
    if name.startswith("cuda") and not torch.cuda.is_available():
        msg = (f"no CUDA device (torch {torch.__version__}, CUDA build "
               f"{torch.version.cuda}): the gpu tests need one")
        if os.environ.get("CFTGNN_REQUIRE_GPU") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return torch.device(name)

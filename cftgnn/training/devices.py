"""The torch device a config names (``device=``), with torch only: the option checks ask it
before the models and PyG load (``cftgnn.training.options.device``)."""

from __future__ import annotations

import torch

from cftgnn.errors import ConfigError


def resolve_device(device: str | torch.device) -> torch.device:
    """The torch device a config names: ``auto`` is CUDA when available, else the CPU.

    Raises:
        ConfigError: If the name is not a torch device, or names a CUDA device that this
            machine or torch build does not have.
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ConfigError(f"unknown device {str(device)!r} (use cpu, cuda, cuda:N or auto)"
                          ) from err
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device={device} but CUDA is not available (torch "
                              f"{torch.__version__}); use device=cpu or device=auto")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device={device} but this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s)")
    return dev


__all__ = ["resolve_device"]

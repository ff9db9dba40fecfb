"""Where the exact oracle's time goes on a device: host<->device synchronisations by code site,
and the profiler's busiest operations, for one exact single call and one batch of 64 exact sets.

Run on the GPU machine after ``scripts/gpu/check.sh`` installed the carried wheels:

    python3 scripts/gpu/profile_oracle.py --device cuda --out "$OUT/profile_oracle.txt"

``--device cpu`` runs the same path without a GPU (no synchronisation is counted there).
Each synchronising CUDA call (``torch.cuda.set_sync_debug_mode("warn")``) is attributed to the
innermost frame of ``cftgnn`` that made it, and counted per call.
"""

from __future__ import annotations

import collections
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from cftgnn.cli import ArgumentParser, friendly_errors
from cftgnn.files import check_can_write

ROOT = Path(__file__).resolve().parents[2]


def sync_sites(fn, device: torch.device) -> tuple[collections.Counter[str], object]:
    """``fn()``'s result and how often each ``cftgnn`` code site synchronised the device."""
    sites: collections.Counter[str] = collections.Counter()
    if device.type != "cuda":
        return sites, fn()

    def record(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        frames = [f for f in traceback.extract_stack()[:-1] if "/cftgnn/" in f.filename]
        where = (f"{frames[-1].filename.split('/cftgnn/')[-1]}:{frames[-1].lineno} "
                 f"({frames[-1].name})") if frames else f"{filename}:{lineno}"
        sites[where] += 1

    torch.cuda.set_sync_debug_mode("warn")
    old = warnings.showwarning
    warnings.showwarning = record
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            out = fn()
    finally:
        warnings.showwarning = old
        torch.cuda.set_sync_debug_mode(0)
    return sites, out


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dataset", default="wikipedia", choices=("uci", "wikipedia"))
    parser.add_argument("--event", type=int, default=None, help="default: a test-split event")
    parser.add_argument("--out", default="profile_oracle.txt")
    args = parser.parse_args()
    with friendly_errors():
        check_can_write(args.out, "--out", file=True)
        profile(args.device, args.dataset, args.event, Path(args.out))


def profile(device_name: str, dataset: str, event_id: int | None, out: Path) -> None:
    """Profile one exact single call and one batch of 64 on ``dataset`` · TGN, write ``out``."""
    import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
    from cftgnn.oracle.engine import EventReplay, ReplayEngine
    from cftgnn.training.resolve import resolve_device, resolve_model

    torch.set_num_threads(1)
    device = resolve_device(device_name)
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("explain", overrides=[f"dataset={dataset}", "model=tgn"])
    stream = instantiate(cfg.dataset)
    model = resolve_model(cfg.model, stream, "auto", cfg.paths.checkpoint_dir, device, 0)[0]
    engine = ReplayEngine(model, stream)
    event = event_id if event_id is not None else int(0.9 * stream.num_events)
    replay = EventReplay(engine, event, None, 64)
    cand = replay.candidates.ids
    rng = np.random.default_rng(0)
    single = [frozenset(int(x) for x in rng.choice(cand, 3, replace=False))]
    batch = [frozenset(int(x) for x in rng.choice(cand, int(rng.integers(1, 6)), replace=False))
             for _ in range(64)]
    replay.exact([frozenset()])  # warm up

    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    lines = [f"device {device} ({card}), {dataset} · TGN event {event}, "
             f"{len(cand)} candidates, oldest {event - int(cand.min())} events back"]
    calls = (("exact single call (3 removed)", single), ("batch of 64 exact sets", batch))
    for name, sets in calls:
        sites, _ = sync_sites(lambda s=sets: replay.exact(s), device)
        lines.append(f"\n== {name}: {sum(sites.values())} synchronisations")
        lines += [f"  {n:6d}  {site}" for site, n in sites.most_common(25)]
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            replay.exact(sets)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        lines.append(f"-- profiler, {name}, by count")
        lines.append(prof.key_averages().table(sort_by="count", row_limit=20))
        lines.append(f"-- profiler, {name}, by self CPU time")
        lines.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    text = "\n".join(lines)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())

"""The CPU-vs-GPU benchmark and the GPU machine's preparation (scripts/gpu/), checked on the
CPU: the benchmark's whole path with ``devices=[cpu,cpu]``, its table's verdicts, the wheel
list against pyproject.toml's dependencies, and the device script's shape."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cftgnn import jit
from cftgnn.benchmarks.gpu import format_markdown

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml needs tomli on 3.10")

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "scripts" / "gpu"

#: What the GPU machine's image has installed (the workplace's description of it: Python
#: 3.12, torch 2.11.0+cu130, torch-geometric 2.8.0.post1 and these).
IMAGE = {"torch", "torch-geometric", "numpy", "pandas", "pyarrow", "matplotlib", "networkx",
         "tqdm", "scikit-learn", "scipy", "pytest", "hypothesis", "psutil", "pyyaml"}
#: Runtime dependencies the GPU run does without: wandb (imported lazily, only where asked
#: for), numba (optional: without it the cone replay's loops run as their NumPy twins,
#: ``cftgnn.jit``; its llvmlite wheel alone is 57 MiB, past a device call's carry).
NOT_NEEDED = {"wandb", "numba"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pinned() -> dict[str, str]:
    lines = [ln.strip() for ln in (GPU / "requirements.txt").read_text().splitlines()]
    out = {}
    for line in lines:
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"{line!r} is not pinned (name==version)"
            out[name.lower().replace("_", "-")] = version
    return out


def test_the_wheel_list_names_every_runtime_dependency_the_gpu_image_lacks():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lacking = {_name(d) for d in deps} - IMAGE - NOT_NEEDED
    pinned = _pinned()
    assert lacking <= set(pinned), f"add to scripts/gpu/requirements.txt: {lacking - set(pinned)}"
    assert {"hydra-core", "omegaconf", "antlr4-python3-runtime", "pymoo"} <= set(pinned)
    assert not {"torch", "wandb", "numba"} & set(pinned)  # the image's own / not needed


def test_the_pins_satisfy_the_ranges_of_pyproject():
    from packaging.requirements import Requirement

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = _pinned()
    checked = 0
    for dep in map(Requirement, deps):
        name = dep.name.lower().replace("_", "-")
        if name in pinned:
            assert dep.specifier.contains(pinned[name]), f"{name}=={pinned[name]} vs {dep}"
            checked += 1
    assert checked >= 3  # hydra-core, omegaconf, pymoo


def test_wandb_is_not_imported_by_the_package_or_the_benchmark():
    code = ("import sys, cftgnn.tracking, cftgnn.benchmarks.gpu, cftgnn.runs.pipeline; "
            "print('wandb' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_device_scripts_parse_and_name_their_call():
    for script in ("check.sh", "fetch_wheels.sh"):
        done = subprocess.run(["bash", "-n", str(GPU / script)], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
    check = (GPU / "check.sh").read_text()
    assert 'carry=[".gpu"]' in check and "timeout_s=540" in check
    limits = [int(x) for x in re.findall(r"^step \w+ (\d+) ", check, flags=re.M)]
    assert len(limits) == 6 and sum(limits) <= 480  # every step's timeout within 8 minutes
    assert "/.gpu/" in (ROOT / ".gitignore").read_text().splitlines()


#: The dry run's small sizes on the synthetic stream (no data needed).
DRY = ["pairs=[synthetic-tgn]", "n_events=2", "sets_per_event=2", "batch_size=5",
       'explainers.cftgnn=["explainer=cftgnn","explainer.it_max=10"]',
       'explainers.search_plus=["experiment=search_plus","certify=1"]',
       "tail.pair=synthetic-tgn", "tail.event=1900", "tail.max_size=1"]


def _run(tmp_path: Path, *args: str, searches: str = "[]",
         batch_sizes: str = "[]") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmark_gpu.py"), "devices=[cpu,cpu]",
         *DRY, f"searches={searches}", f"batch_sizes={batch_sizes}", f"out_dir={tmp_path}",
         *args],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_the_benchmark_runs_both_sides_on_the_cpu_and_writes_json_and_markdown(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert res["sides"] == ["cpu", "gpu"] and res["devices"] == {"cpu": "cpu", "gpu": "cpu"}
    assert res["environment"]["torch_threads"] == 1
    assert res["environment"]["device_name"] == "no CUDA device"
    assert res["failures"] == []
    part = res["pairs"]["synthetic-tgn"]
    assert part["n_events"] == 2 and not part["cut_short"]
    assert set(part["figures"]) == {"exact_ms", "approximate_ms", "batch_ms", "setup_ms",
                                    "explainer:cftgnn", "explainer:search_plus"}
    for figure, by_side in part["figures"].items():
        for side in ("cpu", "gpu"):
            s = by_side[side]
            assert s["n"] >= 2 and 0 < s["min"] <= s["median"] <= s["max"], (figure, side)
    assert part["figures"]["exact_ms"]["cpu"]["n"] == 4  # 2 events x 2 sets
    for row in part["events"]:
        cpu, gpu = row["oracle"]["cpu"], row["oracle"]["gpu"]
        assert cpu["sets"] == gpu["sets"] and len(cpu["logits"]["batch"]) == 5
        assert row["same_candidates"]["gpu"]
    assert part["max_abs_logit_diff"]["gpu"] <= 1e-5  # one model, two copies, one device
    assert part["answers_agree"] == {"cftgnn": [2, 2], "search_plus": [2, 2]}
    tail = res["tail"]
    assert tail["event_id"] == 1900 and tail["same_answer"]
    assert {s["status"] for s in tail["sides"].values()} == {"ok"}
    place = part["placement"]  # device=auto's rule fitted to the timed calls
    assert place["calls"] == 2 * (2 + 1)  # 2 events: 2 single calls and a batch each
    assert all(row["oracle"][side]["history_batches"] >= 1 for row in part["events"]
               for side in ("cpu", "gpu"))
    assert set(place["fitted"]) == {"cpu_s_per_batch", "cpu_s_per_batch_set",
                                    "gpu_s_per_batch", "gpu_s_per_batch_set"}
    assert place["measured_costs"]["on_gpu"] == 0  # not measured yet: every call on the CPU
    assert place["measured_costs"]["auto_over_cpu"] == 1.0
    assert 0 <= place["fitted_rule"]["faster_side"] <= place["fitted_rule"]["calls"] == 6
    md = (tmp_path / "gpu_check.md").read_text()
    assert md.count("| synthetic-tgn |") == 12  # 6 figures, logits, 2 answers, rule, tail 2
    assert "device=auto, the rule fitted to these calls" in md
    assert "| pair | figure | cpu | gpu | ratio | target |" in md
    assert "event 1900" in md and "not on a GPU: no verdict" in md


def test_a_pair_that_fails_is_recorded_and_the_tail_still_runs(tmp_path):
    # a checkpoint that is there but unreadable fails the pair when it loads (a missing one
    # is refused before the benchmark starts: tests/faults/test_option_faults.py)
    broken = tmp_path / "broken.pt"
    broken.write_text("not a checkpoint")
    done = _run(tmp_path, f"checkpoint={broken}")
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "not a torch checkpoint" in res["pairs"]["synthetic-tgn"]["error"]
    assert "not a torch checkpoint" in res["tail"]["error"]
    assert len(res["failures"]) == 2
    assert "FAILED" in (tmp_path / "gpu_check.md").read_text()


def _fake(gpu_median: float, ratio: float, tail_s: float) -> dict:
    def stats(m: float) -> dict:
        return {"median": m, "min": m, "max": m, "n": 3}

    figures = {"exact_ms": {"cpu": stats(10.0), "gpu": stats(10.0 / ratio)},
               "explainer:cftgnn": {"cpu": stats(1.0), "gpu": stats(gpu_median)}}
    row = {"status": "ok", "explainers": {"cftgnn": {"cpu": {"cut_short": False},
                                                     "gpu": {"cut_short": False}}}}
    side = {"search_s": tail_s, "span": 18201}
    return {"sides": ["cpu", "gpu"], "devices": {"cpu": "cpu", "gpu": "cuda"},
            "environment": {"when": "now", "device_name": "NVIDIA H100", "torch": "2.11",
                            "torch_threads": 1, "cpu": "x86_64"},
            "config": {"batch_size": 64, "atol": 1e-5},
            "pairs": {"wikipedia-tgn": {"figures": figures, "n_events": 3, "events": [row],
                                        "max_abs_logit_diff": {"gpu": 2e-5},
                                        "answers_agree": {"cftgnn": [3, 3]}}},
            "tail": {"pair": "uci-tgn", "event_id": 56484, "max_size": 3,
                     "sides": {"cpu": {**side, "search_s": 9.5}, "gpu": side},
                     "same_answer": True, "max_abs_final_logit_diff": 0.0}}


@pytest.mark.parametrize(("gpu_s", "ratio", "tail_s", "verdicts"), [
    (0.2, 6.0, 0.8, ["≥ 5× faster: met", "≤ 0.3 s: met", "≤ 1 s: met"]),
    (0.5, 4.0, 1.5, ["≥ 5× faster: MISSED", "≤ 0.3 s: MISSED", "≤ 1 s: MISSED"]),
])
def test_the_table_judges_the_gpu_side_against_the_targets(gpu_s, ratio, tail_s, verdicts):
    md = format_markdown(_fake(gpu_s, ratio, tail_s))
    for verdict in verdicts:
        assert verdict in md
    assert "(NVIDIA H100)" in md and "OVER 1e-05" in md  # 2e-5 > atol is flagged
    assert f"| {ratio:.2f} |" in md


def test_explanations_cut_short_by_their_cap_are_not_compared(tmp_path):
    done = _run(tmp_path, "n_events=1", "tail.event=null",
                'explainers.cftgnn=["explainer=cftgnn","explainer.max_time_s=1e-9"]')
    assert done.returncode == 0, done.stderr[-2000:]
    part = json.loads((tmp_path / "gpu_check.json").read_text())["pairs"]["synthetic-tgn"]
    runs = part["events"][0]["explainers"]["cftgnn"]
    assert runs["cpu"]["cut_short"] and runs["gpu"]["cut_short"]
    assert part["answers_agree"]["cftgnn"] == [0, 0]
    assert part["answers_agree"]["search_plus"] == [1, 1]
    assert "cut short, cpu / gpu: 1 / 1" in (tmp_path / "gpu_check.md").read_text()


@pytest.mark.dataset
def test_the_oracle_profile_runs_on_the_cpu_and_refuses_a_bad_out(real_data_dir, tmp_path):
    script = ROOT / "scripts" / "gpu" / "profile_oracle.py"
    env = {**os.environ, "CFTGNN_DATA_DIR": str(real_data_dir)}
    out = tmp_path / "profile.txt"
    done = subprocess.run([sys.executable, str(script), "--device", "cpu", "--dataset", "uci",
                           "--out", str(out)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("device cpu (cpu), uci · TGN event ")
    assert "== exact single call (3 removed): 0 synchronisations" in text
    assert "== batch of 64 exact sets: 0 synchronisations" in text
    assert "-- profiler, batch of 64 exact sets, by count" in text
    refused = subprocess.run([sys.executable, str(script), "--device", "cpu", "--out",
                              str(tmp_path)], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: --out '{tmp_path}' cannot be written (it is a folder; name a file); "
        "choose a writable file"]


@pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed (or CFTGNN_JIT=0) here")
def test_numbas_start_is_paid_before_the_first_timed_call_of_either_side():
    """The left side's first batch of 64 used to pay numba's start (a 4.65x ratio between two
    CPU sides); the warm-up now starts it, untimed, and times nothing else."""
    code = """
import torch
from cftgnn import jit
from cftgnn.benchmarks import gpu
from cftgnn.data.synthetic import make_synthetic_stream
from cftgnn.models.tgn import TGN
stream = make_synthetic_stream(40, 400, seed=11, feat_dim=1)
torch.manual_seed(0)
model = TGN(stream.num_nodes, stream.feat_dim, memory_dim=16, time_dim=8, embedding_dim=16,
            num_layers=1, num_heads=2, num_neighbors=5, batch_size=20)
seen = []
timed = gpu.oracle_event
def oracle_event(*args):
    seen.append(jit.started())
    return timed(*args)
gpu.oracle_event = oracle_event
part = gpu.benchmark_pair({'cpu': model, 'gpu': model}, stream, [399], sets_per_event=1,
                          batch_size=2, k=None, m_max=16, seed=0, explainers={})
print(seen, sorted(part['figures']))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=300)
    assert out.stdout.split() == ["[True,", "True]", "['approximate_ms',", "'batch_ms',",
                                  "'exact_ms',", "'setup_ms']"]


def test_explainers_null_runs_none(tmp_path):
    done = _run(tmp_path, "explainers=null", "tail.event=null")
    assert done.returncode == 0, done.stderr[-2000:]
    part = json.loads((tmp_path / "gpu_check.json").read_text())["pairs"]["synthetic-tgn"]
    assert set(part["figures"]) == {"exact_ms", "approximate_ms", "batch_ms", "setup_ms"}
    assert all(row["explainers"] == {} for row in part["events"])


def test_the_dry_run_covers_the_device_calls_list(tmp_path):
    """What the device call measures (the dense replay on the right side against the row
    table, a pair's own large batch, searches on both sides and on the right alone, K = 4
    as certify=4 runs it, device=auto's rule), on the CPU with small sizes."""
    searches = ("[{pair:synthetic-tgn,event:1950,max_size:2,sides:both,min_speedup:30},"
                "{pair:synthetic-tgn,event:1960,max_size:4,sides:right,max_s:60}]")
    done = _run(tmp_path, "right_cone=dense", "explainers=null", "m_max=10", searches=searches,
                batch_sizes="[{pair:synthetic-tgn,size:9}]")
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert res["failures"] == []
    part = res["pairs"]["synthetic-tgn"]
    assert part["batch_size"] == 9
    assert all(len(r["oracle"]["gpu"]["logits"]["batch"]) == 9 for r in part["events"])
    assert part["max_abs_logit_diff"]["gpu"] <= 1e-5  # the dense replay against the rows
    assert part["placement"]["calls"] == 2 * 3
    both, alone = res["searches"]
    assert both["sides_run"] == "both" and set(both["sides"]) == {"cpu", "gpu"}
    assert both["same_answer"] and both["max_abs_final_logit_diff"] <= 1e-5
    assert alone["sides_run"] == "right" and set(alone["sides"]) == {"gpu"}
    assert alone["max_size"] == 4 and alone["sides"]["gpu"]["status"] == "ok"
    assert res["tail"]["same_answer"]
    md = (tmp_path / "gpu_check.md").read_text()
    assert "batch of 9 exact sets, ms" in md
    assert "event 1950" in md and "exhaustive K = 2, search s" in md
    assert "≥ 30× faster (not on a GPU: no verdict)" in md
    assert "exhaustive K = 4, gpu side only" in md and "≤ 60 s (not on a GPU: no verdict)" in md


@pytest.mark.parametrize(("override", "words"), [
    ("right_cone=sparse", "right_cone must be one of auto, rows, dense, got 'sparse'"),
    ("batch_sizes=[{pair:uci-tgn,size:0}]", "size must be an integer >= 1"),
    ("searches=[{pair:uci-tgn,event:5,max_size:0}]", "max_size must be an integer >= 1"),
    ("searches=[{pair:uci-tgn,event:5,max_size:2,sides:left}]",
     "searches[0].sides must be both or right, got 'left'"),
    ("searches=[{pair:uci-tgn,event:5,max_size:2,k:3}]", "searches[0]: unknown key(s) k"),
])
def test_bad_device_call_options_are_refused(override, words):
    from hydra import compose, initialize_config_dir

    from cftgnn.benchmarks.options import check_gpu_options
    from cftgnn.errors import ConfigError

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("benchmark_gpu", overrides=["devices=[cpu,cpu]", override])
    with pytest.raises(ConfigError, match=re.escape(words)):
        check_gpu_options(cfg)


def test_the_device_script_runs_its_steps_on_the_cpu(tmp_path):
    """``scripts/gpu/check.sh`` end to end with ``GPU_CHECK_DEVICES=cpu,cpu`` and the dry
    run's sizes: every step runs, the searches' step is merged into ``gpu_check.json`` with
    the steps' statuses, and the table is made from it (no wheels here: the install step
    fails, as it says, and the rest goes on)."""
    searches = "searches=[{pair:synthetic-tgn,event:1950,max_size:2,sides:right,max_s:60}]"
    args = [*DRY, "m_max=10", "explainers=null", "n_events=1", searches]
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_DEVICES": "cpu,cpu",
           "GPU_CHECK_ARGS": " ".join(a.replace('"', "") for a in args
                                      if not a.startswith("explainers.")),
           "GPU_CHECK_PYTEST": "tests/oracle/test_placement.py"}
    done = subprocess.run(["bash", str(GPU / "check.sh")], capture_output=True, text=True,
                          timeout=420, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    steps = {s["step"]: s["exit"] for s in res["steps"]}
    assert list(steps) == ["install", "imports", "versions", "pytest_gpu", "benchmark",
                           "searches"]
    assert steps["imports"] == steps["benchmark"] == steps["searches"] == 0, steps
    assert res["pairs"]["synthetic-tgn"]["n_events"] == 1 and res["tail"]["same_answer"]
    (search,) = res["searches"]
    assert search["sides_run"] == "right" and search["sides"]["gpu"]["status"] == "ok"
    md = (tmp_path / "gpu_check.md").read_text()
    assert "exhaustive K = 2, gpu side only" in md and "event 1900" in md
    assert not (tmp_path / "searches").exists()  # merged, then removed

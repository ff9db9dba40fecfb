#!/usr/bin/env bash
# The GPU table's check, in ONE device call on a bare GPU machine without network
# (Python 3.12 with torch + CUDA, torch-geometric, numpy, pandas, ... already installed):
# installs the carried wheels that are missing, prints the versions and nvidia-smi, runs the
# `gpu` tests, then the CPU-vs-GPU benchmark (scripts/benchmark_gpu.py: its pairs and tail
# event, then its exhaustive searches as a step of their own), each step under its own
# timeout (at most 480 s in all), going on to the next step when one fails. What comes
# back, in $OUT (at most 8 files):
#   check.log       install, versions, nvidia-smi, each step's exit status
#   pytest_gpu.txt  python -m pytest -m gpu -rA (every gpu test's outcome)
#   benchmark.log   the benchmark's output (both steps)
#   gpu_check.json  the benchmark's figures, the searches merged in, plus "steps": each step's
#                   exit status and seconds
#   gpu_check.md    the table (docs/benchmarks.md, "The GPU table"), made from gpu_check.json
#
# Prepare, on the CPU machine, once per session (needs network; .gpu/ is git-ignored, never
# commit it — it holds the data streams):
#   bash scripts/gpu/fetch_wheels.sh     # .gpu/wheels (about 7 MiB) and .gpu/data (1.2 MiB)
# Then the device call (the `run` tool; `carry` makes the ignored .gpu/ travel):
#   run(command="bash scripts/gpu/check.sh", carry=[".gpu"], timeout_s=540)
# On a machine without CUDA the script still runs every step (the gpu tests fail with
# "no CUDA device", the benchmark records its failure); `GPU_CHECK_DEVICES=cpu,cpu` runs the
# benchmark's whole path on the CPU instead, `GPU_CHECK_ARGS` adds benchmark overrides (the
# test suite's dry run: small sizes on the synthetic stream) and `GPU_CHECK_PYTEST` names
# the tests of the pytest step (default: tests).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/gpu_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
LOG="$OUT/check.log"
STEPS="$OUT/steps.tsv"   # merged into gpu_check.json at the end, then removed
: > "$LOG"
: > "$STEPS"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export CFTGNN_DATA_DIR="${CFTGNN_DATA_DIR:-$ROOT/.gpu/data}"
export WANDB_MODE=disabled MPLBACKEND=Agg PYTHONUNBUFFERED=1
DEVICES="${GPU_CHECK_DEVICES:-cpu,cuda}"
read -r -a BENCH_ARGS <<< "${GPU_CHECK_ARGS:-}"   # extra overrides, split at white space
PYTEST_TARGET="${GPU_CHECK_PYTEST:-tests}"

step() {  # step NAME SECONDS OUTFILE COMMAND...: run under a timeout, record the status
    local name="$1" limit="$2" out="$3"
    shift 3
    echo "== $name (timeout ${limit} s): $*" | tee -a "$LOG"
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >> "$out" 2>&1
    local rc=$?
    local took=$((SECONDS - start))
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "   $name TIMED OUT after ${limit} s" | tee -a "$LOG"
    echo "   $name: exit $rc, ${took} s" | tee -a "$LOG"
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$took" "$limit" >> "$STEPS"
}

install_wheels() {  # the carried wheels whose distribution is not installed, offline
    local missing=()
    for whl in .gpu/wheels/*.whl; do
        [[ -e "$whl" ]] || { echo "no wheels in .gpu/wheels (run scripts/gpu/fetch_wheels.sh and carry .gpu)"; return 2; }
        local dist="${whl##*/}"
        dist="${dist%%-*}"
        if "$PY" -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$dist" 2>/dev/null; then
            echo "present: $dist $("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$dist")"
        else
            missing+=("$whl")
        fi
    done
    if ((${#missing[@]})); then
        if ! "$PY" -m pip install --no-index --no-deps --disable-pip-version-check "${missing[@]}"
        then  # no pip, or a read-only environment: unpack the wheels into .gpu/site instead
            echo "pip install failed: unpacking the wheels into .gpu/site (on PYTHONPATH)"
            for whl in "${missing[@]}"; do "$PY" -m zipfile -e "$whl" .gpu/site || return 2; done
        fi
    fi
}

versions() {
    "$PY" - <<'EOF'
import importlib.metadata as m
import platform

import torch

print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA",
      torch.version.cuda, "| available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(0))
for name in ("torch-geometric", "numpy", "pandas", "hydra-core", "omegaconf", "pymoo", "numba",
             "llvmlite"):
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "MISSING")
from cftgnn import jit

jit.warm_up()  # the image's own numba, if any: does it import with this NumPy?
print("compiled bookkeeping loops (numba):", jit.ENABLED)
EOF
    nvidia-smi || echo "nvidia-smi: not available"
}

export PY
export -f install_wheels versions
[[ "$DEVICES" == *cuda* ]] && export CFTGNN_REQUIRE_GPU=1  # the gpu tests fail, not skip
export CFTGNN_REQUIRE_DATA=1
step install 60 "$LOG" bash -c install_wheels
[[ -d .gpu/site ]] && export PYTHONPATH="$ROOT/.gpu/site:$PYTHONPATH"
step imports 20 "$LOG" "$PY" -c \
    "import hydra, omegaconf, pymoo, cftgnn; print('imports ok:', cftgnn.__file__)"
step versions 20 "$LOG" bash -c versions
step pytest_gpu 90 "$OUT/pytest_gpu.txt" \
    "$PY" -m pytest -m gpu -rA -q -p no:cacheprovider --continue-on-collection-errors \
    "$PYTEST_TARGET"
step benchmark 170 "$OUT/benchmark.log" \
    "$PY" scripts/benchmark_gpu.py "devices=[$DEVICES]" "out_dir=$OUT" "parts=[pairs,tail]" \
    "${BENCH_ARGS[@]}"
mkdir -p "$OUT/searches"
step searches 120 "$OUT/benchmark.log" \
    "$PY" scripts/benchmark_gpu.py "devices=[$DEVICES]" "out_dir=$OUT/searches" \
    "parts=[searches]" "${BENCH_ARGS[@]}"

# each step's status into gpu_check.json (made when the benchmark wrote none)
"$PY" - "$OUT" <<'EOF' 2>&1 | tee -a "$LOG"
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
path = out / "gpu_check.json"
try:
    res = json.loads(path.read_text())
except (OSError, ValueError):
    res = {"failures": ["benchmark: no gpu_check.json written (see benchmark.log)"]}
try:  # the searches' step wrote its own file: its searches and failures join the first
    part = json.loads((out / "searches" / "gpu_check.json").read_text())
    res["searches"] = part.get("searches", [])
    res.setdefault("failures", []).extend(part.get("failures", []))
except (OSError, ValueError):
    res.setdefault("failures", []).append("searches: no gpu_check.json written (see "
                                          "benchmark.log)")
steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, rc, took, limit = line.split("\t")
    steps.append({"step": name, "exit": int(rc), "seconds": int(took), "timeout_s": int(limit),
                  "timed_out": rc in ("124", "137")})
    if rc != "0":
        res.setdefault("failures", []).append(f"step {name}: exit {rc}")
res["steps"] = steps
path.write_text(json.dumps(res, indent=1) + "\n")
if "sides" in res:  # the table of everything measured, the searches included
    from cftgnn.benchmarks.gpu import format_markdown

    (out / "gpu_check.md").write_text(format_markdown(res))
print("steps:", ", ".join(f"{s['step']} {s['exit']} ({s['seconds']} s)" for s in steps))
EOF
rm -f "$STEPS"
rm -rf "$OUT/searches"   # merged into gpu_check.json above
tail -n 25 "$OUT/pytest_gpu.txt"
cat "$OUT/gpu_check.md" 2>/dev/null || tail -n 20 "$OUT/benchmark.log"

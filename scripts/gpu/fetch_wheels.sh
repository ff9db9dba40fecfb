#!/usr/bin/env bash
# Prepare the GPU machine's offline install, on a CPU machine with network access:
#   bash scripts/gpu/fetch_wheels.sh
# downloads the wheels of scripts/gpu/requirements.txt for CPython 3.12 on Linux x86-64 into
# .gpu/wheels (no dependencies are resolved: the list is the whole closure; never torch or
# the CUDA libraries, which the GPU image has), and copies the UCI and Wikipedia streams from
# $CFTGNN_DATA_DIR (default ../shared/data) into .gpu/data. .gpu/ is ignored by git (never
# commit the data): the device call carries it (see scripts/gpu/check.sh).
# A requirement published only as a source archive (antlr4-python3-runtime 4.9.3) is built
# here into a wheel, which is accepted only when pure Python (py3-none-any).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WHEELS="$ROOT/.gpu/wheels"
DATA="$ROOT/.gpu/data"
SRC="${CFTGNN_DATA_DIR:-$ROOT/../shared/data}"
REQ="$ROOT/scripts/gpu/requirements.txt"
mkdir -p "$WHEELS" "$DATA"
PLATFORM=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux_2_28_x86_64 --python-version 3.12 --implementation cp
          --abi cp312 --abi abi3 --abi none)
grep -v '^\s*#' "$REQ" | grep -v '^\s*$' | while read -r req; do
    if pip download --quiet --no-deps --only-binary=:all: "${PLATFORM[@]}" -d "$WHEELS" "$req" 2>/dev/null
    then
        echo "downloaded $req"
    else
        tmp="$(mktemp -d)"
        pip wheel --quiet --no-deps -w "$tmp" "$req"
        built=("$tmp"/*.whl)
        case "${built[0]}" in
            *-py3-none-any.whl|*-py2.py3-none-any.whl) mv "${built[0]}" "$WHEELS/" ;;
            *) echo "error: $req has no wheel for CPython 3.12 and builds to ${built[0]##*/}," \
                    "not pure Python" >&2; exit 2 ;;
        esac
        rm -rf "$tmp"
        echo "built $req (pure Python)"
    fi
done
for name in CollegeMsg.txt.gz wikipedia_nofeatures.csv.gz; do
    if [[ ! -f "$SRC/$name" ]]; then
        echo "error: $SRC/$name is missing (set CFTGNN_DATA_DIR to the data directory)" >&2
        exit 2
    fi
    cp "$SRC/$name" "$DATA/"
done
echo "wheels: $(ls "$WHEELS" | wc -l) files, $(du -sh "$WHEELS" | cut -f1); data: $(du -sh "$DATA" | cut -f1)"
echo "total to carry: $(du -sh "$ROOT/.gpu" | cut -f1) (the device call carries at most 64 MiB)"

#!/usr/bin/env bash
# Screenshots of the documentation site as a browser shows it: builds the site (strict) into a
# temporary folder, serves it on localhost and takes headless Chromium screenshots of the index,
# the baselines page (at its wide table) and the API page of cftgnn.explain (its top, and a
# Params class' signature) into OUT_DIR.
#
#   scripts/docs_screenshots.sh OUT_DIR [WIDTHxHEIGHT]      (default 1280x900)
#   DOCS_SITE=/tmp/site scripts/docs_screenshots.sh OUT_DIR  (a site built before: no build)
#
# Needs the docs extra (pip install -e ".[docs]") and a Chromium (`chromium` or
# `chromium-browser` on the PATH, or CHROMIUM=/path/to/it; on Debian: apt-get install chromium).
# Not part of CI: tests/test_docs.py checks what can be checked in the built HTML.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 OUT_DIR [WIDTHxHEIGHT]" >&2
  exit 2
fi
out=$1
size=${2:-1280x900}
if [[ ! $size =~ ^[0-9]+x[0-9]+$ ]]; then
  echo "error: window size '$size' is not WIDTHxHEIGHT (e.g. 1280x900)" >&2
  exit 2
fi
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [[ -z $browser ]]; then
  echo "error: no chromium on the PATH (apt-get install chromium, or set CHROMIUM)" >&2
  exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."

work=$(mktemp -d)
server=""
cleanup() {
  if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -n ${DOCS_SITE:-} ]]; then  # an already built site (not written to)
  [[ -f $DOCS_SITE/index.html ]] || { echo "error: DOCS_SITE=$DOCS_SITE holds no built site" >&2; exit 2; }
  ln -s "$(cd "$DOCS_SITE" && pwd)" "$work/site"
else
  python -m mkdocs build --strict --quiet --site-dir "$work/site"
fi

# A page to photograph is loaded into a full-window frame of _shot.html (same origin), which
# scrolls it to the first element a CSS selector names, if one is given: the wide table of the
# baselines page is far below its top.
cat >"$work/_shot.html" <<'HTML'
<!doctype html>
<html><head><style>html, body, iframe { margin: 0; border: 0; width: 100%; height: 100%; }</style>
</head><body><iframe id="page"></iframe><script>
const query = new URLSearchParams(location.search);
const frame = document.getElementById("page");
frame.onload = () => {
  const target = query.get("select") && frame.contentDocument.querySelector(query.get("select"));
  if (target) {
    target.scrollIntoView();
    frame.contentWindow.scrollBy(0, -72);  // the theme's header bar covers the top
  }
};
frame.src = query.get("page");
</script></body></html>
HTML

# A free port, then the server (its own process, ended by the trap).
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python -m http.server "$port" --bind 127.0.0.1 --directory "$work" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do
  python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/site/')" \
    2>/dev/null && break
  sleep 0.1
done

shot() {  # shot NAME PATH [SELECTOR]: the page /PATH, scrolled to SELECTOR, into OUT_DIR/NAME.png
  local select
  select=$(python -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "${3:-}")
  local url="http://127.0.0.1:$port/_shot.html?page=/site/$2&select=$select"
  "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile-$1" --window-size="${size/x/,}" --virtual-time-budget=5000 \
    --screenshot="$out/$1.png" "$url" >"$work/chromium-$1.log" 2>&1 || {
    echo "error: chromium failed on /$2 (log: $(tail -n 3 "$work/chromium-$1.log"))" >&2
    exit 1
  }
  echo "$out/$1.png  <- /$2${3:+ (scrolled to $3)}"
}
shot index ""
shot baselines "baselines/" "table"
shot api_explain "api/explain/"
shot api_explain_params "api/explain/" '[id="cftgnn.explain.CFTGNNParams"]'

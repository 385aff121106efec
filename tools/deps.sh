#!/usr/bin/env bash
# deps.sh — installs what hlojit's build and tests need, and only what is missing; quick
# (a second or so) when everything is there. Run from anywhere; `make deps` runs it.
#   1. Debian packages, checked with `dpkg -s`, installed with apt-get (as root) only when
#      one is missing; not root and missing: says what to install and fails.
#   2. The Python venv .venv (numpy, pytest, jax, ml_dtypes for the reference tests), created
#      with `python3 -m venv`; `pip install -r tests/requirements.txt` runs only when that
#      file changed since the last successful install (a stamp file inside .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential pkg-config llvm-19-dev libstb-dev libcmocka-dev libopenblas-dev python3-venv
      libpcre2-dev libcjson-dev   # examples/gpt2 (tokenizer regex, JSON)
      libxxhash-dev)              # header-only use (XXH_INLINE_ALL): the disk cache's hashes
REQ=tests/requirements.txt
VENV=.venv
STAMP=$VENV/.requirements.sha256

say() { echo "deps: $*"; }

missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    say "missing Debian packages: ${missing[*]}"
    say "install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}"
    exit 1
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "Debian packages present"
fi

# A python3 that can make a venv with pip in it: the one on PATH (pyenv, say) if it has
# venv and ensurepip, else Debian's.
pick_python() {
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
      echo "$py"; return 0
    fi
  done
  return 1
}

if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  py=$(pick_python) || { say "no python3 with venv and ensurepip (install python3-venv)"; exit 1; }
  say "creating $VENV with $py"
  rm -rf "$VENV"
  "$py" -m venv "$VENV"
  rm -f "$STAMP"
fi

want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  say "pip install -r $REQ"
  "$VENV/bin/python" -m pip install -q -r "$REQ"
  echo "$want" > "$STAMP"
else
  say "$VENV up to date with $REQ"
fi

#!/usr/bin/env bash
# Make this checkout ready to run: a .venv with Python 3.12+ and the pinned requirements, and a
# redis-server binary (apt-get on Debian/Ubuntu as root; elsewhere a message saying what to install).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }

python_ok() { "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3; do
    [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 && python_ok "$candidate" && { command -v "$candidate"; return; }
  done
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[3-9]*/bin/python3 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3; do
    [ -x "$candidate" ] && python_ok "$candidate" && { echo "$candidate"; return; }
  done
  return 1
}

if ! [ -x .venv/bin/python ] || ! python_ok .venv/bin/python; then
  if ! PY=$(find_python); then
    say "Python 3.12 or newer is needed (python3.13, python3.12, or pyenv's). Install one, e.g."
    say "  apt-get install python3.12 python3.12-venv   (or: pyenv install 3.13)"
    exit 1
  fi
  say "creating .venv with $PY ($("$PY" --version))"
  rm -rf .venv
  "$PY" -m venv .venv
fi

stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing requirements into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements.txt
  echo "$want" > "$stamp"
fi

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing redis-server with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    # Debian starts a system Redis on 6379; ours runs privately on its own port, so leave that alone.
  else
    say "redis-server is not installed. Install Redis 7 (Debian/Ubuntu: sudo apt-get install redis-server;"
    say "macOS: brew install redis), or set REDIS_URL to a Redis you run elsewhere."
    [ -n "${REDIS_URL:-}" ] || exit 1
  fi
fi
mkdir -p var

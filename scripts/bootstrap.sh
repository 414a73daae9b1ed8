#!/usr/bin/env bash
# Make this checkout ready to run: a .venv with Python 3.12+ and the pinned requirements, a redis-server
# 7.0 or newer, and Debian's chromium for the browser tests (apt-get on Debian/Ubuntu as root; elsewhere a
# message saying what to install). Playwright drives that chromium: its own browser downloads are never used.
#   scripts/bootstrap.sh        what `make run` needs: requirements.txt
#   scripts/bootstrap.sh dev    what `make test` needs too: requirements-dev.txt, and chromium
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
case "$mode" in run | dev) ;; *) echo "usage: scripts/bootstrap.sh [run|dev]" >&2; exit 2 ;; esac

say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }

python_ok() { "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }

as_root_on_debian() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

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

# Debian and Ubuntu ship ensurepip apart from the interpreter (python3.X-venv); without it `python -m venv`
# makes a .venv with no pip in it.
ensure_ensurepip() {
  local py=$1 version
  "$py" -c 'import ensurepip' >/dev/null 2>&1 && return 0
  version=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  if as_root_on_debian; then
    say "$py has no ensurepip; installing python$version-venv with apt-get"
    apt_install "python$version-venv" || apt_install python3-venv || true
  fi
  if ! "$py" -c 'import ensurepip' >/dev/null 2>&1; then
    say "$py cannot make a virtualenv with pip (its ensurepip module is missing). Install it, e.g."
    say "  sudo apt-get install python$version-venv   (or python3-venv), then run make again"
    exit 1
  fi
}

make_venv() {
  local py
  if ! py=$(find_python); then
    say "Python 3.12 or newer is needed (python3.13, python3.12, or pyenv's). Install one, e.g."
    say "  apt-get install python3.12 python3.12-venv   (or: pyenv install 3.13)"
    exit 1
  fi
  ensure_ensurepip "$py"
  say "creating .venv with $py ($("$py" --version))"
  rm -rf .venv
  "$py" -m venv .venv
}

venv_usable() {
  [ -x .venv/bin/python ] && python_ok .venv/bin/python && .venv/bin/python -m pip --version >/dev/null 2>&1
}

requirement_files() { if [ "$mode" = dev ]; then echo requirements.txt requirements-dev.txt; else echo requirements.txt; fi; }

install_requirements() {
  local args=() file
  for file in $(requirement_files); do args+=(-r "$file"); done
  .venv/bin/python -m pip install --quiet --upgrade pip && .venv/bin/python -m pip install --quiet "${args[@]}"
}

if ! venv_usable; then
  # A .venv left half-made (an interrupted venv, a Python without ensurepip, a removed interpreter) is made
  # again rather than failing on every run.
  [ -e .venv ] && say ".venv is incomplete (no working Python 3.12+ or no pip in it); making it again"
  make_venv
fi

# The stamp says what was installed last: "run <sha of requirements.txt>" or "dev <sha of both files>". A dev
# install serves `make run` too; a run install does not serve `make test`.
stamp=.venv/.requirements.sha256
digest() { cat "$@" | sha256sum | cut -d' ' -f1; }
want="$mode $(digest $(requirement_files))"
have=$(cat "$stamp" 2>/dev/null || true)
if [ "$have" != "$want" ] && ! { [ "$mode" = run ] && [ "$have" = "dev $(digest requirements.txt requirements-dev.txt)" ]; }; then
  say "installing $(requirement_files | sed 's/ / and /') into .venv"
  if ! install_requirements; then
    if [ -s "$stamp" ]; then
      say "pip install failed (the .venv worked before: the output above says why, e.g. the package index)"
      exit 1
    fi
    # Never completed in this .venv: it may be the half-made one. Start from a new one, once.
    say "pip install failed in a .venv that never completed; making .venv again and retrying once"
    make_venv
    install_requirements || { say "pip install failed again; the output above says why"; exit 1; }
  fi
  echo "$want" > "$stamp"
fi

redis_version() { redis-server --version 2>/dev/null | sed -n 's/.*v=\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p'; }

if ! command -v redis-server >/dev/null 2>&1; then
  if as_root_on_debian; then
    say "installing redis-server with apt-get"
    apt_install redis-server
    # Debian starts a system Redis on 6379; ours runs privately on its own port, so leave that alone.
  else
    say "redis-server is not installed. Install Redis 7 or newer (Debian/Ubuntu: sudo apt-get install redis-server;"
    say "macOS: brew install redis), or set REDIS_URL to a Redis you run elsewhere."
    [ -n "${REDIS_URL:-}" ] || exit 1
  fi
fi
if command -v redis-server >/dev/null 2>&1; then
  # The Lua scripts declare Redis 7 function flags (#!lua flags=...), which older servers reject.
  read -r major minor <<<"$(redis_version)" || true
  if [ -z "${major:-}" ] || [ "$major" -lt 7 ]; then
    say "redis-server ${major:-?}.${minor:-?} ($(command -v redis-server)) is too old: Jobconsole needs Redis 7.0 or newer."
    say "Install Redis 7 (Debian 12 / Ubuntu 24.04: apt-get install redis-server; older releases: the Redis"
    say "project's own apt repository, or build it from source), or set REDIS_URL to a Redis 7 elsewhere."
    [ -n "${REDIS_URL:-}" ] || exit 1
    say "Going on with REDIS_URL for \`make run\`; \`make test\` starts redis-server itself and needs 7.0 too."
  fi
fi

# The browser tests (tests/browser/) drive /usr/bin/chromium through Playwright; without it they are skipped.
if [ "$mode" = dev ] && [ ! -x /usr/bin/chromium ]; then
  if as_root_on_debian; then
    say "installing chromium with apt-get (for the browser tests)"
    apt_install chromium || say "apt-get could not install chromium; the browser tests will be skipped"
  else
    say "/usr/bin/chromium is missing, so the browser tests will be skipped. On Debian/Ubuntu:"
    say "  sudo apt-get install chromium   (as root, make does it itself)"
  fi
fi
mkdir -p var

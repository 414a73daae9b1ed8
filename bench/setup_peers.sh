#!/usr/bin/env bash
# Create the peer virtualenvs used by bench/run_peers.py (issue 3, `make bench`).
#
#   var/bench/venv-a: huey, dramatiq, celery, rq   (bench/requirements-peers-a.txt)
#   var/bench/venv-b: arq, saq                     (bench/requirements-peers-b.txt)
#   var/bench/node:   bullmq, ioredis              (bench/node/package*.json; run_peers.py, workflow_peers.py)
#   Debian's ruby-sidekiq (Sidekiq 6.4.1, Ruby 3.1) with apt-get when `sidekiq` is missing (run_peers.py)
#
# Two venvs because arq and saq cap redis-py below the version celery needs.
# Idempotent: a venv is rebuilt only when its requirements file or the Python
# version changed (sha256 kept in <venv>/.bench-requirements.sha256).
# Set BENCH_PYTHON=/path/to/python3.x to override the interpreter choice.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_VAR="$ROOT/var/bench"
MARKER_NAME=".bench-requirements.sha256"

log() { printf '[setup_peers] %s\n' "$*" >&2; }

# True when "$1" runs and is Python >= 3.12 (a pyenv shim for a version that
# is not active exits non-zero, so presence on PATH is not enough).
is_py312plus() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local cand
    if [[ -n "${BENCH_PYTHON:-}" ]]; then
        is_py312plus "$BENCH_PYTHON" && { echo "$BENCH_PYTHON"; return; }
        log "BENCH_PYTHON=$BENCH_PYTHON is not a working Python >= 3.12"; return 1
    fi
    for cand in python3.13 python3.12; do
        if command -v "$cand" >/dev/null && is_py312plus "$cand"; then
            command -v "$cand"; return
        fi
    done
    # Newest pyenv install first (sort -V handles 3.13.10 > 3.13.9).
    for cand in $(ls -d /root/.pyenv/versions/3.13*/bin/python3.13 \
                        /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | sort -rV); do
        is_py312plus "$cand" && { echo "$cand"; return; }
    done
    log "no Python >= 3.12 found (tried python3.13, python3.12, /root/.pyenv/versions/3.1[23]*)"
    return 1
}

# Hash of the requirements plus the interpreter version: either changing
# means the venv no longer matches what the marker says.
requirements_hash() {
    local python="$1" reqs="$2"
    { cat "$reqs"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1
}

setup_venv() {
    local python="$1" name="$2" reqs="$3"
    local venv="$BENCH_VAR/$name" marker="$BENCH_VAR/$name/$MARKER_NAME" want
    want="$(requirements_hash "$python" "$reqs")"
    if [[ -f "$marker" && "$(cat "$marker")" == "$want" && -x "$venv/bin/python" ]]; then
        log "$name: up to date ($(basename "$reqs")), skipping"
        return
    fi
    log "$name: creating with $("$python" --version 2>&1) from $(basename "$reqs")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # pip's location warnings about the local mirrors are noise; errors still show.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$reqs" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    "$venv/bin/python" -m pip check >&2
    echo "$want" > "$marker"
    log "$name: installed: $("$venv/bin/python" -m pip freeze 2>/dev/null | tr '\n' ' ')"
}

# BullMQ for bench/workflow_peers.py: `npm ci` from the committed lock file, when Node is installed.
setup_node() {
    local dir="$BENCH_VAR/node" marker="$BENCH_VAR/node/$MARKER_NAME" want
    if ! command -v npm >/dev/null; then
        log "node: npm not found, skipping (workflow_peers.py's bullmq row needs it)"
        return
    fi
    want="$(cat "$ROOT/bench/node/package.json" "$ROOT/bench/node/package-lock.json" | sha256sum | cut -d' ' -f1)"
    if [[ -f "$marker" && "$(cat "$marker")" == "$want" && -d "$dir/node_modules/bullmq" ]]; then
        log "node: up to date (bench/node/package-lock.json), skipping"
        return
    fi
    log "node: npm ci with $(node --version) from bench/node/package-lock.json"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$ROOT/bench/node/package.json" "$ROOT/bench/node/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$want" > "$marker"
    log "node: installed bullmq $(node -p 'require("'"$dir"'/node_modules/bullmq/package.json").version')"
}

# Sidekiq for run_peers.py: Debian's package (Ruby, ruby-redis and connection_pool come with it), so that no gem is
# fetched from rubygems.org. Installing needs root; without it the sidekiq row is reported as not runnable.
setup_sidekiq() {
    if command -v sidekiq >/dev/null && ruby -e 'require "sidekiq"' 2>/dev/null; then
        log "sidekiq: $(ruby -e 'require "sidekiq"; print Sidekiq::VERSION') installed, skipping"
        return
    fi
    if ! command -v apt-get >/dev/null; then
        log "sidekiq: not installed and no apt-get; install Sidekiq 6.4 (Debian: ruby-sidekiq) for run_peers.py's row"
        return
    fi
    local sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    log "sidekiq: apt-get install ruby-sidekiq"
    $sudo apt-get install -y --no-install-recommends ruby-sidekiq >&2 \
        || { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends ruby-sidekiq >&2; } \
        || log "sidekiq: apt-get failed; run_peers.py's sidekiq row will not run"
}

main() {
    local python
    python="$(find_python)"
    log "using $python ($("$python" --version 2>&1))"
    mkdir -p "$BENCH_VAR"
    # var/bench holds venvs and results only; keep git from ever picking them up.
    [[ -f "$BENCH_VAR/.gitignore" ]] || printf '*\n' > "$BENCH_VAR/.gitignore"
    setup_venv "$python" venv-a "$ROOT/bench/requirements-peers-a.txt"
    setup_venv "$python" venv-b "$ROOT/bench/requirements-peers-b.txt"
    setup_node
    setup_sidekiq
    log "done"
}

main "$@"

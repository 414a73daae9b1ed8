#!/usr/bin/env bash
# `make test-compat`: the supported Python and Django versions beside the one `make test` runs on
# (.venv: the newest Python the machine has, requirements.txt's Django). Each leg gets a virtualenv of its own
# under var/compat/ with requirements.txt and requirements-dev.txt, Django replaced by the leg's series
# (its newest release), and runs the tests on pytest-xdist workers, as make test's parallel pass does:
#   oldest  Python 3.12 + Django 6.0   every test but the slow process and browser ones
#   mixed   the two other corners      the Django-facing tests: the app's, the API's routes (v1 and the seeds'),
#                                      the package's metadata
# The engine imports no Django, so the corners that change only Django's version run what Django touches; the
# oldest corner runs everything that runs in parallel. A leg whose Python is not installed fails with a message
# saying what to install. COMPAT_LEGS="3.12:6.0" runs only the named legs; PYTEST_ARGS go to every leg.
set -uo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[compat]\033[0m %s\n' "$*"; }

django_facing=(tests/app tests/api/v1 tests/api/seeds tests/test_package_metadata.py)
declare -A leg_tests=(
  ["3.12:6.0"]="tests"
  ["3.12:6.1"]="${django_facing[*]}"
  ["3.13:6.0"]="${django_facing[*]}"
)
legs=${COMPAT_LEGS:-"3.12:6.0 3.12:6.1 3.13:6.0"}
workers=${PYTEST_WORKERS:-$((2 * $(nproc 2>/dev/null || echo 2)))}  # as scripts/pytest_passes.sh
[ "$workers" -gt 8 ] && workers=8

find_python() {  # "3.12" -> an interpreter of that version, or nothing
  local version=$1 candidate
  for candidate in "python$version" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c "import sys; sys.exit(0 if f'{sys.version_info[0]}.{sys.version_info[1]}' == '$version' else 1)" 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
}

# The leg's virtualenv, made again only when the requirements files change.
prepare_venv() {  # python version, Django series, venv directory
  local version=$1 series=$2 venv=$3 python requirements stamp
  stamp=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -c1-16)
  if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$stamp" ]; then
    return 0
  fi
  if ! python=$(find_python "$version") || [ -z "$python" ]; then
    say "Python $version is not installed (apt-get install python$version python$version-venv, or pyenv install $version)"
    return 1
  fi
  say "making $venv ($python, Django $series.x)"
  rm -rf "$venv"
  "$python" -m venv "$venv" || return 1
  requirements=$(mktemp)
  # requirements.txt pins the Django `make test` runs on: the leg names its own series instead.
  grep -v -i '^django==' requirements.txt >"$requirements"
  echo "Django>=$series,<${series%.*}.$((${series#*.} + 1))" >>"$requirements"
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null &&
    "$venv/bin/python" -m pip install -q -r "$requirements" -r requirements-dev.txt
  local code=$?
  rm -f "$requirements"
  [ "$code" -eq 0 ] && echo "$stamp" >"$venv/.stamp"
  return "$code"
}

status=0
summary=()
for leg in $legs; do
  version=${leg%%:*}
  series=${leg#*:}
  tests=${leg_tests[$leg]:-tests}
  venv="var/compat/py$version-django$series"
  started=$(date +%s)
  if prepare_venv "$version" "$series" "$venv"; then
    django=$("$venv/bin/python" -c 'import django; print(django.__version__)')
    python=$("$venv/bin/python" -c 'import platform; print(platform.python_version())')
    say "Python $python, Django $django: pytest $tests"
    # shellcheck disable=SC2086 # the leg's test paths are words
    "$venv/bin/python" -m pytest -q -n "$workers" -m "not (slow or browser)" $tests ${PYTEST_ARGS:-}
    code=$?
  else
    code=1
    django="(not installed)"
    python=$version
  fi
  summary+=("Python $python, Django $django: $(($(date +%s) - started)) s (exit $code)")
  [ "$status" -eq 0 ] && status=$code
done
echo "== compatibility legs =="
printf '%s\n' "${summary[@]}"
exit "$status"

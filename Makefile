# The two commands: `make run` (the whole stack in the foreground) and `make test` (checks and tests).
SHELL := /bin/bash
PY := .venv/bin/python

.PHONY: run test bootstrap bootstrap-dev lint typecheck djangochecks pytest test-db test-compat chaos bench clean

# The settings refuse to start without a SECRET_KEY when DEBUG is off; tools that only read them get a dummy.
TOOL_ENV := SECRET_KEY=tools-only-not-a-secret

# `make run` installs what running needs (requirements.txt); `make test` the testing tools too (requirements-dev.txt).
bootstrap:
	@scripts/bootstrap.sh run

bootstrap-dev:
	@scripts/bootstrap.sh dev

# `make run`: Redis, the console (gunicorn, PORT=8000) and a worker, kept up like a process supervisor keeps them:
# a worker or web process that exits is restarted with a backoff (1 s doubling to 30 s); Redis exiting stops it all;
# Ctrl-C stops everything, workers first, Redis last.
#   make run WORKERS=2             two runworker processes (worker-1, worker-2; 0 for none)
#   make run DEMO=1                also run `manage.py demo`: a steady mix of example jobs so every page has data
#   make run DEMO=1 DEMO_RATE=10   ...at 10 jobs a second on average (default 3)
run: bootstrap
	@$(PY) scripts/run_stack.py

test: bootstrap-dev lint typecheck djangochecks pytest

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck:
	$(TOOL_ENV) $(PY) -m mypy jobconsole dashboards project jobconsole_api examples chaos bench

# No model change without its migration, and the production settings pass Django's deployment checks
# (DEBUG off, a fresh random SECRET_KEY, ALLOWED_HOSTS set, as a deployment would have them).
djangochecks:
	$(TOOL_ENV) $(PY) manage.py makemigrations --check --dry-run
	DEBUG=0 ALLOWED_HOSTS=jobs.example.com SECRET_KEY="$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))')" \
		$(PY) manage.py check --deploy --fail-level WARNING

# Two passes (scripts/pytest_passes.sh): the bulk on pytest-xdist workers (PYTEST_WORKERS, default two per core),
# then the slow process tests and the browser tests on SLOW_WORKERS (cores + 1) workers, a module each; each pass
# prints its 25 slowest tests and the wall times close the output. PYTEST_WORKERS=0 / SLOW_WORKERS=0 run a pass without
# workers; PYTEST_ARGS go to both passes.
pytest:
	PY=$(PY) scripts/pytest_passes.sh "" $(PYTEST_ARGS)

# The database tests again, against DATABASE_URL (CI points it at PostgreSQL; each worker gets test_<name>_gwN).
test-db: bootstrap-dev
	PY=$(PY) scripts/pytest_passes.sh db $(PYTEST_ARGS)

# The other supported Python and Django versions (scripts/compat.sh: a virtualenv per leg under var/compat/;
# CI runs it after make test). COMPAT_LEGS="3.12:6.0" runs one leg.
test-compat: bootstrap-dev
	scripts/compat.sh

# The chaos suite at full volume (a few minutes; its quick version runs inside `make test`).
# CHAOS_ARGS e.g. "--scenario kill_loop --seed 7 --keep".
chaos: bootstrap-dev
	$(PY) -m chaos.run $(CHAOS_ARGS)

# Jobconsole against Sidekiq, BullMQ, Huey, Dramatiq, Celery, RQ, arq and SAQ on one private Redis (peers in
# var/bench/, Sidekiq from Debian): two runs of everything, the systems taking turns, quiet and then beside one
# CPU-bound process; the markdown tables for docs/benchmarks.md on stdout. Then Redis's CPU per job by phase and the
# ceiling of one queue, with a backlog, with a queue that keeps up and with no work at all (bench/redis_cost.py,
# REDIS_COST_ARGS).
BENCH_ARGS ?= --repeat 2 --contended
REDIS_COST_ARGS ?= --jobs 10000 --steady 1000 --idle 10
# The jobconsole+pg row runs on BENCH_DATABASE_URL; unset, on a database of its own (jobconsole_bench, made here)
# when a PostgreSQL answers on 127.0.0.1:5432, else the row is skipped. That database is flushed every run.
bench: bootstrap-dev
	bash bench/setup_peers.sh
	@if [ -z "$$BENCH_DATABASE_URL" ] && command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432; then \
		createdb -h 127.0.0.1 -U postgres jobconsole_bench 2>/dev/null || true; \
		export BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobconsole_bench; fi; \
	$(PY) bench/run_peers.py $(BENCH_ARGS)
	$(PY) bench/redis_cost.py $(REDIS_COST_ARGS)

clean:
	rm -rf .venv var .mypy_cache .ruff_cache .pytest_cache

# The two commands: `make run` (the whole stack in the foreground) and `make test` (checks and tests).
SHELL := /bin/bash
PY := .venv/bin/python

.PHONY: run test bootstrap lint typecheck pytest test-db chaos clean

bootstrap:
	@scripts/bootstrap.sh

run: bootstrap
	@$(PY) scripts/run_stack.py

test: bootstrap lint typecheck pytest

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck:
	$(PY) -m mypy jobconsole dashboards

pytest:
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The database tests again, against DATABASE_URL (CI points it at PostgreSQL).
test-db: bootstrap
	$(PY) -m pytest -q -m db $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5 = no database tests collected

# The chaos suite at full volume (a few minutes; its quick version runs inside `make test`).
# CHAOS_ARGS e.g. "--scenario kill_loop --seed 7 --keep".
chaos: bootstrap
	$(PY) -m chaos.run $(CHAOS_ARGS)

# Jobconsole against Huey, Dramatiq, Celery, RQ, arq and SAQ on one private Redis (peers in var/bench/).
bench: bootstrap
	bash bench/setup_peers.sh
	$(PY) bench/run_peers.py $(BENCH_ARGS)

clean:
	rm -rf .venv var .mypy_cache .ruff_cache .pytest_cache

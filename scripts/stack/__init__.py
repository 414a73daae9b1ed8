"""The parts of `make run` (scripts/run_stack.py): the embedded Redis and the process supervisor."""

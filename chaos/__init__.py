"""Chaos suite (GitHub issue 3): real worker processes, a real redis-server, faults injected on one machine,
and a ledger outside Redis that a checker compares with what Redis says happened. `python -m chaos.run`."""

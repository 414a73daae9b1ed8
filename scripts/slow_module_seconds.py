"""Refresh tests/slow_module_seconds.json from a slow pass's JUnit report (var/pytest-slow.xml, written by
scripts/pytest_passes.sh): the seconds each module took, setup and teardown included, which tests/conftest.py
uses to start the longest modules first. Run it after a `make test` on a quiet machine when the slow tests change.

    .venv/bin/python scripts/slow_module_seconds.py var/pytest-slow.xml
"""

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

WEIGHTS = Path(__file__).resolve().parent.parent / "tests" / "slow_module_seconds.json"


def module_seconds(report: Path) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is "tests.processes.test_x" or "tests.processes.test_x.TestClass"
        while module and not module[-1].startswith("test_"):
            module.pop()
        if module:
            seconds["/".join(module) + ".py"] += float(case.get("time", "0"))
    return {name: round(value, 1) for name, value in sorted(seconds.items(), key=lambda kv: -kv[1])}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    weights = module_seconds(Path(sys.argv[1]))
    WEIGHTS.write_text(json.dumps(weights, indent=2) + "\n")
    print(f"{len(weights)} modules, {sum(weights.values()):.0f} s in all, written to {WEIGHTS}")


if __name__ == "__main__":
    main()

"""checks.py - the pass/fail tally of the CPU-side Python tests of bench tools.

    from checks import check, finish
    check("name", condition, "what was seen")
    finish("tool")  # prints the tally, exits 1 on any failure
"""
import sys

_tally = {"passed": 0, "failed": 0}


def check(name, cond, detail=""):
    if cond:
        _tally["passed"] += 1
    else:
        _tally["failed"] += 1
        print(f"FAIL {name}: {detail}")


def finish(what):
    print(f"{what}: {_tally['passed']} checks passed, {_tally['failed']} failed")
    sys.exit(1 if _tally["failed"] else 0)

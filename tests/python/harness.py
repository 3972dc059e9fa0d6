"""A tiny runner for the Python tests (no pytest needed): every test_*
function of the calling module runs in definition order, or the names given on
the command line. Exit 0 when all pass, 1 on a failure, 77 (ctest's skip code)
when the module skips as a whole (print SKIPPED first)."""
import os
import sys
import time
import traceback

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
# The source tree's package, unless the test checks an installed one.
if os.environ.get("DCPTOPK_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))


class Skip(Exception):
    """Raised by a test that cannot run here (it counts as skipped)."""


def skip_module(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


def raises(exc, fn, *args, match=(), **kwargs):
    """Calls fn, expects `exc`, and every string of `match` in its message."""
    try:
        fn(*args, **kwargs)
    except exc as e:
        msg = str(e)
        for m in ([match] if isinstance(match, str) else match):
            assert m in msg, f"{exc.__name__} message lacks {m!r}: {msg}"
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exc.__name__}")


def run(namespace, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    tests = [(n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f)]
    if argv:
        tests = [(n, f) for n, f in tests if n in argv]
    passed = failed = skipped = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
        except Skip as e:
            skipped += 1
            print(f"SKIP {name}: {e}")
            continue
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
            continue
        passed += 1
        print(f"ok   {name} ({time.time() - t0:.2f} s)")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if failed:
        return 1
    return SKIP if passed == 0 and skipped else 0

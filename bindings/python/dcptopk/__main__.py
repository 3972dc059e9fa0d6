"""python -m dcptopk: the dcptopk CLI (warmup, configs, keys, cache, selftest,
devices), the executable installed with the package or built next to the
library."""
import os
import shutil
import sys


def find_cli():
    env = os.environ.get("DCPTOPK_CLI")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.path.join(here, "bin", "dcptopk"),
             os.path.join(here, "..", "..", "..", "build", "dcptopk")]
    lib = os.environ.get("DCPTOPK_LIBRARY")
    if lib:
        cands.append(os.path.join(os.path.dirname(lib), "dcptopk"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return shutil.which("dcptopk")


def main(argv=None):
    cli = find_cli()
    if not cli:
        sys.stderr.write("python -m dcptopk: no dcptopk CLI found (install the wheel, build the "
                         "project, or set DCPTOPK_CLI)\n")
        return 2
    argv = sys.argv[1:] if argv is None else argv
    # The library finds the NVRTC wheels beside its own package; a pip NVRTC
    # in another site folder (a venv over the system's torch) is reached
    # through the loader's path, the library's last place to look.
    from ._lib import nvrtc_candidates
    dirs = sorted({os.path.dirname(p) for p in nvrtc_candidates("libnvrtc.so.*")})
    if dirs:
        old = os.environ.get("LD_LIBRARY_PATH")
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(([old] if old else []) + dirs)
    os.execv(cli, [cli] + list(argv))


if __name__ == "__main__":
    sys.exit(main())

"""pyproject_check.py SOURCE_DIR - pyproject.toml agrees with the build: its
CMake floor is CMakeLists.txt's cmake_minimum_required, requires-python is
the floor py310_syntax.py checks, the CUDA extras name the real PyPI NVRTC
packages, pip builds the wheel layout (DCPTOPK_WHEEL), and the package
ships py.typed."""
import os
import re
import sys
import tomllib


def main():
    src = sys.argv[1]
    with open(os.path.join(src, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    with open(os.path.join(src, "CMakeLists.txt"), encoding="utf-8") as f:
        cml = f.read()
    errors = []
    floor = re.search(r"cmake_minimum_required\(VERSION ([0-9.]+)\)", cml).group(1)
    want = meta["tool"]["scikit-build"]["cmake"]["version"]
    if want != f">={floor}":
        errors.append(f"tool.scikit-build.cmake.version is {want!r}; CMakeLists.txt needs {floor}")
    rp = meta["project"]["requires-python"]
    if rp != ">=3.10":
        errors.append(f"requires-python is {rp!r}; expected '>=3.10' (torch's floor)")
    extras = meta["project"]["optional-dependencies"]
    for extra, pkg in (("cu13", "nvidia-cuda-nvrtc>="), ("cu12", "nvidia-cuda-nvrtc-cu12>=12.8")):
        if not any(d.startswith(pkg) for d in extras.get(extra, [])):
            errors.append(f"extra {extra} does not pull {pkg}...: {extras.get(extra)}")
    # pip install . / the sdist: one unversioned library, no development files.
    wheel_layout = meta["tool"]["scikit-build"]["cmake"]["define"].get("DCPTOPK_WHEEL")
    if wheel_layout != "ON":
        errors.append(f"tool.scikit-build.cmake.define.DCPTOPK_WHEEL is {wheel_layout!r}; expected 'ON'")
    pkgdir = os.path.join(src, meta["tool"]["scikit-build"]["wheel"]["packages"][0])
    if not os.path.isfile(os.path.join(pkgdir, "py.typed")):
        errors.append(f"{pkgdir}/py.typed is missing")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print("pyproject: consistent with CMakeLists.txt and the package")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

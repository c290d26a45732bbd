"""A wheel of the checkout installed in a fresh virtual environment outside it: what a pip user runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_wheel(folder: Path) -> Path:
    """A wheel of the checkout, built in `folder` without network (the installed setuptools)."""
    wheels = folder / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), "."]
    subprocess.run(build, cwd=ROOT, check=True)
    (wheel,) = wheels.glob("attnmt-*.whl")
    return wheel


def installed_from_wheel(folder: Path) -> Path:
    """A fresh virtual environment in `folder`, outside the checkout, with attnmt installed from a
    wheel built from the checkout; its python. The other packages come from the test's own
    environment, by a path line (which Python reads without that environment's editable attnmt),
    so nothing is downloaded. That the wheel's dependencies resolve is not what this checks."""
    import sysconfig
    import venv

    wheel = build_wheel(folder)
    environment = folder / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    query = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))"
    site = Path(json.loads(subprocess.run([python, "-c", query], capture_output=True, text=True, check=True).stdout))
    install = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "-q",
        "--target",
        str(site),
        str(wheel),
    ]
    subprocess.run(install, check=True)
    (site / "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python

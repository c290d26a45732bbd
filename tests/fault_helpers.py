"""Faults in tests: running attnmt in a child process whose files may not grow past a limit
(RLIMIT_FSIZE with SIGXFSZ ignored, so a write fails with EFBIG as a full disk fails it with
ENOSPC), and reading the one error line such a command must print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
TOO_LARGE = os.strerror(27)  # EFBIG: "File too large"

LIMITED = """
import resource, signal, sys
sys.modules["torch.utils.tensorboard"] = None  # TensorBoard's own event files are not under test
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
"""
CLI = LIMITED + "from attnmt.cli import main\nsys.exit(main(sys.argv[2:]))\n"


def run_child(code: str, limit: int, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", code, str(limit), *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def attnmt_limited(limit: int, *args: str) -> subprocess.CompletedProcess:
    """`attnmt ARGS` in a child process whose files may not grow past `limit` bytes."""
    return run_child(CLI, limit, *args)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one line on stderr of a command that failed as a user error."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnmt: error: "), result.stderr
    return lines[0].removeprefix("attnmt: error: ")

"""Running `attnmt.cli.main([...])` in a test: a command that must succeed, or one that must
fail as a user error (exit code 2, one `attnmt: error: ...` line, never a traceback)."""

from __future__ import annotations

from attnmt.cli import main


def run_ok(capsys, *args: str) -> str:
    """Standard output of a command that must succeed."""
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def run_error(capsys, *args: str) -> str:
    """The one stderr line of a command that must fail as a user error."""
    code = main(list(args))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("attnmt: error: ")]
    assert len(lines) == 1, err
    return lines[0]

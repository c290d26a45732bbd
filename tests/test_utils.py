"""attnmt.utils: atomic writes keep the old file on failure and give the new one ordinary permissions."""

import os

import pytest

from attnmt.utils import atomic_path, write_text_atomic


def test_an_atomic_write_gets_the_permissions_of_any_new_file(tmp_path):
    ordinary = tmp_path / "ordinary.txt"
    ordinary.write_text("x")
    written = tmp_path / "atomic.txt"
    write_text_atomic(written, "y")
    assert written.read_text() == "y"
    assert written.stat().st_mode & 0o777 == ordinary.stat().st_mode & 0o777


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "results.md"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["results.md"]

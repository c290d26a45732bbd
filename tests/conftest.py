"""Shared test settings and fixtures."""

from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tests use small tensors: one intra-op thread avoids oversubscribing the 2 CI cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def corpus_with_a_huge_line(tmp_path) -> Path:
    """A TSV corpus folder: 200 short training pairs and one whose source is a 200,000-token
    line (a crawled page without newlines); valid.tsv serves as validation and test."""
    folder = tmp_path / "huge-line-corpus"
    folder.mkdir()
    words = ["a", "b", "c"], ["x", "y", "z"]
    lines = [f"{' '.join(words[0][: 1 + i % 3])}\t{' '.join(words[1][: 1 + i % 3])}" for i in range(200)]
    lines.insert(100, f"{' w' * 200_000}\tx y")
    (folder / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "valid.tsv").write_text("a b\tx y\nc\tz\n", encoding="utf-8")
    return folder

"""Shared test settings and fixtures."""

import dataclasses
import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from attnmt.config import load_config
from attnmt.data import download
from tests.run_helpers import REVERSE_RUN

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: connection refused, never the internet


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


@pytest.fixture
def isolated(tmp_path, monkeypatch) -> Path:
    """A private empty cache, no $ATTNMT_DATA, and download URLs that cannot leave this machine;
    the cache folder. Modules that read corpora use it for every test."""
    monkeypatch.setenv("ATTNMT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNMT_DATA", raising=False)
    for name, remote in list(download.REMOTE_FILES.items()):
        local_url = f"{UNREACHABLE}/{remote.url.rsplit('/', 1)[-1]}"
        monkeypatch.setitem(download.REMOTE_FILES, name, dataclasses.replace(remote, url=local_url))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def reverse_run(tmp_path_factory) -> Path:
    """A run trained once per pytest session on the reverse task (300 steps, ~10 s on one core):
    what translation, evaluation and plotting tests read. Tests that damage it copy it first."""
    from attnmt.train import fit

    run_dir = tmp_path_factory.mktemp("reverse") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTNMT_CACHE", str(run_dir.parent / "cache"))
        fit(load_config(None, [*REVERSE_RUN, f"train.run_dir={run_dir}"]), log=lambda *args, **kwargs: None)
    return run_dir


@pytest.fixture
def copied_run(reverse_run, tmp_path) -> Path:
    """A copy of the reverse run that a test may damage."""
    return Path(shutil.copytree(reverse_run, tmp_path / "run", ignore=shutil.ignore_patterns("tensorboard")))


@pytest.fixture(scope="session")
def dot_reverse_run(tmp_path_factory) -> Path:
    """A second, smaller reverse-task run with dot attention, named "dot" (~4 s): for the tests
    that serve or compare two runs."""
    from attnmt.train import fit

    run_dir = tmp_path_factory.mktemp("reverse-dot") / "dot"
    overrides = [*REVERSE_RUN, "train.max_steps=150", "model.attention=dot", f"train.run_dir={run_dir}"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTNMT_CACHE", str(run_dir.parent / "cache"))
        fit(load_config(None, overrides), log=lambda *args, **kwargs: None)
    return run_dir


@pytest.fixture(scope="session")
def transformer_run(tmp_path_factory) -> Path:
    """A two-layer transformer trained once per pytest session on the reverse task (500 steps,
    ~17 s on one core), named "transformer": what the tests of the transformer family's commands,
    heads and explorer read. Tests that damage it copy it first."""
    from attnmt.train import fit
    from tests.run_helpers import TRANSFORMER_RUN

    run_dir = tmp_path_factory.mktemp("reverse-transformer") / "transformer"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTNMT_CACHE", str(run_dir.parent / "cache"))
        fit(load_config(None, [*TRANSFORMER_RUN, f"train.run_dir={run_dir}"]), log=lambda *args, **kwargs: None)
    return run_dir


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, filled by `build(folder)` once per pytest session: under pytest-xdist
    the first worker to ask builds it while the others wait on a lock, then all read it. A
    session-scoped fixture alone is built again by every worker, and again whenever the workers'
    test order switches its parameter. The folder must be read only to its users."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "built-once"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if `build` fails
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed part way
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session", params=["bahdanau-additive", "luong-general-2-layers-lstm"])
def tiny(request, tmp_path_factory):
    """A tiny reverse-task run of one decoder (40 steps) with a shortlist of the specials and one
    token (`tiny / "run"`), and its export, made after the shortlist (`tiny / "export"`): what
    the shortlist and steering tests decode with every engine, built once a session. Read only."""
    return built_once(tmp_path_factory, f"tiny-{request.param}", lambda folder: _build_tiny(folder, request.param))


def _build_tiny(folder: Path, name: str) -> None:
    from attnmt.export import export_onnx
    from attnmt.loading import ModelSpec, load
    from attnmt.shortlist import Shortlist, save, vocab_digest
    from tests.run_helpers import MODELS, train_tiny

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTNMT_CACHE", str(folder / "cache"))
        train_tiny(folder / "run", MODELS[name])
    codec = load(ModelSpec(folder / "run", device="cpu")).codec
    digests = vocab_digest(codec.src_vocab), vocab_digest(codec.tgt_vocab)
    save(Shortlist(torch.full((len(codec.src_vocab), 1), -1), torch.tensor([4]), *digests), folder / "run")
    export_onnx(folder / "run", folder / "export")

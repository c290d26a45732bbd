"""What a pip install carries: the shipped configs (the same bytes as configs/), `attnmt configs`,
`attnmt demo`, and a wheel that holds every tracked file of the package and runs outside the
checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from attnmt import __version__
from attnmt.shipped import config_names, config_text
from tests.cli_helpers import run_error, run_ok
from tests.data_helpers import SHARED_DATA
from tests.wheel_helpers import ROOT, build_wheel, installed_from_wheel

# a demo small enough for a test: the shipped config with a tiny model, three steps, 20 sentences
TINY_DEMO = [
    "train.max_steps=3",
    "train.valid_every=3",
    "train.max_minutes=null",
    "data.valid_size=20",
    "data.test_size=20",
    "data.spm_vocab_size=300",
    "model.embedding_size=16",
    "model.encoder_hidden=16",
    "model.decoder_hidden=32",
]
needs_tatoeba = pytest.mark.skipif(
    not (SHARED_DATA / "tatoeba-eng-fra" / "fra.txt.gz").is_file(), reason="no local Tatoeba copy (set ATTNMT_DATA)"
)


def test_the_shipped_configs_are_the_repositorys_byte_for_byte():
    repository = {path.stem: path for path in (ROOT / "configs").glob("*.yaml")}
    assert config_names() == sorted(repository)
    for name, path in repository.items():
        assert config_text(name) == path.read_text(encoding="utf-8"), f"attnmt/resources/configs/{name}.yaml"


def test_configs_lists_them_and_writes_one_out_to_edit(tmp_path, capsys):
    listed = run_ok(capsys, "configs")
    assert all(name in listed for name in config_names()) and "Multi30k" in listed
    assert run_ok(capsys, "configs", "demo") == (ROOT / "configs" / "demo.yaml").read_text(encoding="utf-8")
    out = tmp_path / "mine.yaml"
    run_ok(capsys, "configs", "multi30k-en-de", "--output", str(out))
    assert out.read_text(encoding="utf-8") == config_text("multi30k-en-de")
    assert run_error(capsys, "configs", "demo", "--output", str(out)) == (
        f"attnmt: error: --output: {out} exists; name another file or remove it"
    )
    assert run_error(capsys, "configs", "nope").startswith("attnmt: error: no shipped config 'nope'; the shipped")
    assert "--output goes with a NAME" in run_error(capsys, "configs", "--output", str(tmp_path / "x.yaml"))


@needs_tatoeba
def test_demo_trains_once_evaluates_and_translates_into_the_folder_given(tmp_path, capsys):
    settings = [item for override in TINY_DEMO for item in ("--set", override)]
    out = run_ok(capsys, "demo", "--dir", str(tmp_path), "--data-dir", str(SHARED_DATA), *settings)
    run = tmp_path / "runs" / "demo"
    assert (run / "checkpoints" / "index.json").is_file() and (run / "evaluation" / "evaluation.json").is_file()
    assert len(list((run / "attention").glob("*.png"))) >= 6 and "attention heatmaps:" in out
    stamp = (run / "checkpoints" / "index.json").stat().st_mtime_ns
    again = run_ok(capsys, "demo", "--dir", str(tmp_path), "--data-dir", str(SHARED_DATA))
    assert "is already trained" in again and (run / "checkpoints" / "index.json").stat().st_mtime_ns == stamp


def tracked_package_files() -> set[str]:
    listed = subprocess.run(["git", "ls-files", "attnmt"], cwd=ROOT, capture_output=True, text=True, check=True)
    return {line for line in listed.stdout.splitlines() if line}


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="the tracked files are read from a git checkout")
def test_the_wheel_and_the_sdist_hold_every_tracked_file_of_the_package(tmp_path):
    """Package data is declared so that a new static file cannot be forgotten: every file git
    tracks under attnmt/ is in the wheel, and the wheel holds nothing else of the package; the
    sdist (`python -m build --sdist`, as a release builds it) holds them too."""
    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        packaged = {name for name in wheel.namelist() if name.startswith("attnmt/")}
    tracked = tracked_package_files()
    assert tracked - packaged == set(), "tracked files the wheel lacks"
    assert packaged - tracked == set(), "files in the wheel that git does not track"
    sdist_dir = tmp_path / "sdist"
    command = [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(sdist_dir)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    (sdist,) = sdist_dir.glob("attnmt-*.tar.gz")
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert tracked - in_sdist == set(), "tracked files the sdist lacks"
    assert {"pyproject.toml", "README.md"} <= in_sdist


@needs_tatoeba
def test_the_installed_wheel_runs_the_demo_and_the_page_outside_the_checkout(tmp_path):
    python = installed_from_wheel(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    environment = {**os.environ, "ATTNMT_DATA": str(SHARED_DATA), "ATTNMT_CACHE": str(tmp_path / "cache")}
    environment.pop("PYTHONPATH", None)

    def attnmt(*arguments: str) -> str:
        done = subprocess.run([python, "-m", "attnmt", *arguments], cwd=work, env=environment, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        return done.stdout.decode()

    assert "demo" in attnmt("--help") and "tatoeba-eng-fra" in attnmt("configs")
    assert attnmt("--version").strip() == f"attnmt {__version__}", "a wheel has no commit to name"
    where = attnmt("configs", "demo")
    assert where == config_text("demo")
    attnmt("demo", *[item for override in TINY_DEMO for item in ("--set", override)])
    assert (work / "runs" / "demo" / "evaluation" / "evaluation.json").is_file()
    static = "(resources.files('attnmt.serve') / 'static').iterdir()"
    page = f"from importlib import resources; print(sorted(p.name for p in {static}))"
    served = subprocess.run([python, "-c", page], cwd=work, env=environment, capture_output=True, text=True, check=True)
    assert "index.html" in served.stdout
    attnmt("export", "runs/demo", "--format", "web", "--output", "site")
    assert (work / "site" / "index.html").is_file()
    imported = subprocess.run(
        [python, "-c", "import attnmt; print(attnmt.__file__)"],
        cwd=work,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert Path(imported.stdout.strip()).is_relative_to(tmp_path / "venv"), "attnmt from the wheel"


def test_version_names_the_commit_of_a_checkout(capsys):
    from attnmt import __version__
    from attnmt.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    printed = capsys.readouterr().out.strip()
    assert exited.value.code == 0 and printed.startswith(f"attnmt {__version__}")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if commit:  # a checkout: the commit it runs from
        assert f"(commit {commit[:12]}" in printed

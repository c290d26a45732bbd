"""Bad input at the command line: exit code 2 and one `attnmt: error: ...` line per problem.

Each case runs the real entry point, `attnmt.cli.main(["data", "stats", CONFIG, ...])`, in
this process; one runs `python -m attnmt` in a subprocess to see what a user sees. Every line
must name the file (with the line number where there is one) or the config key, and say what
was expected. No test reaches the network: download URLs point at 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from attnmt.cli import main
from attnmt.config import DataConfig, ModelConfig
from attnmt.data import corpora, download
from tests.data_helpers import put

ERROR = "attnmt: error: "


pytestmark = pytest.mark.usefixtures("isolated")


def config(tmp_path: Path, text: str = "data:\n  corpus: files\n  valid_size: 1\n  test_size: 1\n") -> str:
    return str(put(tmp_path / "cfg.yaml", text))


def stats_stderr(capsys, *args: str) -> list[str]:
    """Run `attnmt data stats ARGS` in this process; return its stderr lines after checking that
    it failed with exit code 2 and no traceback."""
    code = main(["data", "stats", *args])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert "Traceback" not in stderr and stderr.endswith("\n"), stderr
    return stderr.splitlines()


def errors(capsys, *args: str) -> list[str]:
    """The problems `attnmt data stats ARGS` reports: every stderr line is one `attnmt: error:` line."""
    lines = stats_stderr(capsys, *args)
    assert lines and all(line.startswith(ERROR) for line in lines), lines
    return [line.removeprefix(ERROR) for line in lines]


# --- the data files ----------------------------------------------------------------------


def test_missing_file(tmp_path, capsys):
    [line] = errors(capsys, config(tmp_path), "--set", f"data.train={tmp_path / 'nope'}")
    assert line.startswith(f"{tmp_path / 'nope.en'}: file not found (nor nope.en.gz); ")
    assert "data.train must be a path prefix, completed by .en or .en.gz" in line


def test_a_prefix_that_names_a_directory(tmp_path, capsys):
    folder = tmp_path / "corpus"
    folder.mkdir()
    [line] = errors(capsys, config(tmp_path), "--set", f"data.train={folder}")
    assert line.startswith(f"data.train: {folder} is a directory; give a path prefix such as {folder / 'train'}")


def test_a_min_freq_above_every_count_is_named_with_the_largest_count(tmp_path, capsys):
    put(tmp_path / "train.en", "a b\na c\nb d\nd e\n")
    put(tmp_path / "train.fr", "x\ny\nz\nw\n")
    settings = ["--set", f"data.train={tmp_path / 'train'}", "--set", "data.min_freq=9"]
    [line] = errors(capsys, config(tmp_path), *settings)
    assert re.fullmatch(
        r"data\.min_freq: 9 leaves the source vocabulary without a single token "
        r"\(the most frequent training token occurs [12] times\); lower data\.min_freq",
        line,
    )


def test_line_counts_differ(tmp_path, capsys):
    src, tgt = put(tmp_path / "train.en", "a\nb\nc\n"), put(tmp_path / "train.fr", "x\ny\n")
    [line] = errors(capsys, config(tmp_path), "--set", f"data.train={tmp_path / 'train'}")
    assert f"{src} has 3 lines but {tgt} has 2" in line and "must have the same number of lines" in line


def test_empty_line(tmp_path, capsys):
    put(tmp_path / "train.en", "a\nb\nc\n")
    tgt = put(tmp_path / "train.fr", "x\n  \nz\n")
    [line] = errors(capsys, config(tmp_path), "--set", f"data.train={tmp_path / 'train'}")
    assert line == f"{tgt}:2: empty line; expected one sentence per line"


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_invalid_utf8(tmp_path, capsys, suffix):
    put(tmp_path / "train.en", "a\nb\nc\n")
    body = "é\nb\n".encode() + b"c \xff\n"
    tgt = put(tmp_path / f"train.fr{suffix}", body)  # gzipped by its name
    [line] = errors(capsys, config(tmp_path), "--set", f"data.train={tmp_path / 'train'}")
    assert line.startswith(f"{tgt}:3: not valid UTF-8")


def test_tsv_line_without_tab(tmp_path, capsys):
    tsv = put(tmp_path / "pairs.tsv", "a\tb\nc\td\nno tab here\n")
    [line] = errors(capsys, config(tmp_path), "--set", "data.corpus=tsv", "--set", f"data.train={tsv}")
    assert line == f"{tsv}:3: no tab; expected source<TAB>target"


def test_unreadable_file(tmp_path, capsys):
    # A symlink loop fails to open even for root, unlike a file without read permission.
    loop = tmp_path / "pairs.tsv"
    loop.symlink_to(loop)
    [line] = errors(capsys, config(tmp_path), "--set", "data.corpus=tsv", "--set", f"data.train={loop}")
    assert line.startswith(f"{loop}: cannot read (") and line.endswith("); expected a readable text file")


# --- downloads ---------------------------------------------------------------------------


@pytest.fixture
def file_server(tmp_path):
    """Serves the folder tmp_path/served on 127.0.0.1; yields (folder, base URL)."""

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # the default writes each request to stderr
            pass

    folder = tmp_path / "served"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=folder))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("corpus", "name"),
    [("tatoeba-eng-fra", "tatoeba-eng-fra/fra.txt.gz"), ("multi30k", "multi30k/train.en.gz")],
)
def test_checksum_mismatch_during_download(tmp_path, capsys, monkeypatch, isolated, file_server, corpus, name):
    folder, base_url = file_server
    wrong = put(folder / "wrong-file", b"not the corpus\n").read_bytes()
    url = f"{base_url}/wrong-file"
    remote = dataclasses.replace(download.REMOTE_FILES[name], url=url)
    monkeypatch.setitem(download.REMOTE_FILES, name, remote)
    destination = isolated / name
    notice, *rest = stats_stderr(capsys, config(tmp_path, f"data:\n  corpus: {corpus}\n"))
    assert notice == f"attnmt: downloading {url} -> {destination}"
    [line] = rest
    assert line.startswith(f"{ERROR}download of {url} has the wrong checksum: ")
    got = hashlib.new(remote.algorithm, wrong).hexdigest()
    assert f"expected {remote.algorithm} {remote.checksum}, got {got}; nothing was saved" in line
    assert f"put it at {destination}" in line
    assert [path for path in isolated.rglob("*") if path.is_file()] == []  # no partial or temporary file


# --- the config --------------------------------------------------------------------------


def test_unknown_corpus(tmp_path, capsys):
    [line] = errors(capsys, config(tmp_path), "--set", "data.corpus=europarl")
    assert line == f"data.corpus: unknown corpus 'europarl'; known: {', '.join(corpora.KNOWN_CORPORA)}"


@pytest.mark.parametrize(
    ("corpus", "src", "tgt", "known"),
    [
        ("tatoeba-eng-fra", "en", "de", "en-fr, fr-en"),
        ("multi30k", "en", "ja", "en-de, en-fr, en-cs, de-en, de-fr, de-cs, fr-en, fr-de, fr-cs, cs-en, cs-de, cs-fr"),
    ],
)
def test_unknown_language_pair(tmp_path, capsys, corpus, src, tgt, known):
    overrides = [f"data.corpus={corpus}", f"data.src_lang={src}", f"data.tgt_lang={tgt}"]
    [line] = errors(capsys, config(tmp_path), *[arg for item in overrides for arg in ("--set", item)])
    assert line == f"data.src_lang/tgt_lang: {corpus} has no {src}-{tgt} pair; known pairs: {known}"


def test_unknown_config_key(tmp_path, capsys):
    path = config(tmp_path, "data:\n  corpsu: files\n")
    [line] = errors(capsys, path)
    valid = ", ".join(sorted(DataConfig.model_fields))
    assert line == f"{path}: data.corpsu: unknown key (did you mean 'corpus'?); valid keys: {valid}"


def test_every_config_problem_is_reported_once(tmp_path, capsys):
    path = config(tmp_path, "data:\n  corpsu: files\nmodel:\n  hiden: 3\ntrain:\n  lr: -1\nevaluate: {}\n")
    lines = errors(capsys, path, "--set", "decode.beam=3")
    source = f"{path} with --set: "
    assert all(line.startswith(source) for line in lines), lines
    problems = sorted(line.removeprefix(source) for line in lines)
    assert [problem.split(":")[0] for problem in problems] == [
        "data.corpsu",
        "decode.beam",
        "evaluate",
        "model.hiden",
        "train.lr",
    ]
    assert f"model.hiden: unknown key; valid keys: {', '.join(sorted(ModelConfig.model_fields))}" in problems
    assert "valid keys: data, decode, model, train" in problems[2]
    assert problems[4] == "train.lr: Input should be greater than 0 (got -1)"


# --- what the user sees ------------------------------------------------------------------


def test_json_output_that_cannot_be_written(tmp_path, capsys):
    put(tmp_path / "train.en", "".join(f"s{i}\n" for i in range(6)))
    put(tmp_path / "train.fr", "".join(f"t{i}\n" for i in range(6)))
    folder = tmp_path / "a-folder"
    folder.mkdir()
    [line] = errors(capsys, config(tmp_path), "--set", f"data.train={tmp_path / 'train'}", "--json", str(folder))
    assert line.startswith(f"--json {folder}: cannot write (")
    assert list(tmp_path.glob(".a-folder*")) == []  # the temporary file is gone


def test_a_real_process_prints_one_line_and_no_traceback(tmp_path):
    src, tgt = put(tmp_path / "train.en", "a\nb\nc\n"), put(tmp_path / "train.fr", "x\ny\n")
    command = ["data", "stats", config(tmp_path), "--set", f"data.train={tmp_path / 'train'}"]
    result = subprocess.run(
        [sys.executable, "-m", "attnmt", *command],
        env={**os.environ, "ATTNMT_CACHE": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"{ERROR}{src} has 3 lines but {tgt} has 2; parallel files must have the same number of lines\n"
    )

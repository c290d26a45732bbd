"""`attnmt distill`: the teacher's search written chunk by chunk, resumed after a kill to the same
bytes, kept whole through a full disk, refused when it no longer matches, and read by a student."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnmt import distill as distill_module
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data.corpora import load_corpus
from attnmt.data.distillation_record import record_path
from attnmt.distill import distill, distinct_sources
from attnmt.loading import ModelSpec, load
from attnmt.train import fit
from attnmt.utils import UserError
from tests.cli_helpers import run_error, run_ok
from tests.fault_helpers import TOO_LARGE, attnmt_limited, error_line

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def teacher(reverse_run):
    translator = load(ModelSpec(reverse_run, device="cpu"))
    return translator, distinct_sources(load_corpus(translator.config.data).train)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_the_corpus_is_each_distinct_source_and_the_teachers_search_of_it_chunk_by_chunk(
    teacher, tmp_path, monkeypatch
):
    translator, sources = teacher
    assert len(sources) == len(set(sources)) > 1000
    monkeypatch.setattr(distill_module, "CHUNK", 700)
    options = translator.search_options(beam_size=3, n_best=1)
    done = distill(translator, sources, tmp_path / "out" / "train", options, say=lambda _: None)
    assert (done.source, done.target) == (tmp_path / "out" / "train.en", tmp_path / "out" / "train.fr")
    assert lines(done.source) == sources
    expected = []
    for first in range(0, len(sources), 700):  # each chunk one window of the search, as distill runs it
        expected += [t.text for t in translator.translate(sources[first : first + 700], options)]
    assert lines(done.target) == expected
    record = json.loads(record_path(tmp_path / "out" / "train").read_text())
    assert record["complete"] and record["lines_done"] == len(sources)
    assert record["search"]["beam_size"] == 3 and record["teacher"] == [str(translator.checkpoint.resolve())]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["train.distill.json", "train.en", "train.fr"]
    again = distill(translator, sources, tmp_path / "out" / "train", options, say=lambda _: None)
    assert again.resumed_from == len(sources) and again.seconds == 0.0  # finished: nothing translated again


@pytest.fixture(scope="module")
def whole(reverse_run, tmp_path_factory) -> Path:
    """The prefix of an uninterrupted distillation with beam 2, what the interrupted ones must equal."""
    prefix = tmp_path_factory.mktemp("whole") / "train"
    assert main(["distill", str(reverse_run), "--beam", "2", "--output", str(prefix)]) == 0
    return prefix


def start_distilling(run_dir: Path, prefix: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "attnmt", "distill", str(run_dir), "--beam", "2", "--output", str(prefix)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_a_distillation_killed_mid_chunk_resumes_to_the_bytes_of_an_uninterrupted_one(
    reverse_run, whole, tmp_path, capsys
):
    """Killed (SIGKILL) once the first chunk is committed, and a torn line added to each partial
    file as a kill inside a write would leave: the rerun cuts back and ends byte-identical."""
    killed = tmp_path / "killed" / "train"
    child = start_distilling(reverse_run, killed)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and child.poll() is None:
        try:
            record = json.loads(record_path(killed).read_text())
        except (OSError, ValueError):
            record = {}
        if record.get("lines_done", 0) >= 1000:
            break
        time.sleep(0.01)
    assert child.poll() is None, child.stderr.read().decode()
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not (tmp_path / "killed" / "train.fr").exists()  # no final name before the last line
    for lang in ("en", "fr"):
        with open(tmp_path / "killed" / f"train.{lang}.partial", "a", encoding="utf-8") as partial:
            partial.write("a torn li")
    output = run_ok(capsys, "distill", str(reverse_run), "--beam", "2", "--output", str(killed))
    assert "resuming after line" in output
    for lang in ("en", "fr"):
        assert (killed.parent / f"train.{lang}").read_bytes() == (whole.parent / f"train.{lang}").read_bytes()
    assert sorted(path.name for path in killed.parent.iterdir()) == ["train.distill.json", "train.en", "train.fr"]


def test_a_full_disk_while_distilling_is_one_line_keeping_the_committed_chunks_and_a_rerun_goes_on(
    reverse_run, whole, tmp_path, capsys
):
    full = tmp_path / "full" / "train"
    first_chunk = max(
        len("".join(line + "\n" for line in lines(Path(f"{whole}.{lang}"))[:1000]).encode()) for lang in ("en", "fr")
    )
    result = attnmt_limited(first_chunk + 50, "distill", str(reverse_run), "--beam", "2", "--output", str(full))
    partial = full.parent / "train.en.partial"
    assert error_line(result) == (
        f"{partial}: cannot write ({TOO_LARGE}); the lines distilled before are kept; rerun the same command to go on"
    )
    assert json.loads(record_path(full).read_text())["lines_done"] == 1000
    run_ok(capsys, "distill", str(reverse_run), "--beam", "2", "--output", str(full))
    for lang in ("en", "fr"):
        assert Path(f"{full}.{lang}").read_bytes() == Path(f"{whole}.{lang}").read_bytes()


def interrupted(teacher, prefix: Path, monkeypatch) -> None:
    """A distillation in chunks of 300 (for the rest of the test) whose third chunk fails."""
    translator, sources = teacher
    monkeypatch.setattr(distill_module, "CHUNK", 300)
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return type(translator).translate(translator, *args, **kwargs)

    translator.translate = failing
    try:
        with pytest.raises(KeyboardInterrupt):
            distill(translator, sources, prefix, translator.search_options(beam_size=2, n_best=1), say=lambda _: None)
    finally:
        del translator.translate


def test_a_partial_distillation_is_refused_when_the_search_or_its_sources_differ(teacher, tmp_path, monkeypatch):
    translator, sources = teacher
    prefix = tmp_path / "train"
    interrupted(teacher, prefix, monkeypatch)
    other_search = translator.search_options(beam_size=4, n_best=1)
    with pytest.raises(UserError, match=r"train.distill.json: a distillation with another search is there"):
        distill(translator, sources, prefix, other_search, say=lambda _: None)
    with pytest.raises(UserError, match=r"a distillation with another sources is there"):
        distill(translator, sources[:-1], prefix, translator.search_options(beam_size=2, n_best=1))
    partial = tmp_path / "train.en.partial"
    written = lines(partial)
    assert written[5] != written[6]
    written[5], written[6] = written[6], written[5]  # the same bytes, in another order
    partial.write_text("".join(line + "\n" for line in written))
    with pytest.raises(UserError, match=r"train.en.partial: its 600 lines are not the first 600 training sources"):
        distill(translator, sources, prefix, translator.search_options(beam_size=2, n_best=1))
    partial.write_text("short\n")
    with pytest.raises(UserError, match=r"holds less than the 600 lines train.distill.json counts"):
        distill(translator, sources, prefix, translator.search_options(beam_size=2, n_best=1))


def test_files_that_no_record_explains_are_never_overwritten(reverse_run, tmp_path, capsys):
    (tmp_path / "train.fr").write_text("someone's corpus\n")
    line = run_error(capsys, "distill", str(reverse_run), "--output", str(tmp_path / "train"))
    assert line == (
        f"attnmt: error: {tmp_path / 'train.fr'}: exists and no distillation record (train.distill.json) says what "
        "wrote it; remove it or choose another --output"
    )
    assert (tmp_path / "train.fr").read_text() == "someone's corpus\n"


STUDENT = [
    "data.corpus=files",
    "data.valid_size=50",
    "data.test_size=50",
    "data.batch_tokens=300",
    "model.embedding_size=16",
    "model.encoder_hidden=16",
    "model.decoder_hidden=32",
    "train.max_steps=4",
    "train.valid_every=4",
    "train.valid_bleu_sentences=5",
    "train.device=cpu",
]


def test_a_smaller_student_trains_on_the_distilled_corpus_in_its_teachers_direction_only(
    teacher, tmp_path, monkeypatch
):
    translator, sources = teacher
    prefix = tmp_path / "distilled" / "train"
    student = [*STUDENT, f"data.train={prefix}", f"train.run_dir={tmp_path / 'student'}"]
    interrupted(teacher, prefix, monkeypatch)
    with pytest.raises(UserError, match=r"its distillation has not finished \(600 of [\d,]+ lines\); rerun"):
        load_corpus(load_config(None, student).data)
    distill(translator, sources, prefix, translator.search_options(beam_size=2, n_best=1), say=lambda _: None)
    splits = load_corpus(load_config(None, student).data)
    assert len(splits.train) + len(splits.valid) + len(splits.test) == len(sources)
    summary = fit(load_config(None, student), log=lambda *_: None)
    assert summary["steps"] == 4
    assert load_config(None, student).model.decoder_hidden < translator.config.model.decoder_hidden

    reversed_direction = [*student, "data.src_lang=fr", "data.tgt_lang=en"]
    with pytest.raises(UserError, match=r"distilled en->fr, but the student translates fr->en"):
        load_corpus(load_config(None, reversed_direction).data)
    target = Path(f"{prefix}.fr")
    target.write_text("".join(line + "\n" for line in lines(target)[:-1]))
    with pytest.raises(UserError, match=r"parallel files must have the same number of lines"):
        load_corpus(load_config(None, student).data)


def test_an_output_folder_that_cannot_be_made_is_one_line(reverse_run, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    line = run_error(capsys, "distill", str(reverse_run), "--output", str(blocker / "train"))
    assert line.startswith(f"attnmt: error: {blocker}: cannot create the output folder (")

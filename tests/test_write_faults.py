"""A write that fails for lack of room is one line naming the file and what is intact, exit code
2, and leaves every complete file whole; finished files are synced to the disk.

Each write site runs in a child process under a real file-size limit (RLIMIT_FSIZE, with
SIGXFSZ ignored so that the write fails with EFBIG instead of killing the process): the same
error a full disk gives (ENOSPC), from the operating system, not from a patched function.
"""

import json
import os
from pathlib import Path

import pytest
from torch import nn

from attnmt import checkpoint
from attnmt.checkpoint import CheckpointIndex, load_trained, read_index, resolve_checkpoint, save_checkpoint
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.runlog import read_metrics
from attnmt.train import fit
from attnmt.utils import UserError
from tests.fault_helpers import LIMITED, TOO_LARGE, attnmt_limited, error_line, run_child

resource = pytest.importorskip("resource")  # POSIX only

TINY = [
    "data.corpus=reverse",
    "data.synthetic_size=200",
    "data.synthetic_max_len=6",
    "data.valid_size=20",
    "data.test_size=20",
    "data.batch_tokens=200",
    "model.embedding_size=8",
    "model.encoder_hidden=8",
    "model.decoder_hidden=16",
    "train.log_every=1",
    "train.valid_every=2",
    "train.valid_bleu_sentences=5",
    "train.threads=1",
    "train.device=cpu",
]
LIMIT = 10_000  # above the config, vocabularies and log of a tiny run; below its weights (about 22 kB)


def train_run(run_dir: Path, *overrides: str) -> Path:
    fit(load_config(None, [*TINY, f"train.run_dir={run_dir}", *overrides]), log=lambda *_: None)
    return run_dir


def logged_steps(run_dir: Path) -> list[int]:
    return [record["step"] for record in read_metrics(run_dir) if "train_loss" in record]


def hidden(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("."))


def test_a_full_disk_during_a_checkpoint_is_one_line_and_the_run_resumes_from_the_last_complete_one(tmp_path):
    run_dir = train_run(tmp_path / "run", "train.max_steps=4")  # checkpoints at steps 2 and 4
    index = read_index(run_dir)
    result = attnmt_limited(LIMIT, "train", "--resume", str(run_dir), "--set", "train.max_steps=8")
    assert error_line(result) == (
        f"{run_dir}/checkpoints/step-0000006: cannot write model.safetensors ({TOO_LARGE}); the last complete "
        f"checkpoint step-0000004 is intact; free space and resume with: attnmt train --resume {run_dir}"
    )
    assert read_index(run_dir) == index
    assert hidden(run_dir / "checkpoints") == [] and not (run_dir / "checkpoints" / "step-0000006").exists()
    assert load_trained(run_dir, "last").checkpoint.name == "step-0000004"
    assert main(["train", "--resume", str(run_dir), "--set", "train.max_steps=8"]) == 0
    assert read_index(run_dir).last == "step-0000008"
    assert logged_steps(run_dir) == list(range(1, 9))


def test_the_first_checkpoint_failing_says_that_none_is_complete(tmp_path):
    run_dir = tmp_path / "run"
    overrides = [
        arg for setting in [*TINY, f"train.run_dir={run_dir}", "train.max_steps=4"] for arg in ("--set", setting)
    ]
    line = error_line(attnmt_limited(LIMIT, "train", *overrides))
    assert line.endswith(
        f"cannot write model.safetensors ({TOO_LARGE}); no checkpoint is complete yet; free space and train again"
    )
    assert read_index(run_dir) == CheckpointIndex() and hidden(run_dir / "checkpoints") == []


def test_a_full_disk_while_logging_leaves_whole_records_and_the_run_resumes(tmp_path):
    run_dir = train_run(tmp_path / "run", "train.max_steps=16")  # a log longer than the config (1.6 kB)
    log = run_dir / "metrics.jsonl"
    limit = log.stat().st_size + 200  # room for one more record (about 140 bytes), not two
    assert limit > (run_dir / "config.yaml").stat().st_size
    no_validation = ["--set", "train.max_steps=100", "--set", "train.valid_every=1000"]
    line = error_line(attnmt_limited(limit, "train", "--resume", str(run_dir), *no_validation))
    assert line == (
        f"{log}: cannot write a record ({TOO_LARGE}); the last complete checkpoint step-0000016 is intact; "
        f"free space and resume with: attnmt train --resume {run_dir}"
    )
    assert logged_steps(run_dir) == list(range(1, 18))  # the record that did not fit is not there, not even torn
    assert log.read_bytes().endswith(b"}\n")
    assert main(["train", "--resume", str(run_dir), "--set", "train.max_steps=20", "--set", "train.valid_every=2"]) == 0
    assert logged_steps(run_dir) == list(range(1, 21))


def test_a_resume_drops_a_torn_last_line_with_one_log_line_and_a_torn_middle_line_is_an_error(tmp_path):
    run_dir = train_run(tmp_path / "run", "train.max_steps=4")
    log = run_dir / "metrics.jsonl"
    whole = log.read_text()
    log.write_text(whole + '{"step": 5, "train_lo')  # what a full disk or a power loss leaves
    assert logged_steps(run_dir) == [1, 2, 3, 4]  # readers (plot curves, sweeps) skip it too
    lines = []
    fit(load_config(None, [*TINY, f"train.run_dir={run_dir}", "train.max_steps=6"]), resume=True, log=lines.append)
    torn = [line for line in lines if "torn" in line]
    assert torn == [f"{log}:{len(whole.splitlines()) + 1}: dropped a torn last line (a write cut short)"]
    assert logged_steps(run_dir) == list(range(1, 7))
    records = log.read_text().splitlines()
    log.write_text("\n".join([*records[:2], '{"step": 2, "train_lo', *records[2:]]) + "\n")
    with pytest.raises(UserError, match=r"metrics.jsonl:3: not a JSON record with a step \(Unterminated string"):
        read_metrics(run_dir)


def test_a_full_disk_while_writing_the_index_leaves_the_previous_index(tmp_path):
    run_dir = tmp_path / "run"
    save_checkpoint(run_dir, 1, nn.Linear(3, 2), {"step": 1}, {}, score=1.0)
    index = run_dir / "checkpoints" / "index.json"
    before = index.read_bytes()
    write_index = LIMITED + (
        "from pathlib import Path\n"
        "from attnmt.checkpoint import CheckpointIndex, _write_index\n"
        "from attnmt.utils import UserError\n"
        "try:\n"
        "    _write_index(Path(sys.argv[2]), CheckpointIndex('step-0000002', 'step-0000002', 2.0, ('step-0000002',)))\n"
        "except UserError as error:\n"
        "    sys.exit(str(error))\n"
    )
    result = run_child(write_index, len(before) // 2, str(run_dir))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"{index}: cannot write ({TOO_LARGE}); the previous version is untouched"
    assert (run_dir / "checkpoints" / "index.json").read_bytes() == before
    assert hidden(run_dir / "checkpoints") == []


def test_a_full_disk_while_translating_into_a_file_keeps_the_previous_file(reverse_run, tmp_path):
    source, output = tmp_path / "source.txt", tmp_path / "out.txt"
    source.write_text("".join(f"{' '.join('3142' * 2)}\n" for _ in range(50)))
    output.write_text("previous translations\n")
    result = attnmt_limited(100, "translate", str(reverse_run), "--input", str(source), "--output", str(output))
    assert error_line(result) == f"{output}: cannot write ({TOO_LARGE}); the previous version is untouched"
    assert output.read_text() == "previous translations\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.txt", "source.txt"]


def test_a_full_disk_while_averaging_keeps_the_previous_average(copied_run, capsys):
    assert main(["average", str(copied_run), "--last", "2"]) == 0
    averaged = copied_run / "checkpoints" / "averaged"
    before = {path.name: path.read_bytes() for path in averaged.iterdir()}
    line = error_line(attnmt_limited(LIMIT, "average", str(copied_run), "--last", "2"))
    assert line == f"{averaged}: cannot write model.safetensors ({TOO_LARGE}); the previous version is untouched"
    assert {path.name: path.read_bytes() for path in averaged.iterdir()} == before
    assert hidden(copied_run / "checkpoints") == []


def test_a_full_disk_while_writing_evaluation_results_is_one_line(reverse_run, tmp_path):
    output = tmp_path / "evaluation"
    result = attnmt_limited(500, "evaluate", str(reverse_run), "--bootstrap", "10", "--output-dir", str(output))
    line = error_line(result)
    assert (
        line == f"--output-dir: {output}/hypotheses-1.txt: cannot write ({TOO_LARGE}); nothing was left under that name"
    )
    assert list(output.iterdir()) == []


def test_a_full_disk_while_exporting_keeps_the_previous_export(reverse_run, tmp_path):
    pytest.importorskip("onnxscript")
    output = tmp_path / "export"
    output.mkdir()
    (output / "manifest.json").write_text(json.dumps({"format": 1, "files": {}}))  # an older export
    line = error_line(attnmt_limited(LIMIT, "export", str(reverse_run), "--output", str(output)))
    assert line == f"{output}: cannot write encoder.onnx ({TOO_LARGE}); the previous version is untouched"
    assert [path.name for path in output.iterdir()] == ["manifest.json"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["export"]


def test_a_checkpoint_and_its_index_are_synced_to_the_disk_before_the_save_returns(tmp_path, monkeypatch):
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("names the synced files through /proc")
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    save_checkpoint(tmp_path, 1, nn.Linear(3, 2), {"step": 1}, {}, score=1.0)
    folder = tmp_path / "checkpoints"
    staged = [Path(path) for path in synced if Path(path).parent.name.startswith(".step-0000001.")]
    assert sorted(path.name for path in staged) == sorted(
        [checkpoint.WEIGHTS, checkpoint.TRAINER_STATE, checkpoint.META]
    )
    after_files = synced[synced.index(str(staged[-1])) + 1 :]
    assert str(staged[0].parent) in after_files  # the folder holding them
    index_tmp = next(path for path in after_files if Path(path).name.startswith(".index.json."))
    later = after_files[after_files.index(index_tmp) + 1 :]
    # the checkpoint's rename is synced before the index is written, the index's rename after
    assert str(folder) in after_files[: after_files.index(index_tmp)] and later == [str(folder)]
    assert resolve_checkpoint(tmp_path).name == "step-0000001"


def test_the_fsync_benchmark_writes_its_raw_result_and_removes_its_run(tmp_path, capsys):
    from benchmarks import fsync

    path = tmp_path / "fsync.json"
    assert fsync.main(["--repeats", "1", "--folder", str(tmp_path), "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    assert result["command"] == f"python -m benchmarks.fsync --repeats 1 --folder {tmp_path} --json {path}"
    assert [len(result["seconds"][kind]["values"]) for kind in ("fsync", "no_fsync")] == [1, 1]
    assert result["parameters"] > 9_000_000 and result["machine"]["torch"] and result["file_system"]
    assert "with fsync" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == [path]

"""The shell scripts that train and evaluate the study tables, driven through a stand-in for attnmt.

Each script runs its attnmt commands through $ATTNMT, so a stand-in that records its arguments
(and makes the run folder a finished training would leave) shows what a script asks of attnmt
without training anything.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STAND_IN = """
import json, sys
from pathlib import Path
with open(sys.argv[1], "a", encoding="utf-8") as log:
    log.write(json.dumps(sys.argv[2:]) + "\\n")
arguments = sys.argv[2:]
if arguments[0] == "train" and "--resume" not in arguments:
    run = Path(next(item.split("=", 1)[1] for item in arguments if item.startswith("train.run_dir=")))
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "index.json").write_text("{}", encoding="utf-8")
print("done")
"""


def run_script(script: str, tmp_path: Path, **settings: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """`scripts/SCRIPT` from the checkout with `settings` in its environment and attnmt stood in;
    the process and every attnmt command the stand-in has recorded in `tmp_path`, in order."""
    stand_in, log = tmp_path / "attnmt_stand_in.py", tmp_path / "commands.jsonl"
    stand_in.write_text(STAND_IN, encoding="utf-8")
    # the pace probe times a 13M-parameter model for seconds a run: tests/test_pace.py tests it
    environment = {**os.environ, "ATTNMT": f"{sys.executable} {stand_in} {log}", "PACE_PROBE": "0", **settings}
    script_path, arguments = ROOT / "scripts" / script.split()[0], script.split()[1:]
    done = subprocess.run(
        ["bash", str(script_path), *arguments], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    commands = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    return done, commands


def test_distillation_teachers_are_the_tables_runs_when_a_table_is_named(tmp_path):
    table, runs = tmp_path / "table", tmp_path / "distill"
    settings = {"TABLE": str(table), "SEEDS": "1 2", "PHASES": "teachers", "SET": "train.max_steps=20"}

    done, commands = run_script(f"distillation.sh {runs}", tmp_path, **settings)
    assert done.returncode == 0, done.stderr
    trained = [command for command in commands if command[0] == "train"]
    assert [command[1] for command in trained] == ["configs/multi30k-en-de-luong.yaml"] * 2
    for seed, command in zip((1, 2), trained, strict=True):
        run = table / f"multi30k-en-de-luong-s{seed}"
        assert f"train.seed={seed}" in command and f"train.run_dir={run}" in command
        assert "train.max_steps=20" in command  # SET reaches the table's training
        link = runs / f"teacher-s{seed}"
        assert link.is_symlink() and not Path(os.readlink(link)).is_absolute() and link.resolve() == run.resolve()

    before = len(commands)
    again, commands = run_script(f"distillation.sh {runs}", tmp_path, **settings)  # resumes, never trains anew
    assert again.returncode == 0, again.stderr
    resumed = [command for command in commands[before:] if command[0] == "train"]
    assert [command[:2] for command in resumed] == [["train", "--resume"]] * 2


def test_distillation_without_a_table_trains_its_own_teachers(tmp_path):
    runs = tmp_path / "distill"
    done, commands = run_script(f"distillation.sh {runs}", tmp_path, SEEDS="3", PHASES="teachers")
    assert done.returncode == 0, done.stderr
    own = ["train", "configs/multi30k-en-de-luong.yaml", "--set", f"train.run_dir={runs}/teacher-s3"]
    assert [command for command in commands if command[0] == "train"] == [[*own, "--set", "train.seed=3"]]
    assert not (runs / "teacher-s3").is_symlink()


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"CONFIG": "mine/recipe.yaml"}, "TABLE needs a CONFIG of configs/"),
        ({}, "is a teacher trained here, not the table's run"),
    ],
)
def test_distillation_with_a_table_it_cannot_use_is_one_line_and_exit_2(tmp_path, settings, said):
    runs = tmp_path / "distill"
    (runs / "teacher-s1").mkdir(parents=True)  # a teacher trained here before
    settings = {"TABLE": str(tmp_path / "table"), "SEEDS": "1", "PHASES": "teachers", **settings}
    done, commands = run_script(f"distillation.sh {runs}", tmp_path, **settings)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr
    assert commands == [] and not (runs / "teacher-s1").is_symlink()


@pytest.mark.parametrize(
    ("peer_seeds", "peer"), [(None, ["--peer", "opennmt-py", "--peer-seeds", "1,2"]), ("none", [])]
)
def test_distillation_table_has_opennmt_py_unless_its_seeds_are_none(tmp_path, peer_seeds, peer):
    # The table's phase calls python itself (to pick the best teacher, then benchmarks.pareto): a
    # python first on PATH that names the first teacher and records the table's arguments.
    bin_dir, log = tmp_path / "bin", tmp_path / "pareto.json"
    bin_dir.mkdir()
    fake = bin_dir / "python"
    fake.write_text(
        '#!/usr/bin/env bash\nif [[ $1 == - ]]; then cat > /dev/null; echo "$2"; exit 0; fi\n'
        f'printf "%s\\n" "$@" > {log}\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    settings = {"PHASES": "pareto", "SEEDS": "1 2", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    if peer_seeds is not None:
        settings["PEER_SEEDS"] = peer_seeds
    done, _ = run_script(f"distillation.sh {tmp_path / 'distill'}", tmp_path, **settings)
    assert done.returncode == 0, done.stderr
    arguments = log.read_text(encoding="utf-8").splitlines()
    assert arguments[:2] == ["-m", "benchmarks.pareto"]
    assert f"student-small-b1-int8={tmp_path / 'distill'}/student-small,beam=1,int8" in arguments
    tail = arguments[arguments.index("--device") - len(peer) : arguments.index("--device")]
    assert tail == peer and ("--peer" in arguments) == bool(peer)


def test_the_table_times_the_machine_before_each_run_it_trains(tmp_path):
    """With PACE_PROBE=1 (the default) each new run's folder gets the pace probe before it trains,
    in the threads it trains in; a run that resumes is not probed again."""
    stand_in, log = tmp_path / "attnmt_stand_in.py", tmp_path / "commands.jsonl"
    settings = {"PHASES": "train", "SEEDS": "1", "CONFIGS": "multi30k-en-de-luong", "SINGLE_CONFIGS": ""}
    settings |= {"PACE_PROBE": "1", "PARALLEL": "2", "PYTHON": f"{sys.executable} {stand_in} {log}"}
    done, commands = run_script(f"multi30k-table.sh {tmp_path / 'runs'}", tmp_path, **settings)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "multi30k-en-de-luong-s1"
    probe = ["-m", "attnmt.pace", "--threads", "1", "--json", f"{run}/pace.json"]
    assert [command[0] for command in commands if command[0] in ("-m", "train")] == ["-m", "train"]
    assert probe in commands
    done, commands = run_script(f"multi30k-table.sh {tmp_path / 'runs'}", tmp_path, **settings)
    assert done.returncode == 0 and sum(command[0] == "-m" for command in commands) == 1  # resumed: not again

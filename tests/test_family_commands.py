"""Every command serves both model families: one matrix, family by command. Each cell runs the
command as a user would on a small trained run of the family (`reverse_run`, a GRU with
attention; `transformer_run`, a two-layer transformer) and checks that it did its work, or, where
a family may be refused (`REFUSED`), that the refusal is the one line naming what is missing.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from attnmt.checkpoint import WEIGHTS, resolve_checkpoint
from attnmt.cli import main
from tests.cli_helpers import run_error, run_ok
from tests.serve_helpers import serving

FAMILIES = {"rnn": "reverse_run", "transformer": "transformer_run"}
# What a family may be refused, and the words its one line must hold: the ONNX and web-page
# graphs are the recurrent family's step graphs.
REFUSED = {("transformer", "export"): "cannot be exported yet"}
SENTENCE = "a b c d"


@pytest.fixture(params=FAMILIES)
def family(request) -> tuple[str, Path]:
    return request.param, request.getfixturevalue(FAMILIES[request.param])


def settings(run: Path, tmp_path: Path, name: str, *more: str) -> list[str]:
    """`--set` arguments training a new run of `run`'s config for a few steps into tmp_path/name."""
    overrides = [f"train.run_dir={tmp_path / name}", "train.max_steps=4", "train.valid_every=4", *more]
    return [arg for override in overrides for arg in ("--set", override)]


def trained(run_dir: Path) -> bool:
    return (run_dir / "checkpoints").is_dir() and resolve_checkpoint(run_dir, "last").is_dir()


def cell_train(run, tmp_path, capsys):
    run_ok(capsys, "train", str(run / "config.yaml"), *settings(run, tmp_path, "new"))
    assert trained(tmp_path / "new")
    run_ok(capsys, "train", "--resume", str(tmp_path / "new"), "--set", "train.max_steps=6")
    assert json.loads((tmp_path / "new" / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 6


def cell_train_from(run, tmp_path, capsys):
    run_ok(capsys, "train", str(run / "config.yaml"), "--from", str(run), *settings(run, tmp_path, "next"))
    assert trained(tmp_path / "next")


def cell_train_bf16(run, tmp_path, capsys):
    run_ok(capsys, "train", str(run / "config.yaml"), *settings(run, tmp_path, "bf16", "train.precision=bf16"))
    assert trained(tmp_path / "bf16")


def cell_train_ddp(run, tmp_path, capsys):
    """Two processes splitting each batch end where one process does."""
    deterministic = ("train.max_steps=3", "train.valid_every=100", "train.clip_grad_norm=null", "train.threads=1")
    run_ok(capsys, "train", str(run / "config.yaml"), *settings(run, tmp_path, "one", *deterministic))
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "attnmt", "train",
        str(run / "config.yaml"), *settings(run, tmp_path, "two", *deterministic),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    one, two = (load_file(str(resolve_checkpoint(tmp_path / name, "last") / WEIGHTS)) for name in ("one", "two"))
    for name in one:
        assert torch.allclose(one[name], two[name], atol=2e-5, rtol=1e-4), name


def cell_translate(run, tmp_path, capsys):
    glossary = tmp_path / "glossary.tsv"
    glossary.write_text("b\tb\n", encoding="utf-8")
    assert run_ok(capsys, "translate", str(run), SENTENCE).strip()
    nbest = run_ok(capsys, "translate", str(run), SENTENCE, "--beam", "3", "--n-best", "2").splitlines()
    assert [line.split(" ||| ")[0] for line in nbest] == ["0", "0"]
    assert run_ok(capsys, "translate", str(run), SENTENCE, "--prefix", "d").startswith("d")
    assert "a" in run_ok(capsys, "translate", str(run), SENTENCE, "--require", "a").split()
    assert "b" in run_ok(capsys, "translate", str(run), SENTENCE, "--glossary", str(glossary)).split()
    assert len(run_ok(capsys, "translate", str(run), "a b. c d.", "--document").splitlines()) == 1
    assert "<b>" in run_ok(capsys, "translate", str(run), "<b>a</b> b c d", "--markup", "html")
    assert " ||| " in run_ok(capsys, "translate", str(run), SENTENCE, "--alignment")
    run_ok(capsys, "translate", str(run), SENTENCE, "--attention", str(tmp_path / "heatmaps"))
    assert (tmp_path / "heatmaps" / "0001.png").is_file()
    assert run_ok(capsys, "translate", str(run), SENTENCE, "--ensemble", str(run)).strip()


def cell_score(run, tmp_path, capsys):
    record = json.loads(run_ok(capsys, "score", str(run), "--source", SENTENCE, "--target", "d c b a"))
    assert len(record["token_log_probs"]) == 5 and record["log_prob"] < 0


def cell_evaluate(run, tmp_path, capsys):
    run_ok(capsys, "evaluate", str(run), "--beam", "2", "--output-dir", str(tmp_path / "evaluated"))
    assert any(path.name == "evaluation.json" for path in (tmp_path / "evaluated").rglob("*"))


def cell_average(run, tmp_path, capsys):
    copy = tmp_path / "run"
    subprocess.run(["cp", "-r", str(run), str(copy)], check=True)
    run_ok(capsys, "average", str(copy), "--last", "2")
    assert run_ok(capsys, "translate", str(copy / "checkpoints" / "averaged"), SENTENCE).strip()


def cell_distill(run, tmp_path, capsys):
    """As a teacher: its beam search of the training sources; as a student: a run of its own
    family trained on a distilled corpus."""
    prefix = tmp_path / "distilled" / "train"
    run_ok(capsys, "distill", str(run), "--beam", "2", "--output", str(prefix))
    assert len(Path(f"{prefix}.fr").read_text().splitlines()) > 100
    corpus = ["data.corpus=files", *(f"data.{split}={prefix}" for split in ("train", "valid", "test"))]
    run_ok(capsys, "train", str(run / "config.yaml"), *settings(run, tmp_path, "student", *corpus))
    assert trained(tmp_path / "student")


def cell_sweep(run, tmp_path, capsys):
    base = yaml.safe_load((run / "config.yaml").read_text())
    base["train"] |= {"max_steps": 4, "valid_every": 4}
    spec = {
        "output_dir": str(tmp_path / "sweep"),
        "base": base,
        "pace_probe": False,
        "experiments": {"lr": {"grid": {"train.lr": [0.001, 0.003]}}},
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    run_ok(capsys, "sweep", str(tmp_path / "sweep.yaml"), "--threads", "1")
    assert len(list((tmp_path / "sweep").rglob("config.yaml"))) >= 2


def cell_serve(run, tmp_path, capsys):
    _, client = serving(str(run))
    with client:
        answer = client.post("/v1/translate", json={"sentences": [SENTENCE], "return_attention": True})
        assert answer.status_code == 200, answer.text
        explained = client.post("/v1/explain", json={"sentence": SENTENCE})
        assert explained.status_code == 200, explained.text
        assert client.get("/").status_code == 200  # the explorer's page


def cell_validate(run, tmp_path, capsys):
    out = run_ok(capsys, "validate", str(run / "config.yaml"))
    assert out.split()[-1] == "valid" and "\n  family: " in out  # the resolved config, then its verdict


def cell_plot(run, tmp_path, capsys):
    run_ok(capsys, "plot", "attention", str(run), SENTENCE, "--output", str(tmp_path / "attention.png"))
    run_ok(capsys, "plot", "curves", str(run), "--output", str(tmp_path / "curves.png"))
    assert (tmp_path / "attention.png").is_file() and (tmp_path / "curves.png").is_file()


def cell_data(run, tmp_path, capsys):
    assert "train pairs" in run_ok(capsys, "data", "stats", str(run / "config.yaml"))


def cell_export(run, tmp_path, capsys):
    run_ok(capsys, "export", str(run), "--output", str(tmp_path / "export"))
    assert (tmp_path / "export").is_dir()


def cell_shortlist(run, tmp_path, capsys):
    copy = tmp_path / "run"
    subprocess.run(["cp", "-r", str(run), str(copy)], check=True)
    run_ok(capsys, "shortlist", str(copy))
    assert run_ok(capsys, "translate", str(copy), SENTENCE, "--shortlist").strip()


COMMANDS = {
    "train": cell_train,
    "train --from": cell_train_from,
    "train bf16": cell_train_bf16,
    "train ddp": cell_train_ddp,
    "translate": cell_translate,
    "score": cell_score,
    "evaluate": cell_evaluate,
    "average": cell_average,
    "distill": cell_distill,
    "sweep": cell_sweep,
    "serve": cell_serve,
    "validate": cell_validate,
    "plot": cell_plot,
    "data": cell_data,
    "export": cell_export,
    "shortlist": cell_shortlist,
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_serves_both_families_or_refuses_in_one_line(family, command, tmp_path, capsys, monkeypatch):
    name, run = family
    monkeypatch.setenv("ATTNMT_CACHE", str(run.parent / "cache"))
    if (name, command) in REFUSED:
        line = run_error(capsys, *_first_call(command, run, tmp_path))
        assert REFUSED[name, command] in line and not list(tmp_path.iterdir())  # nothing written
    else:
        COMMANDS[command](run, tmp_path, capsys)


def _first_call(command: str, run: Path, tmp_path: Path) -> list[str]:
    """The argv of a refused command's first call."""
    return {"export": ["export", str(run), "--output", str(tmp_path / "export")]}[command]


def test_across_families_a_continued_run_and_an_ensemble_are_refused_in_one_line(
    reverse_run, transformer_run, tmp_path, capsys
):
    config, start = str(reverse_run / "config.yaml"), str(transformer_run)
    line = run_error(capsys, "train", config, "--from", start, *settings(reverse_run, tmp_path, "x"))
    assert "model.family is 'rnn'" in line and "'transformer'" in line
    assert not (tmp_path / "x").exists()
    line = run_error(capsys, "translate", str(reverse_run), SENTENCE, "--ensemble", str(transformer_run))
    assert "an ensemble's runs are of one model family" in line
    assert main(["translate", str(transformer_run), SENTENCE, "--attention", str(tmp_path / "h"), "--heads"]) == 0
    assert (tmp_path / "h" / "0001-heads.png").is_file()
    line = run_error(capsys, "translate", str(reverse_run), SENTENCE, "--attention", str(tmp_path / "r"), "--heads")
    assert "no layers of attention heads" in line and not (tmp_path / "r").exists()

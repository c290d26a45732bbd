"""`attnmt translate`, `attnmt evaluate` and `attnmt plot` through the real entry point,
`attnmt.cli.main([...])`, on the tiny reverse run of conftest.py (trained once a pytest session).

Bad input must end in exit code 2 and one `attnmt: error: ...` line, never a traceback.
"""

from __future__ import annotations

import io
import json
import shlex

import pytest
from cli_helpers import run_error, run_ok

from attnmt.cli import main
from attnmt.provenance import content_hash

PNG = b"\x89PNG\r\n\x1a\n"


class FakeStdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def test_translate_sentences_from_arguments_keeps_blank_ones(reverse_run, capsys):
    out = run_ok(capsys, "translate", str(reverse_run), "a b c", "", "d e f g", "--beam", "2")
    assert out.split("\n") == ["c b a", "", "g f e d", ""]


def test_translate_a_file_to_a_file(reverse_run, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("a b c\n\n  \nd e f g\n")
    output = tmp_path / "out.txt"
    run_ok(capsys, "translate", str(reverse_run), "--input", str(source), "--output", str(output), "--beam", "1")
    assert output.read_text().split("\n") == ["c b a", "", "", "g f e d", ""]


def test_translate_stdin_n_best(reverse_run, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", FakeStdin(b"a b c\n\nd e\n"))
    lines = run_ok(capsys, "translate", str(reverse_run), "--beam", "3", "--n-best", "3").splitlines()
    fields = [line.split(" ||| ") for line in lines]
    assert all(len(f) == 3 for f in fields)
    indices = [int(f[0]) for f in fields]
    assert indices[:3] == [0, 0, 0] and indices.count(1) == 1 and indices[-1] == 2
    assert fields[0][1] == "c b a" and fields[3] == ["1", "", "0.0000"]
    scores = [float(f[2]) for f in fields[:3]]
    assert scores == sorted(scores, reverse=True)


def test_long_sentences_are_truncated_with_a_warning(reverse_run, capsys):
    long_sentence = " ".join("abc"[i % 3] for i in range(400))
    code = main(["translate", str(reverse_run), "x y", long_sentence, "--beam", "1"])
    captured = capsys.readouterr()
    assert code == 0 and len(captured.out.splitlines()) == 2
    assert "warning: sentence 2 has 400 tokens" in captured.err


def test_non_utf8_input_names_the_file_and_line(reverse_run, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("a b\nc d\nd\u00e9j\u00e0 vu\n".encode("latin-1"))
    line = run_error(capsys, "translate", str(reverse_run), "--input", str(bad), "--output", str(tmp_path / "out.txt"))
    assert f"{bad}:3: not valid UTF-8" in line
    assert not (tmp_path / "out.txt").exists(), "no half-written output"
    monkeypatch.setattr("sys.stdin", FakeStdin(b"a b\n\xff\n"))
    assert "<stdin>:2: not valid UTF-8" in run_error(capsys, "translate", str(reverse_run))


@pytest.mark.parametrize("mode", [[], ["--document"], ["--markup", "html"]])
def test_an_input_file_that_is_not_there_is_one_line(reverse_run, tmp_path, capsys, mode):
    missing, output = tmp_path / "missing.txt", tmp_path / "out.txt"
    line = run_error(capsys, "translate", str(reverse_run), "--input", str(missing), "--output", str(output), *mode)
    assert line.endswith(f"{missing}: file not found") and not output.exists()


@pytest.mark.parametrize("beam", ["0", "-3"])
def test_beam_size_below_1_is_an_error(reverse_run, capsys, beam):
    line = run_error(capsys, "translate", str(reverse_run), "a", "--beam", beam)
    assert f"beam size must be at least 1, got {beam}" in line


def test_n_best_larger_than_the_beam_is_an_error(reverse_run, capsys):
    line = run_error(capsys, "translate", str(reverse_run), "a b", "--beam", "2", "--n-best", "3")
    assert "n-best (3) cannot exceed the beam size (2)" in line


def test_unknown_run_dir_is_an_error(tmp_path, capsys):
    line = run_error(capsys, "translate", str(tmp_path / "nowhere"), "a b")
    assert "nowhere: no such run directory or checkpoint" in line
    line = run_error(capsys, "evaluate", str(tmp_path))
    assert "not a run directory with checkpoints" in line


def test_truncated_weights_are_an_error_and_other_checkpoints_still_load(copied_run, capsys):
    index = json.loads((copied_run / "checkpoints" / "index.json").read_text())
    broken = copied_run / "checkpoints" / index["best"] / "model.safetensors"
    others = {p: p.read_bytes() for p in (copied_run / "checkpoints").glob("*/*") if p != broken}
    assert others, "the run keeps an older checkpoint too"
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])
    line = run_error(capsys, "translate", str(copied_run), "a b c")
    assert str(broken) in line and "corrupted or truncated" in line and "other checkpoints: step-" in line
    assert all(path.read_bytes() == data for path, data in others.items())
    older = next(p.parent for p in others if p.name == "model.safetensors")
    assert run_ok(capsys, "translate", str(older), "a b c", "--beam", "1").strip()


def test_a_changed_vocabulary_is_an_error(copied_run, capsys):
    vocab_path = copied_run / "tgt.vocab.json"
    vocab = json.loads(vocab_path.read_text())
    vocab["tokens"] += ["extra1", "extra2"]
    vocab_path.write_text(json.dumps(vocab))
    line = run_error(capsys, "translate", str(copied_run), "a b")
    assert "another config or vocabulary" in line


def test_a_config_of_another_model_is_an_error(copied_run, capsys):
    config_path = copied_run / "config.yaml"
    config_path.write_text(config_path.read_text().replace("decoder_hidden: 64", "decoder_hidden: 48"))
    assert "another config or vocabulary" in run_error(capsys, "translate", str(copied_run), "a b")


def test_evaluate_two_runs_prints_scores_signature_and_writes_figures(reverse_run, tmp_path, capsys):
    older = sorted((reverse_run / "checkpoints").glob("step-*"))[0]
    out_dir = tmp_path / "eval"
    args = ["evaluate", str(reverse_run), str(older), "--beam", "1", "--bootstrap", "50", "--output-dir", str(out_dir)]
    out = run_ok(capsys, *args)
    assert "BLEU" in out and "chrF2" in out and "p vs first" in out
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a" in out and "chrF signature: nrefs:1" in out
    assert "BLEU by source length" in out
    figures = json.loads((out_dir / "evaluation.json").read_text())
    assert figures["split"] == "test" and len(figures["runs"]) == 2
    assert figures["command"] == shlex.join(["attnmt", *args])  # how the figures were made, and where
    assert figures["machine"]["cores"] >= 1 and figures["machine"]["cpu"] and figures["machine"]["torch"]
    # the code that scored, when the command started and ended, and a hash a hand edit would break
    assert figures["code_at_start"]["commit"] and figures["code_at_end"]["commit"]
    assert figures["content_sha256"] == content_hash(figures)
    best = figures["runs"][0]
    assert best["sentences"] == 100 and best["bleu"] > 50 and best["chrf"] > 50 and best["tokenized_bleu"] > 50
    assert best["bootstrap"]["p_value"] is None and figures["runs"][1]["bootstrap"]["p_value"] is not None
    assert (out_dir / "length.png").read_bytes().startswith(PNG)
    assert len((out_dir / "hypotheses-1.txt").read_text().splitlines()) == 100


def test_evaluate_on_given_files_with_two_references(reverse_run, tmp_path, capsys):
    (tmp_path / "src.txt").write_text("a b c\nd e\n")
    (tmp_path / "ref1.txt").write_text("c b a\nx x\n")
    (tmp_path / "ref2.txt").write_text("a a a\ne d\n")
    args = ["evaluate", str(reverse_run), "--src", str(tmp_path / "src.txt"), "--beam", "1"]
    out = run_ok(capsys, *args, "--ref", str(tmp_path / "ref1.txt"), "--ref", str(tmp_path / "ref2.txt"))
    assert "100.00" in out and "nrefs:2" in out
    assert "--ref needs --src" in run_error(capsys, "evaluate", str(reverse_run), "--ref", str(tmp_path / "ref1.txt"))


def test_plot_attention_curves_and_length_write_pictures(reverse_run, tmp_path, capsys):
    one, grid = tmp_path / "one.png", tmp_path / "grid.png"
    run_ok(capsys, "plot", "attention", str(reverse_run), "a b c", "--output", str(one))
    run_ok(capsys, "plot", "attention", str(reverse_run), "a b c", "d e f", "--beam", "2", "--output", str(grid))
    curves = tmp_path / "curves.png"
    run_ok(capsys, "plot", "curves", str(reverse_run), "--output", str(curves), "--metrics", "train_loss,valid_bleu,lr")
    length = tmp_path / "length.png"
    run_ok(capsys, "plot", "length", str(reverse_run), "--output", str(length), "--beam", "1", "--split", "valid")
    for path in (one, grid, curves, length):
        assert path.read_bytes().startswith(PNG), path
    assert one.read_bytes() != grid.read_bytes()
    line = run_error(capsys, "plot", "curves", str(reverse_run), "--output", str(curves), "--metrics", "bleu")
    assert "--metrics: bleu not logged; available:" in line and "valid_bleu" in line


def test_translate_attention_writes_one_heatmap_per_sentence_and_a_grid(reverse_run, tmp_path, capsys):
    out_dir = tmp_path / "attention"
    run_ok(capsys, "translate", str(reverse_run), "--beam", "1", "a b c", "", "d e", "--attention", str(out_dir))
    assert sorted(path.name for path in out_dir.iterdir()) == ["0001.png", "0003.png", "grid.png"]
    assert all(path.read_bytes().startswith(PNG) for path in out_dir.iterdir())


def test_the_runs_decode_n_best_is_translates_default(copied_run, capsys):
    """decode.n_best in a run's config gives --n-best its default; --n-best 1 still prints plain lines."""
    config_path = copied_run / "config.yaml"
    config_path.write_text(config_path.read_text().replace("n_best: 1", "n_best: 2"))
    lines = run_ok(capsys, "translate", str(copied_run), "a b c", "d e", "--beam", "3").splitlines()
    assert [line.split(" ||| ")[0] for line in lines] == ["0", "0", "1", "1"]
    assert run_ok(capsys, "translate", str(copied_run), "a b c", "--beam", "3", "--n-best", "1") == "c b a\n"


def test_a_user_error_names_the_flag_on_the_command_line_and_the_key_in_a_config(reverse_run, tmp_path, capsys):
    """One error, two faces: the setting at fault is the flag the user typed, or the config key."""
    line = run_error(capsys, "translate", str(reverse_run), "a b", "--beam", "2", "--n-best", "3")
    assert line == "attnmt: error: --n-best: n-best (3) cannot exceed the beam size (2); raise the beam size"
    line = run_error(capsys, "translate", str(reverse_run), "a b", "--device", "tpu")
    assert line == "attnmt: error: --device: unknown device 'tpu'; expected auto, cpu, cuda or mps"
    overrides = ["--set", "data.corpus=reverse", "--set", f"train.run_dir={tmp_path / 'run'}"]
    line = run_error(capsys, "train", *overrides, "--set", "train.device=tpu")
    assert line == "attnmt: error: train.device: unknown device 'tpu'; expected auto, cpu, cuda or mps"
    config = tmp_path / "cfg.yaml"
    config.write_text("decode:\n  beam_size: 2\n  n_best: 3\n")
    line = run_error(capsys, "validate", str(config))
    assert line == f"attnmt: error: {config}: decode: n_best (3) cannot exceed beam_size (2)"

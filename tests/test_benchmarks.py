"""The speed benchmark: its FLOP formula against torch's counter, its references against attnmt, a smoke run."""

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attnmt.config import DataConfig, ModelConfig, load_config
from attnmt.data.batching import build_data
from attnmt.models.seq2seq import build_model
from attnmt.utils import UserError
from benchmarks import bentrevett, d2l, large_file, speed
from benchmarks.flops import flop_rates
from benchmarks.report import print_report

SHARED_DATA = Path(os.environ.get("ATTNMT_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")

TINY = {"embedding_size": 8, "encoder_hidden": 6, "decoder_hidden": 12, "attention_size": 10, "dropout": 0.0}
SHAPES = {
    "d2l": {
        "encoder_layers": 2,
        "bidirectional": False,
        "decoder_layers": 2,
        "attention": "additive",
        "decoder": "bahdanau",
    },
    "joey": {"bidirectional": True, "attention": "additive", "decoder": "bahdanau"},
    "luong-fast": {"bidirectional": True, "attention": "general", "decoder": "luong", "input_feeding": False},
    "luong-dot-2-layers": {
        "bidirectional": True,
        "decoder_layers": 2,
        "attention": "dot",
        "decoder": "luong",
        "input_feeding": False,
    },
}


def tiny_config(shape: str) -> ModelConfig:
    return ModelConfig(**TINY, **SHAPES[shape])


def unpadded_batch(batch_size=3, src_len=5, tgt_len=4, src_vocab=20, tgt_vocab=30):
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, src_vocab, (batch_size, src_len), generator=generator)
    tgt_in = torch.randint(4, tgt_vocab, (batch_size, tgt_len), generator=generator)
    return src, torch.full((batch_size,), src_len), tgt_in


@pytest.mark.parametrize("shape", SHAPES)
def test_flop_formula_equals_torch_flop_counter(shape):
    """On an unpadded batch every FLOP attnmt runs is useful, so the formula must match the counter."""
    cfg = tiny_config(shape)
    model = build_model(cfg, 20, 30)
    src, src_lengths, tgt_in = unpadded_batch()
    counter = FlopCounterMode(display=False)
    with counter:
        model(src, src_lengths, tgt_in)
    analytic = flop_rates(cfg, 30).forward([5] * 3, [4] * 3)
    assert analytic == counter.get_total_flops()


@pytest.mark.parametrize(
    ("module", "shape"),
    [(bentrevett, "d2l"), (bentrevett, "joey"), (bentrevett, "luong-fast"), (d2l, "d2l"), (d2l, "joey")],
)
def test_reference_computes_attnmt_logits_from_the_same_weights_and_wastes_flops(module, shape):
    """Given attnmt's weights, each tutorial's code (d2l's as written: W_q, W_k inside the loop, the
    output layer after it) gives attnmt's logits on an unpadded batch, where the encoders agree;
    recomputing the key projection at every step costs FLOPs beyond the useful ones."""
    cfg = tiny_config(shape)
    model = build_model(cfg, 20, 30).eval()
    reference = module.load_attnmt_weights(module.Seq2Seq(cfg, 20, 30), model).eval()
    src, src_lengths, tgt_in = unpadded_batch()
    expected, _ = model(src, src_lengths, tgt_in)
    counter = FlopCounterMode(display=False)
    with counter:
        logits = reference(src, src_lengths, tgt_in)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-4)
    assert counter.get_total_flops() > flop_rates(cfg, 30).forward([5] * 3, [4] * 3)


def test_d2l_reference_takes_the_output_layer_out_of_the_loop():
    """The dense layer runs once per batch over all steps, not once per step as in bentrevett's."""
    cfg = tiny_config("joey")
    reference = d2l.Seq2Seq(cfg, 20, 30).eval()
    calls = []
    reference.decoder.dense.register_forward_hook(lambda *_: calls.append(1))
    src, src_lengths, tgt_in = unpadded_batch()
    reference(src, src_lengths, tgt_in)
    assert len(calls) == 1


def test_d2l_loss_is_the_mean_over_non_pad_tokens():
    cfg = tiny_config("joey")
    reference = d2l.Seq2Seq(cfg, 20, 30).eval()
    src, src_lengths, tgt_in = unpadded_batch()
    tgt_out = tgt_in.clone()
    tgt_out[0, 2:] = d2l.PAD
    logits = reference(src, src_lengths, tgt_in)
    keep = tgt_out != d2l.PAD
    expected = -logits.log_softmax(-1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)[keep].mean()
    torch.testing.assert_close(d2l.loss(reference, src, src_lengths, tgt_in, tgt_out), expected)


@pytest.mark.parametrize("module", [bentrevett, d2l])
def test_reference_masks_padding_in_attention(module):
    """A padded source position gets no attention: changing the token there leaves the logits alone
    for a unidirectional encoder, whose outputs at real positions never read the padding."""
    cfg = tiny_config("d2l")
    model = build_model(cfg, 20, 30)
    src, _, tgt_in = unpadded_batch()
    src_lengths = torch.tensor([5, 3, 4])
    changed = src.clone()
    changed[1, 3:] = 7
    if module is d2l:
        reference = d2l.load_attnmt_weights(d2l.Seq2Seq(cfg, 20, 30), model).eval()
        # the bridge reads the final state (after the padding, as in the book); hold it fixed
        keys, hidden, lengths = reference.decoder.init_state(reference.encoder(src), src_lengths)
        keys_changed = reference.decoder.init_state(reference.encoder(changed), src_lengths)[0]
        logits, _ = reference.decoder(tgt_in[:, :1], [keys, hidden, lengths])
        logits_changed, _ = reference.decoder(tgt_in[:, :1], [keys_changed, hidden, lengths])
        torch.testing.assert_close(logits, logits_changed)
        return
    reference = bentrevett.load_attnmt_weights(bentrevett.Seq2Seq(cfg, 20, 30), model).eval()
    # the bridge reads the final state (after the padding, as in the textbooks); hold it fixed
    memory, mask, state = reference.encode(src, src_lengths)
    memory_changed, _, _ = reference.encode(changed, src_lengths)
    logits, _ = reference.decoder.step(tgt_in[:, 0], state, memory, mask)
    logits_changed, _ = reference.decoder.step(tgt_in[:, 0], state, memory_changed, mask)
    torch.testing.assert_close(logits, logits_changed)


def test_reference_searches_return_tokens_without_eos():
    cfg = tiny_config("joey")
    reference = bentrevett.Seq2Seq(cfg, 20, 30).eval()
    tokens = bentrevett.beam_search(reference, [5, 6, 7], beam_size=3, max_steps=6)
    assert len(tokens) <= 6 and bentrevett.EOS not in tokens
    for module in (bentrevett, d2l):
        reference = module.Seq2Seq(cfg, 20, 30).eval()
        greedy = module.greedy(reference, torch.tensor([[5, 6, 7]]), torch.tensor([3]), steps=6)
        assert len(greedy) == 1 and len(greedy[0]) <= 6 and module.EOS not in greedy[0]


def test_d2l_greedy_is_attnmt_greedy_without_early_exit():
    """Same weights, one unpadded sentence: d2l's fixed-length greedy agrees with attnmt's up to EOS."""
    from attnmt.search.greedy import greedy
    from attnmt.search.options import SearchOptions

    torch.manual_seed(3)
    cfg = tiny_config("joey")
    model = build_model(cfg, 20, 30).eval()
    reference = d2l.load_attnmt_weights(d2l.Seq2Seq(cfg, 20, 30), model).eval()
    src, lengths = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4])
    ours = greedy(model, src, lengths, SearchOptions(max_length_a=0.0, max_length_b=8))[0].tokens
    theirs = d2l.greedy(reference, src, lengths, steps=8)[0]
    assert theirs[: len(ours)] == ours


def test_bucketed_and_random_batches_time_the_same_sentences():
    data = build_data(DataConfig(corpus="reverse", synthetic_size=300, valid_size=20, test_size=20))
    options = speed.Options(steps=3, warmup=1, batch_sentences=16, pool_batches=4)
    batches = speed.training_batches(data, options)
    ours_warmup, ours_timed = batches["attnmt"]
    reference_warmup, reference_timed = batches["reference"]
    assert len(ours_timed) == 3 and all(len(batch) == 16 for batch in ours_timed + reference_timed)
    assert sorted(i for b in ours_timed for i in b) == sorted(i for b in reference_timed for i in b)
    assert sorted(i for b in ours_warmup for i in b) == sorted(i for b in reference_warmup for i in b)


def test_speed_benchmark_smoke(tmp_path, capsys):
    data = build_data(DataConfig(corpus="reverse", synthetic_size=300, valid_size=20, test_size=20))
    options = speed.Options(
        steps=2,
        warmup=1,
        batch_sentences=16,
        decode_sentences=20,
        decode_batch=8,
        beam_size=2,
        reference_beam_sentences=3,
        ceiling_size=128,
        repeats=2,
    )
    configs = {"joey": tiny_config("joey"), "luong-fast": tiny_config("luong-fast")}
    results = speed.run(options, data, configs, torch.device("cpu"), corpus="reverse")
    print_report(results, speed.Console(width=200), markdown=tmp_path / "tables.md")
    path = tmp_path / "speed.json"
    path.write_text(json.dumps(results))
    loaded = json.loads(path.read_text())
    assert {"machine", "ceiling_gflops", "settings", "data", "configs"} <= loaded.keys()
    assert {"cpu", "cores", "torch", "threads", "gpu"} <= loaded["machine"].keys()
    expected = {"joey": {"attnmt", "d2l", "bentrevett"}, "luong-fast": {"attnmt", "bentrevett"}}
    for name, config in loaded["configs"].items():
        training = config["training"]["implementations"]
        assert set(training) == expected[name]
        for measured in training.values():
            assert measured["tokens_per_s"] > 0 and 0 < measured["useful_flop_fraction"] < 1
            assert measured["peak_memory_mib"] is not None
            assert measured["executed_per_useful_flop"] >= 0.99
            assert measured["repeats"] == 2 and len(measured["spread"]["tokens_per_s"]["values"]) == 2
            assert measured["spread"]["tokens_per_s"]["median"] == measured["tokens_per_s"]
            assert measured["target_tokens"] == training["attnmt"]["target_tokens"]
        assert set(config["training"]["speedup"]) == expected[name] - {"attnmt"}
        greedy, beam = config["decoding"]["greedy"]["implementations"], config["decoding"]["beam"]["implementations"]
        assert set(greedy) == expected[name] and set(beam) == expected[name] - {"d2l"}  # d2l has no beam search
        assert greedy["attnmt"]["sentences"] == 20 and all(m["sentences_per_s"] > 0 for m in greedy.values())
    assert "speed-up" in capsys.readouterr().out
    assert "| joey | d2l |" in (tmp_path / "tables.md").read_text()


def test_ab_search_runs_the_whole_package_of_a_revision_and_decodes_alike(tmp_path):
    """benchmarks.ab_search exports attnmt at a git revision and decodes in a process of its own
    with it; at HEAD it must decode exactly as the checkout does (the A/B's "outputs identical"
    check rests on this)."""
    from attnmt.train import fit
    from benchmarks import ab_search

    if subprocess.run(["git", "-C", str(ab_search.CHECKOUT), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    overrides = ["data.corpus=reverse", "data.synthetic_size=200", "data.test_size=12", "data.valid_size=12"]
    overrides += ["model.embedding_size=8", "model.encoder_hidden=8", "model.decoder_hidden=16", "train.max_steps=2"]
    run = tmp_path / "run"
    fit(load_config(None, [*overrides, f"train.run_dir={run}", "train.threads=1"]), log=lambda *_: None)
    out = tmp_path / "ab.json"
    arguments = ["--checkpoint", str(run), "--against", "HEAD", "--repeats", "1", "--beam", "3", "--json", str(out)]
    assert ab_search.main(arguments) == 0
    modes = json.loads(out.read_text())["modes"]
    assert set(modes) == {"greedy", "beam 3"}
    assert all(mode["outputs_identical"] and len(mode["seconds"]["HEAD"]) == 1 for mode in modes.values())


def test_ab_search_and_profiling_report_bad_input_in_one_line(tmp_path, capsys):
    from benchmarks import ab_search, profiling

    assert ab_search.main(["--checkpoint", str(tmp_path / "no-run"), "--against", "HEAD"]) == 2
    assert profiling.main(["--decode", str(tmp_path / "no-run")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and errors[0].startswith("benchmarks.ab_search: error: ") and "no-run" in errors[0]
    assert errors[1].startswith("benchmarks.profiling: error: ") and "no-run" in errors[1]
    with pytest.raises(UserError, match="--against no-such-revision"):
        ab_search.package_at("no-such-revision", tmp_path)


def test_profile_shares_are_medians_over_passes_with_the_products_counted_together():
    from benchmarks.profiling import share_summary

    passes = [{"aten::mm": 0.5, "aten::addmm": 0.2, "aten::tanh": 0.3}, {"aten::mm": 0.3, "aten::tanh": 0.7}]
    summary = share_summary(passes, rows=2)
    assert summary["matrix_products"]["values"] == pytest.approx([0.7, 0.3])
    assert summary["matrix_products"]["median"] == pytest.approx(0.5)
    assert [row["name"] for row in summary["operators"]] == ["aten::tanh", "aten::mm"]  # addmm (median 0.1) cut
    assert summary["operators"][1]["share"]["values"] == pytest.approx([0.5, 0.3])


def test_profiling_a_decode_writes_its_raw_result(reverse_run, tmp_path, capsys):
    from benchmarks import profiling

    out = tmp_path / "profile.json"
    argv = ["--decode", str(reverse_run), "--beam", "2", "--repeats", "2", "--shapes", "--json", str(out)]
    assert profiling.main(argv) == 0
    result = json.loads(out.read_text())
    groups = result["product_groups"]  # the products by shape: together, the products' share in each pass
    assert any(group.startswith("output layer") for group in groups)
    for index, products in enumerate(result["matrix_products"]["values"]):
        assert sum(group["share"]["values"][index] for group in groups.values()) == pytest.approx(products)
    assert all(group["gflop_per_s"]["median"] > 0 for group in groups.values())
    assert result["command"].startswith("python -m benchmarks.profiling --decode")
    assert result["beam_size"] == 2 and result["repeats"] == 2 and result["machine"]["cores"] >= 1
    shares = [row["share"] for row in result["operators"]]
    assert [share["median"] for share in shares] == sorted((share["median"] for share in shares), reverse=True)
    assert all(len(share["values"]) == 2 for share in shares)
    assert 0 < result["matrix_products"]["median"] < 1
    assert "matrix products:" in capsys.readouterr().out


def test_fused_adam_matches_the_default_on_the_joey_model():
    from benchmarks import optimizer

    result = optimizer.compare(steps=2)
    assert result["max_weight_difference"] < 1e-6
    assert result["default_ms"] > 0 and result["fused_ms"] > 0


def test_optimizer_benchmark_writes_its_raw_result(tmp_path, capsys):
    from benchmarks import optimizer

    path = tmp_path / "optimizer.json"
    assert optimizer.main(["--steps", "2", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    assert result["command"] == f"python -m benchmarks.optimizer --steps 2 --json {path}"
    assert len(result["fused_ms_per_step"]) == 2 and result["max_weight_difference"] < 1e-5
    assert result["machine"]["cpu"] and "fused" in capsys.readouterr().out


def test_large_file_benchmark_streams_a_file_equal_to_one_call_with_a_progress_bar(reverse_run, tmp_path):
    path = tmp_path / "large.json"
    arguments = ["--checkpoint", str(reverse_run), "--lines", "300", "--workers", "1", "--json", str(path)]
    assert large_file.main(arguments) == 0
    result = json.loads(path.read_text())
    assert [(run["input_lines"], run["lines"]) for run in result["runs"]] == [(30, 30), (300, 300)]
    assert result["one_call"]["equal_lines_by_workers"] == {"1": 300}
    assert all(run["peak_rss_mib"] > 50 for run in result["runs"])  # torch alone is larger than that
    assert "300/300" in result["runs"][1]["progress_bar"]  # drawn on the pseudo-terminal, to the end
    _, body = large_file.large_file_rows(result)
    assert len(body) == 2 and body[1][-1] == "300/300" and body[0][-1] == ""


def test_last_progress_reads_the_final_state_of_a_redrawn_bar():
    drawn = b"\x1b[?25ltranslate \xe2\x94\x81 10/300 5 tok/s\r\x1b[2Ktranslate \xe2\x94\x81 300/300 9 tok/s\n\x1b[?25h"
    assert large_file.last_progress(drawn) == "translate \u2501 300/300 9 tok/s"


def test_steering_draws_disjoint_reference_phrases_and_keeps_its_promise(reverse_run, tmp_path, capsys):
    import random

    from benchmarks import steering

    rng = random.Random(0)
    for _ in range(200):
        reference = " ".join(rng.choice("abcdefgh") + str(i) for i in range(rng.randint(1, 9)))
        phrases = steering.draw_phrases(reference, 3, rng)
        words = [word for phrase in phrases for word in phrase.split()]
        assert len(words) == len(set(words)) and set(words) <= set(reference.split())
        assert all(1 <= len(phrase.split()) <= 3 and phrase in reference for phrase in phrases)
    assert steering.prefix_of("ein mann spielt gitarre", unfinished=False) == "ein mann "
    assert steering.prefix_of("ein mann spielt gitarre", unfinished=True) == "ein mann spi"
    out = tmp_path / "steering.json"
    argv = [str(reverse_run), "--sentences", "30", "--beam", "3", "--repeats", "2", "--json", str(out)]
    assert steering.main(argv) == 0
    figures = json.loads(out.read_text())
    assert len(figures["unconstrained"]["seconds"]["values"]) == 2  # the median of the timed passes
    assert figures["git_commit"] and figures["sentences"] == 30 and figures["run"] == reverse_run.name
    for setting in figures["constraints"].values():
        assert setting["all_met_with_room"] == 1.0  # every phrase, wherever the length limit leaves room
    assert all(setting["begins_with_prefix"] == 1.0 for setting in figures["prefixes"].values())


def test_pareto_counts_an_export_as_the_run_it_was_made_from(tiny):
    """An ONNX export's arithmetic comes from its own config and vocabularies, equal to its run's."""
    from attnmt.loading import ModelSpec, load
    from benchmarks import pareto

    run, exported = load(ModelSpec(tiny / "run", device="cpu")), load(ModelSpec(tiny / "export"))
    sources = ["3 1 4", "2 7"]
    translations = run.translate(sources, run.search_options(beam_size=1, n_best=1), say=lambda line: None)
    counted = pareto.forward_flops_per_sentence(run, sources, translations)
    assert pareto.forward_flops_per_sentence(exported, sources, translations) == counted > 0


def test_pareto_front_and_a_measurement_of_five_configurations(reverse_run, copied_run, tmp_path):
    import argparse

    from benchmarks import pareto

    assert pareto.pareto_front([(1, 5), (2, 4), (3, 4), (0.5, 6), (2, 3)]) == [2, 0, 3]  # fastest first
    assert pareto.System.parse("s=a+b,beam=3,int8") == pareto.System("s", ("a", "b"), beam=3, int8=True)
    for bad in ("nothing", "s=a,beam=0", "s=a,slow", "s=a,fast,beam=3"):
        with pytest.raises(argparse.ArgumentTypeError):
            pareto.System.parse(bad)
    assert pareto.seed_list("2,1,2") == (2, 1)  # a seed named twice is raced and read once
    for seeds in ("0", "1,x", ""):  # a usage error before any peer is installed or trained
        with pytest.raises(SystemExit) as stopped:
            pareto.main(["--peer", "opennmt-py", "--peer-seeds", seeds])
        assert stopped.value.code == 2
    with pytest.raises(SystemExit) as stopped:  # the peer's harness decodes on the CPU
        pareto.main(["--peer", "opennmt-py", "--device", "cuda"])
    assert stopped.value.code == 2
    int8_elsewhere = ["--system", f"int8={reverse_run},int8", "--device", "cuda", "--json", str(tmp_path / "no.json")]
    assert pareto.main(int8_elsewhere) == 2  # int8 is the CPU's: one line before anything is measured
    assert not (tmp_path / "no.json").exists()
    out, picture = tmp_path / "pareto.json", tmp_path / "pareto.png"
    systems = [f"greedy={reverse_run},beam=1", f"beam3={reverse_run},beam=3", f"int8={reverse_run},beam=1,int8"]
    systems.append(f"fast={copied_run},fast")  # the preset chooses on valid and writes the run's fast.json
    systems.append(f"twice={reverse_run}+{reverse_run},beam=1")  # an ensemble of one model twice: greedy's outputs
    argv = [arg for system in systems for arg in ("--system", system)]
    assert pareto.main([*argv, "--repeats", "2", "--json", str(out), "--plot", str(picture)]) == 0
    figures = json.loads(out.read_text())
    assert [system["system"] for system in figures["systems"]] == ["greedy", "beam3", "int8", "fast", "twice"]
    assert all(system["runs"] == [reverse_run.name] for system in figures["systems"][:-1])
    greedy, twice = figures["systems"][0]["splits"]["test"], figures["systems"][-1]["splits"]["test"]
    assert twice["generated_tokens"] == greedy["generated_tokens"]  # the same outputs, so twice the arithmetic
    assert twice["forward_flops_per_sentence"] == 2 * greedy["forward_flops_per_sentence"] > 0
    for system in figures["systems"]:
        test = system["splits"]["test"]
        assert len(test["tokens_per_s"]["values"]) == 2 and test["generated_tokens"] > 0
        assert 0 <= test["tokenized_bleu"] <= 100 + 1e-9
    assert picture.stat().st_size > 0
    header, body = pareto.pareto_rows(figures)
    assert header[:5] == ["system", "params", "MFLOP/sent", "search", "test BLEU word-tok-lc"] and len(header) == 8
    assert [row[3] for row in body[:3]] == ["greedy", "beam 3", "greedy, int8"]
    assert body[0][4] == f"{greedy['tokenized_bleu']:.2f}"
    assert body[0][2] == f"{greedy['forward_flops_per_sentence'] / 1e6:,.0f}"
    [choice] = json.loads((copied_run / "fast.json").read_text())["choices"]
    preset = figures["systems"][3]
    chosen = {
        "quantize": "int8" if preset["int8"] else "none",
        "shortlist": preset["shortlist"],
        "beam_size": preset["beam"],
    }
    assert preset["fast"] and choice["chosen"] == chosen  # the row says what the preset chose


def test_scale_corpora_perturb_every_copy_and_keep_lengths(tmp_path):
    from benchmarks import scale

    pairs = [("a small dog runs .", "ein kleiner hund läuft ."), ("two men .", "zwei männer .")]
    prefix = scale.write_corpus(pairs, 7, tmp_path / "corpus")
    sources = Path(f"{prefix}.en").read_text(encoding="utf-8").splitlines()
    targets = Path(f"{prefix}.de").read_text(encoding="utf-8").splitlines()
    assert len(sources) == len(targets) == 7
    assert list(zip(sources[:2], targets[:2], strict=True)) == pairs  # copy 0 is the corpus itself
    for index in range(2, 7):
        src, tgt = pairs[index % 2]
        assert len(sources[index].split()) == len(src.split()) and len(targets[index].split()) == len(tgt.split())
    assert len(set(zip(sources, targets, strict=True))) > 2, "copies must not repeat the corpus exactly"


def test_scale_benchmark_measures_preparing_and_training_from_both_paths(tmp_path, monkeypatch):
    """One size, end to end, on a tiny model: every figure is there, and the prepared run and
    the in-memory run train on the same corpus."""
    from benchmarks import scale

    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(
        "data:\n  src_lang: en\n  tgt_lang: de\n  batch_tokens: 300\n"
        "model:\n  embedding_size: 8\n  encoder_hidden: 8\n  decoder_hidden: 16\n"
        "train:\n  run_dir: runs/unused\n  max_steps: 1\n  valid_bleu_sentences: 5\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("ATTNMT_DATA", str(SHARED_DATA))  # Multi30k's files, never the network
    monkeypatch.setattr(scale, "CONFIG", tiny)
    monkeypatch.setattr(scale, "WARMUP_STEPS", 1)
    args = ["--sizes", "3000", "--steps", "3", "--repeats", "1", "--workers", "1", "--work", str(tmp_path / "work")]
    scale.main([*args, "--json", str(tmp_path / "scale.json")])
    result = json.loads((tmp_path / "scale.json").read_text())
    (size,) = result["sizes"]
    assert size["pairs"] == 3000 and size["git_commit"] and size["machine"]
    (prepared,) = size["prepare"]
    assert prepared["train_pairs"] == 3000 and prepared["disk_mib"] > 0 and prepared["seconds"] > 0
    assert 0 < size["train"]["first_step_s"]["median"] <= size["train"]["last_step_s"]["median"]
    assert size["train"]["peak_anon_gib"]["median"] > 0 and size["in_memory"]["tokens_per_s"] > 0
    header, (row,) = scale.scale_rows(result)
    assert len(row) == len(header) and row[0] == "3,000" and row[1].startswith("- / ")


def test_stopping_scores_every_search_on_both_splits_and_keeps_the_penalty_tuned_on_valid(reverse_run, tmp_path):
    from benchmarks import stopping

    assert stopping.brevity_penalty(1.2) == 1.0 and stopping.brevity_penalty(1.0) == 1.0
    assert stopping.brevity_penalty(0.5) == pytest.approx(math.exp(-1))
    out = tmp_path / "stopping.json"
    assert stopping.main([str(reverse_run), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["git_commit"] and figures["command"].startswith("python -m benchmarks.stopping")
    (run,) = figures["runs"]
    rows = {(row["search"], row["split"]): row for row in run["rows"]}
    assert {split for _, split in rows} == {"valid", "test"} and len(rows) == 10
    best = max(run["tuning"], key=lambda trial: trial["bleu"])
    assert rows[("tuned", "valid")]["length_penalty"] == best["length_penalty"]
    assert rows[("tuned", "valid")]["bleu"] == pytest.approx(best["bleu"])
    assert rows[("best_finished, alpha 0", "test")]["stopping"] == "best_finished"
    assert rows[("greedy", "test")]["beam_size"] == 1
    for row in rows.values():
        assert row["brevity_penalty"] == pytest.approx(stopping.brevity_penalty(row["length_ratio"]))
        assert row["tokenized_length_ratio"] > 0


def test_tf32_reference_loop_is_the_encoder_and_the_benchmark_needs_a_gpu(monkeypatch, capsys):
    """benchmarks.tf32 measures the encoder against a GRUCell loop: on the CPU (no TF32) the two
    agree to float32's rounding, and a broken loop (one direction's weights swapped) does not."""
    from attnmt.models.encoder import Encoder
    from benchmarks import tf32

    torch.manual_seed(0)
    encoder = Encoder(vocab_size=tf32.VOCAB, embedding_size=16, hidden_size=8).eval()
    src, lengths = tf32.random_batch(torch.device("cpu"))
    assert (src[:, 0] != 0).all() and (src == 0).any(), "a padded batch"
    with torch.no_grad():
        found = tf32.differences(encoder, src, lengths)
        assert found["from_gru_cells"] < 1e-5 and found["from_float64"] < 1e-5
        rnn = encoder.rnn
        rnn.weight_hh_l0.data, rnn.weight_hh_l0_reverse.data = rnn.weight_hh_l0_reverse.data, rnn.weight_hh_l0.data
        swapped, _ = encoder(src, lengths)
        rnn.weight_hh_l0.data, rnn.weight_hh_l0_reverse.data = rnn.weight_hh_l0_reverse.data, rnn.weight_hh_l0.data
        assert (swapped - tf32.gru_loop(encoder, src, lengths)).abs().max() > 1e-3
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert tf32.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_the_glossary_benchmark_pairs_words_by_dice_and_counts_terms_where_they_should_apply():
    from attnmt.data.splits import Example
    from attnmt.jobs.glossary import glossary_of
    from attnmt.tokenize import WordTokenizer
    from benchmarks import glossary

    words = WordTokenizer("en", lowercase=True)
    pairs = [("the red car", "la voiture rouge")] * 30 + [("the blue car", "la voiture bleue")] * 25
    pairs += [(f"the thing {n}", f"la chose {n}") for n in range(120)]  # "the"/"la" become function words
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(glossary, "FUNCTION_WORDS", 2)
        chosen = glossary.dice_terms(pairs, words, WordTokenizer("fr", lowercase=True), count=10)
    found = {s: t for s, t, _ in chosen}
    assert found["red"] == "rouge" and found["blue"] == "bleue" and found["car"] == "voiture"
    assert "the" not in found and all(dice >= glossary.MIN_DICE for _, _, dice in chosen)
    terms = glossary_of([("test", "red", "rouge")], "en", True, lambda text: [5])
    examples = [Example("a red car", ("une voiture rouge",)), Example("red", ("bleu",)), Example("a car", ("x",))]
    counted = glossary.term_accuracy(terms, examples, ["une voiture rouge", "rouge", "x"], words)
    assert counted == {"occurrences": 1, "right": 1, "accuracy": 1.0}, "only where the reference has the term"
    assert glossary.term_accuracy(terms, examples[:1], ["une voiture"], words)["accuracy"] == 0.0


def test_the_glossary_benchmark_writes_its_raw_result(reverse_run, tmp_path, capsys, monkeypatch):
    from benchmarks import glossary

    monkeypatch.setattr(glossary, "FUNCTION_WORDS", 0)  # the reverse task's words are all frequent letters
    out = tmp_path / "glossary.json"
    assert glossary.main([str(reverse_run), "--terms", "5", "--beam", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(result["glossary"]) == 5 and all(source == target for source, target, _ in result["glossary"])
    searches = result["searches"]
    assert searches["with"]["terms"]["occurrences"] == searches["without"]["terms"]["occurrences"] > 0
    assert searches["with"]["terms"]["right"] >= searches["without"]["terms"]["right"]
    assert result["command"].startswith("python -m benchmarks.glossary") and "term accuracy" in capsys.readouterr().out
    written = out.read_text()
    assert glossary.main([str(tmp_path / "no-run"), "--json", str(out)]) == 2
    assert capsys.readouterr().err.startswith("benchmarks.glossary: error: "), "one line, no traceback"
    assert out.read_text() == written, "nothing written over the earlier result"


def test_the_documents_benchmark_groups_consecutive_sentences_and_scores_three_ways(reverse_run, tmp_path, capsys):
    from benchmarks import documents

    groups = documents.paragraphs(23, seed=4)
    assert [i for group in groups for i in group] == list(range(23)), "every sentence once, in order"
    low, high = documents.SIZES
    assert all(low <= len(group) <= high for group in groups[:-1]) and 1 <= len(groups[-1]) <= high
    out = tmp_path / "documents.json"
    assert documents.main([str(reverse_run), "--beam", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["ways"]) == {"document", "line", "sentences"} and result["test_sentences"] == 100
    # the reverse task's sentences end in no punctuation: the splitter finds one sentence a paragraph,
    # so the document mode reads each paragraph as the line mode does
    assert result["sentences_found"] == result["paragraphs"] and result["sources_ending_in_punctuation"] == 0
    assert result["ways"]["document"] == result["ways"]["line"]
    assert result["command"].startswith("python -m benchmarks.documents") and "paragraphs" in capsys.readouterr().out
    assert documents.main([str(tmp_path / "no-run"), "--json", str(out)]) == 2
    assert capsys.readouterr().err.startswith("benchmarks.documents: error: ")


def test_the_markup_benchmark_tags_consistent_spans_and_scores_where_the_tag_landed():
    from benchmarks import markup

    assert markup.aligner_words("A dog, (running) .") == "a dog running ."
    # source words 0-1 -> target 1-2; source 2 -> target 0
    links = {(0, 1), (1, 2), (2, 0)}
    spans = markup.consistent_spans(links, 3)
    assert (0, 1, 1, 2) in spans and (2, 2, 0, 0) in spans and (0, 0, 1, 1) in spans
    crossing = {(0, 0), (1, 2), (2, 1)}
    assert (0, 1, 0, 2) not in markup.consistent_spans(crossing, 3), "target word 1 links outside the span"
    assert markup.wrap("a b c d", 1, 2) == "a <b>b c</b> d"
    assert markup.tag_span("x <b>y z</b> w") == (1, 2) and markup.tag_span("x <b></b>y") is None
    assert markup.span_f1((1, 2), (1, 2)) == 1.0 and markup.span_f1((0, 1), (1, 2)) == 0.5
    assert markup.span_f1(None, (1, 1)) == 0.0


def test_the_alignment_heads_benchmark_scores_every_head_each_layers_mean_and_all_layers_mean():
    from types import SimpleNamespace

    from benchmarks import alignment_heads

    cross = torch.rand(2, 3, 4, 5).softmax(dim=-1)  # (L, h, T + 1, S)
    maps = alignment_heads.candidate_maps(SimpleNamespace(cross=cross))
    assert len(maps) == 1 + 2 + 2 * 3  # all layers, each layer's mean, each head
    torch.testing.assert_close(maps[1, "mean"], cross[1].mean(dim=0))
    torch.testing.assert_close(maps["all", "mean"], cross.mean(dim=(0, 1)))
    assert torch.equal(maps[0, 2], cross[0, 2])
    sure = [{(0, 0), (1, 1)}, {(0, 1)}]
    perfect = alignment_heads.scores(sure, sure)
    assert perfect["aer"] == 0.0 and perfect["precision"] == perfect["recall"] == 1.0
    half = alignment_heads.scores([{(0, 0), (1, 0)}, set()], sure)  # one of two proposed, one of three sure
    assert half["precision"] == 0.5 and half["recall"] == 1 / 3
    assert half["aer"] == pytest.approx(1 - 2 * 1 / (2 + 3))  # links of different sentences never match

"""The speed benchmark: its FLOP formula against torch's counter, its references against attnmt, a smoke run."""

import json
import subprocess
from types import SimpleNamespace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attnmt.config import DataConfig, ModelConfig, load_config
from attnmt.data import build_data
from attnmt.model import build_model
from attnmt.utils import UserError
from benchmarks import attention_focus, bentrevett, d2l, large_file, multi30k_table, speed
from benchmarks.flops import flop_rates
from benchmarks.report import print_report

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
    from attnmt.search import SearchOptions, greedy

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
    assert profiling.main(["--decode", str(reverse_run), "--beam", "2", "--repeats", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
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


def _evaluation(command: str, records: list[dict]) -> dict:
    figures = {"bleu": 30.0, "chrf": 55.0, "tokenized_bleu": 31.0, "bleu_signature": "sig", "bleu_by_length": []}
    search = {"beam_size": 5, "length_penalty": 1.0}
    training = {"step": 900, "valid_score": 30.0, "minutes": 9.0, "run_steps": 1000, "run_minutes": 10.0}
    return {
        "command": command,
        "machine": {"cpu": "test cpu"},
        "runs": [{**figures, "search": search, "training": training, **record} for record in records],
    }


def test_multi30k_table_collects_each_system_and_names_no_machine_folder(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    folder = tmp_path / "runs" / "evaluation"
    single = _evaluation(
        f"attnmt evaluate r-s1 r-s1/checkpoints/averaged --src {data}/multi30k/test_2017_flickr.en.gz",
        [{"checkpoint": "r/en-fr-s1/checkpoints/step-0000900"}, {"checkpoint": "r/en-fr-s1/checkpoints/averaged"}],
    )
    members = [f"r/en-fr-s{seed}/checkpoints/averaged" for seed in (1, 2)]
    ensemble = _evaluation("attnmt evaluate --ensemble", [{"checkpoint": members[0], "members": members}])
    for name, evaluation in [
        ("multi30k-en-fr-test2017-single", single),
        ("multi30k-en-fr-test2017-ensemble", ensemble),
    ]:
        (folder / name).mkdir(parents=True)
        (folder / name / "evaluation.json").write_text(json.dumps(evaluation), encoding="utf-8")
    (folder / "an-unrelated-folder").mkdir()
    monkeypatch.setenv("ATTNMT_DATA", str(data))
    out = tmp_path / "table.json"

    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    models = [(e["direction"], e["test_set"], e["model"]) for e in results["entries"]]
    assert models == [  # singles before the ensemble, though "ensemble" sorts first by name
        ("en-fr", "test2017 flickr", "single, seed 1"),
        ("en-fr", "test2017 flickr", "averaged, seed 1"),
        ("en-fr", "test2017 flickr", "ensemble of 2, averaged"),
    ]
    assert str(data) not in out.read_text(encoding="utf-8")
    assert "--src $ATTNMT_DATA/multi30k/test_2017_flickr.en.gz" in results["entries"][0]["command"]
    header, body = multi30k_table.table_rows(results)
    assert len(body) == 3 and all(len(row) == len(header) for row in body)
    assert body[0][1] == "Bahdanau, additive"
    assert body[0][4:] == ["31.00", "30.00", "55.00", "beam 5, lp 1", "step 900 of 1,000 updates, 10 min"]
    assert "| ensemble of 2, averaged |" in capsys.readouterr().out


def test_multi30k_summary_means_the_seeds_and_shows_the_ensemble_of_best_checkpoints():
    def entry(model: str, bleu: float, test_set="test2016 flickr", members=None, minutes=10.2) -> dict:
        training = {"run_minutes": minutes}
        record = {"direction": "en-fr", "decoder": "Bahdanau, additive", "test_set": test_set, "model": model}
        return {**record, "tokenized_bleu": bleu, "training": training, **({"members": members} if members else {})}

    runs = ["r-s1/checkpoints/step-1", "r-s2/checkpoints/step-2"]
    averaged = ["r-s1/checkpoints/averaged", "r-s2/checkpoints/averaged"]
    entries = [
        entry("single, seed 1", 37.0),
        entry("averaged, seed 1", 99.0),
        entry("single, seed 2", 38.0, minutes=11.9),
        entry("ensemble of 2", 39.0, members=runs),
        entry("ensemble of 2, averaged", 98.0, members=averaged),
        entry("single, seed 1", 30.0, test_set="test2017 flickr"),
    ]
    header, body = multi30k_table.summary_rows({"entries": entries})
    assert header[2:6] == ["test2016 single", "test2016 ensemble", "test2017 single", "test2017 ensemble"]
    assert body == [
        ["en-fr", "Bahdanau, additive", "37.50 (37.00-38.00, 2 seeds)", "39.00 (2 runs)", "30.00", "-", "10-12 min"]
    ]


@pytest.mark.parametrize(
    "folder, text, said",
    [
        ("no-such-config-test2016-single", json.dumps(_evaluation("attnmt evaluate r", [])), "no no-such-config.yaml"),
        ("multi30k-en-fr-test2016-single", '{"runs": [', "unreadable"),
        ("multi30k-en-fr-test2016-single", '{"runs": []}', "no command, machine and runs"),
        ("multi30k-en-fr-test2016-single", '{"runs": 3, "command": "c", "machine": {}}', "runs is not a list"),
    ],
)
def test_multi30k_table_names_a_bad_evaluation_folder_in_one_line(tmp_path, capsys, folder, text, said):
    (tmp_path / "evaluation" / folder).mkdir(parents=True)
    (tmp_path / "evaluation" / folder / "evaluation.json").write_text(text, encoding="utf-8")
    assert multi30k_table.main([str(tmp_path), "--json", str(tmp_path / "table.json")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and folder in error and said in error
    assert not (tmp_path / "table.json").exists()


def test_multi30k_table_update_replaces_only_the_rows_of_the_evaluations_found(tmp_path, capsys):
    de_en, en_fr = "configs/multi30k-de-en.yaml", "configs/multi30k-en-fr.yaml"

    def entry(config: str, test_set: str, model: str, bleu: float, **more) -> dict:
        record = _evaluation("attnmt evaluate r", [{"model": model, "tokenized_bleu": bleu, **more}])["runs"][0]
        return {**record, "config": config, "direction": "x-y", "decoder": "d", "test_set": test_set, "machine": {}}

    previous = [
        entry(de_en, "test2016 flickr", "single, seed 1", 40.0),
        entry(de_en, "test2016 flickr", "ensemble of 2", 41.0, members=["a", "b"]),
        entry(en_fr, "test2016 flickr", "single, seed 1", 59.0),
        entry(en_fr, "test2017 flickr", "single, seed 1", 51.0),
    ]
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": previous}), encoding="utf-8")
    members = [f"r/en-fr-s{seed}/checkpoints/step-1" for seed in (1, 2)]
    found = {
        "single": _evaluation("attnmt evaluate r", [{"checkpoint": member} for member in members]),
        "ensemble": _evaluation("attnmt evaluate --ensemble", [{"checkpoint": members[0], "members": members}]),
    }
    for kind, evaluation in found.items():
        folder = tmp_path / "runs" / "evaluation" / f"multi30k-en-fr-test2016-{kind}"
        folder.mkdir(parents=True)
        (folder / "evaluation.json").write_text(json.dumps(evaluation), encoding="utf-8")

    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(table), "--update"]) == 0
    entries = json.loads(table.read_text(encoding="utf-8"))["entries"]
    rows = [(e["config"], e["test_set"], e["model"], e["tokenized_bleu"]) for e in entries]
    assert rows == [  # de-en kept as it was; en-fr test2016 singles replaced, its ensemble added; test2017 kept
        (de_en, "test2016 flickr", "single, seed 1", 40.0),
        (de_en, "test2016 flickr", "ensemble of 2", 41.0),
        (en_fr, "test2016 flickr", "single, seed 1", 31.0),
        (en_fr, "test2016 flickr", "single, seed 2", 31.0),
        (en_fr, "test2016 flickr", "ensemble of 2", 31.0),
        (en_fr, "test2017 flickr", "single, seed 1", 51.0),
    ]
    capsys.readouterr()
    table.write_text('{"entries": 3}', encoding="utf-8")
    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(table), "--update"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(table) in error and table.read_text(encoding="utf-8") == '{"entries": 3}'


def test_multi30k_table_without_evaluations_is_one_line_and_exit_2(tmp_path, capsys):
    assert multi30k_table.main([str(tmp_path), "--json", str(tmp_path / "table.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "table.json").exists()


def test_attention_focus_measures_the_weight_on_the_first_source_position():
    rows = [torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[0.5, 0.25, 0.25]]), torch.empty(0, 0)]

    class Stub:
        def translate(self, sentences):
            return [SimpleNamespace(attention=attention) for attention in rows]

    focus = attention_focus.first_position_focus(Stub(), ["a", "b", "c"])
    assert focus == {
        "steps": 3,
        "mean_weight_first": round(1.5 / 3, 4),
        "share_argmax_first": round(2 / 3, 4),
        "uniform_weight": round((0.5 + 0.5 + 1 / 3) / 3, 4),
    }


def test_attention_focus_on_a_folder_that_is_no_run_is_one_line_and_exit_2(tmp_path, capsys):
    assert attention_focus.main([str(tmp_path / "no-run")]) == 2
    assert capsys.readouterr().err.startswith("benchmarks.attention_focus: error: ")


def test_attention_focus_without_any_translation_is_a_clear_error():
    class Stub:
        def translate(self, sentences):
            return [SimpleNamespace(attention=torch.empty(0, 0))]

    with pytest.raises(UserError, match="no sentence"):
        attention_focus.first_position_focus(Stub(), [""])

"""`Translator` and `evaluate` on a real model: a tiny run trained once on the reverse task.

Properties, not golden numbers: attention rows sum to 1, beam size 1 equals greedy, n-best
lists are sorted, and a sentence's translation does not depend on the batch around it.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attnmt.checkpoint import training_summary
from attnmt.data.corpora import load_corpus
from attnmt.data.parallel_files import read_test_files
from attnmt.data.splits import Example
from attnmt.data.textfiles import decode_lines, read_input
from attnmt.evaluation import evaluate, evaluate_runs, significance, write_evaluation
from attnmt.heatmaps import heatmap
from attnmt.loading import ModelSpec, load
from attnmt.provenance import code_state
from attnmt.search.beam import beam_search
from attnmt.search.greedy import greedy
from attnmt.search.options import SearchOptions
from attnmt.translate import MAX_SOURCE_TOKENS, Translator
from attnmt.translation import nbest_lines
from attnmt.utils import UserError
from tests.run_helpers import is_score


@pytest.fixture(scope="module")
def translator(reverse_run) -> Translator:
    return load(ModelSpec(reverse_run, device="cpu"))


@pytest.fixture(scope="module")
def test_examples(translator) -> list[Example]:
    return load_corpus(translator.config.data).test


def check_attention(translation) -> None:
    attention = translation.attention
    assert attention.shape == (len(translation.tokens) + 1, len(translation.source_tokens))
    assert bool((attention >= 0).all())
    torch.testing.assert_close(attention.sum(dim=1), torch.ones(attention.shape[0]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_translations_carry_text_tokens_scores_and_attention(translator, test_examples, beam_size):
    examples = test_examples[:20]
    translations = translator.translate([e.src for e in examples], translator.search_options(beam_size=beam_size))
    assert len(translations) == len(examples)
    for example, translation in zip(examples, translations, strict=True):
        assert translation.source == example.src
        assert translation.source_tokens == example.src.split()
        assert translation.text == " ".join(translation.tokens)  # letters: the detokenizer joins with spaces
        assert translation.log_prob <= 0.0 and translation.score <= 0.0
        assert translation.alternatives == []
        check_attention(translation)
    correct = sum(t.text == e.refs[0] for t, e in zip(translations, examples, strict=True))
    assert correct >= 16, "300 steps learn to reverse letters almost perfectly"


def test_beam_size_1_equals_greedy(translator, test_examples):
    codec = translator.codec
    ids = [codec.encode_source(e.src) for e in test_examples[:32]]
    lengths = torch.tensor([len(x) for x in ids])
    src = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long)
    for row, sentence in enumerate(ids):
        src[row, : len(sentence)] = torch.tensor(sentence)
    greedy_hypotheses = greedy(translator.model, src, lengths)
    beam = beam_search(translator.model, src, lengths, SearchOptions(length_penalty=0.0))
    for g, (b,) in zip(greedy_hypotheses, beam, strict=True):
        assert g.tokens == b.tokens
        assert g.log_prob == pytest.approx(b.log_prob, abs=1e-5)
        torch.testing.assert_close(g.attention, b.attention)


def test_n_best_lists_are_sorted_and_distinct(translator, test_examples):
    for translation in translator.translate(
        [e.src for e in test_examples[:10]], translator.search_options(beam_size=4, n_best=4)
    ):
        candidates = [translation, *translation.alternatives]
        assert 2 <= len(candidates) <= 4
        scores = [c.score for c in candidates]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(c.tokens) for c in candidates}) == len(candidates)
        for candidate in candidates:
            check_attention(candidate)
    lines = nbest_lines(
        translator.translate(["a b", "c"], translator.search_options(beam_size=2, n_best=2)), first_index=5
    )
    assert [line.split(" ||| ")[0] for line in lines] == ["5", "5", "6", "6"]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_sentence_translates_the_same_alone_and_in_a_batch_of_64(translator, test_examples, beam_size):
    sources = [e.src for e in test_examples[:64]]
    batched = translator.translate(sources, translator.search_options(beam_size=beam_size))
    for source, in_batch in zip(sources, batched, strict=True):
        (alone,) = translator.translate([source], translator.search_options(beam_size=beam_size))
        assert alone.tokens == in_batch.tokens, source
        assert alone.score == pytest.approx(in_batch.score, abs=1e-4)
        torch.testing.assert_close(alone.attention, in_batch.attention, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("n_best", [1, 2])
def test_empty_and_blank_sentences_keep_their_place(translator, n_best):
    translations = translator.translate(
        ["a b c", "", "   ", "d e"], translator.search_options(beam_size=2, n_best=n_best)
    )
    assert [t.text for t in translations[1:3]] == ["", ""]
    assert translations[0].text and translations[3].text
    for blank in translations[1:3]:
        assert blank.tokens == [] and blank.source_tokens == [] and blank.attention.shape == (1, 0)


def test_long_sentences_are_truncated_with_a_warning(translator, capsys):
    long_sentence = " ".join("abcdefgh"[i % 8] for i in range(MAX_SOURCE_TOKENS + 50))
    short, long = translator.translate(["a b", long_sentence], translator.search_options(beam_size=1), first_number=7)
    warning = capsys.readouterr().err
    assert "sentence 8" in warning and f"{MAX_SOURCE_TOKENS + 50} tokens" in warning
    assert short.text and len(long.source_tokens) == MAX_SOURCE_TOKENS
    check_attention(long)


@pytest.mark.parametrize(("beam_size", "n_best"), [(0, 1), (-2, 1), (2, 3), (2, 0)])
def test_impossible_search_sizes_are_user_errors(translator, beam_size, n_best):
    with pytest.raises(UserError, match=r"beam size|n-best"):
        translator.translate(["a b"], translator.search_options(beam_size=beam_size, n_best=n_best))
    with pytest.raises(UserError, match="length penalty must be >= 0"):
        translator.translate(["a b"], translator.search_options(length_penalty=-1.0))


def test_loading_errors_name_the_problem(reverse_run, tmp_path):
    with pytest.raises(UserError, match="no such run directory"):
        load(ModelSpec(tmp_path / "missing"))
    with pytest.raises(UserError, match="expected one of best, last") as error:
        load(ModelSpec(reverse_run, checkpoint="kept"))
    assert error.value.field == "checkpoint"
    with pytest.raises(UserError, match="not a run directory with checkpoints"):
        load(ModelSpec(tmp_path))
    last = load(ModelSpec(reverse_run, checkpoint="last", device="cpu"))
    assert last.checkpoint.parent == reverse_run / "checkpoints"


def test_heatmap_writes_a_picture(translator, tmp_path):
    translation, empty = translator.translate(["a b c", ""], translator.search_options(beam_size=1))
    path = heatmap(translation, tmp_path / "one.png")
    assert path.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(UserError, match="empty sentence"):
        heatmap(empty, tmp_path / "empty.png")


def test_evaluate_scores_against_all_references(translator, test_examples):
    examples = test_examples[:40]
    result = evaluate(translator, examples, translator.search_options(beam_size=1))
    assert len(result.hypotheses) == 40 and result.sources == [e.src for e in examples]
    assert result.bleu.score > 50 and result.chrf.score > 50 and result.tokenized_bleu.score > 50
    assert "nrefs:1" in result.bleu.signature and "case:lc" in result.tokenized_bleu.signature
    assert sum(bucket.sentences for bucket in result.by_length) == 40
    wrong_only = [Example(e.src, ("z z z",)) for e in examples]
    wrong_then_right = [Example(e.src, ("z z z", *e.refs)) for e in examples]
    assert evaluate(translator, wrong_only, translator.search_options(beam_size=1)).bleu.score < 5
    assert evaluate(translator, wrong_then_right, translator.search_options(beam_size=1)).bleu.score > 50
    figures = result.figures()
    assert figures["sentences"] == 40 and figures["bleu_by_length"][0]["bucket"] == "1-10"
    assert figures["tokenized_length_ratio"] == result.tokenized_bleu.length_ratio is not None


def test_significance_needs_several_systems_on_one_test_set(translator, test_examples):
    greedy = evaluate(translator, test_examples[:30], translator.search_options(beam_size=1))
    beam = evaluate(translator, test_examples[:30], translator.search_options(beam_size=3))
    assert significance([("greedy", greedy)]) is None
    results = significance([("greedy", greedy), ("beam", beam)], samples=50)
    assert [r.system for r in results] == ["greedy", "beam"]
    assert results[0].p_value is None and 0.0 <= results[1].p_value <= 1.0
    other = evaluate(translator, test_examples[30:60], translator.search_options(beam_size=1))
    assert significance([("a", greedy), ("b", other)], samples=50) is None


def test_reading_input_keeps_blank_lines_and_names_bad_bytes(tmp_path):
    assert decode_lines("\ufeffa b\r\n\nc\n".encode(), "x") == ["a b", "", "c"]
    assert decode_lines(b"a\nb", "x") == ["a", "b"]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a b\nc d\n\xff\xfe e\n")
    with pytest.raises(UserError, match=r"bad\.txt:3: not valid UTF-8"):
        read_input(str(bad))
    with pytest.raises(UserError, match="file not found"):
        read_input(str(tmp_path / "nope.txt"))
    with pytest.raises(UserError, match="is a folder"):
        read_input(str(tmp_path))


def test_test_files_give_multi_reference_examples(tmp_path):
    (tmp_path / "src").write_text("a b\nc d\n")
    (tmp_path / "ref1").write_text("b a\n\n")
    (tmp_path / "ref2").write_text("B A\nd c\n")
    examples = read_test_files(str(tmp_path / "src"), [str(tmp_path / "ref1"), str(tmp_path / "ref2")])
    assert examples == [Example("a b", ("b a", "B A")), Example("c d", ("d c",))]
    (tmp_path / "short").write_text("b a\n")
    with pytest.raises(UserError, match="has 1 lines but"):
        read_test_files(str(tmp_path / "src"), [str(tmp_path / "short")])
    with pytest.raises(UserError, match="no reference"):
        read_test_files(str(tmp_path / "src"), [str(tmp_path / "ref1")])


def test_evaluate_runs_names_each_result_compares_it_to_the_first_and_writes_it(reverse_run, test_examples, tmp_path):
    last = reverse_run / "checkpoints" / json.loads((reverse_run / "checkpoints" / "index.json").read_text())["last"]
    notes = []
    examples = test_examples[:20]
    results = evaluate_runs(
        ModelSpec((reverse_run, last), device="cpu").alone(), lambda _: examples, bootstrap_samples=20, say=notes.append
    )
    assert [r.name for r in results] == [reverse_run.name, last.name] and len(notes) == 2
    assert results[1].checkpoint == last and results[0].bootstrap.p_value is None
    assert results[1].bootstrap is not None and is_score(results[1].bootstrap.mean)
    out = write_evaluation(results, tmp_path / "eval", {"split": "test"})
    figures = json.loads((out / "evaluation.json").read_text())
    assert figures["split"] == "test" and [run["name"] for run in figures["runs"]] == [reverse_run.name, last.name]
    assert figures["runs"][1]["bleu"] == results[1].evaluation.bleu.score and "bootstrap" in figures["runs"][1]
    trained = {run["name"]: run["training"] for run in figures["runs"]}  # how the scored weights were trained
    last_step = int(last.name.removeprefix("step-"))
    assert trained[last.name]["step"] == trained[last.name]["run_steps"] == last_step
    assert trained[reverse_run.name]["run_steps"] == last_step and trained[reverse_run.name]["valid_score"] is not None
    assert 0 < trained[reverse_run.name]["minutes"] <= trained[reverse_run.name]["run_minutes"]
    # the code that trained the weights, as the checkpoint recorded it
    assert trained[last.name]["code"]["commit"] == code_state()["commit"]
    assert trained[last.name]["code"].keys() == code_state().keys()
    assert len((out / "hypotheses-2.txt").read_text().splitlines()) == 20 and (out / "length.png").stat().st_size


def test_training_summary_of_a_checkpoint_outside_its_run_or_with_a_damaged_index(reverse_run, tmp_path):
    last = reverse_run / "checkpoints" / json.loads((reverse_run / "checkpoints" / "index.json").read_text())["last"]
    step = int(last.name.removeprefix("step-"))
    alone = tmp_path / "copied" / "step"  # its parent's parent is no run: nothing says how the run went on
    shutil.copytree(last, alone)
    summary = training_summary(alone)
    assert summary["step"] == step and summary["minutes"] > 0 and summary["run_steps"] is None
    damaged = tmp_path / "run"
    shutil.copytree(reverse_run, damaged)
    (damaged / "checkpoints" / "index.json").write_text("{not json")
    summary = training_summary(damaged / "checkpoints" / last.name)
    assert summary["step"] == step and summary["run_minutes"] is None


def test_a_cuda_device_searches_in_fixed_shapes_unless_the_run_says_not(translator, test_examples, monkeypatch):
    import copy

    import attnmt.translate

    asked = []
    real = attnmt.translate.decode_all

    def spy(*args, **kwargs):
        asked.append(kwargs["fixed_shapes"])
        return real(*args, **{**kwargs, "device": "cpu"})  # the model stays where it is

    monkeypatch.setattr(attnmt.translate, "decode_all", spy)
    on_cuda = copy.copy(translator)
    on_cuda.device = "cuda"
    sentences = [example.src for example in test_examples[:5]]
    expected = [t.text for t in translator.translate(sentences)]
    assert [t.text for t in on_cuda.translate(sentences)] == expected
    decode = translator.config.decode.model_copy(update={"cuda_graphs": False})
    on_cuda.config = translator.config.model_copy(update={"decode": decode})
    on_cuda.translate(sentences)
    assert asked == [False, True, False]  # the CPU; CUDA; CUDA with decode.cuda_graphs false

"""Scoring a given translation: the model's log-probabilities and attention under teacher forcing
equal what it computes when it generates the same tokens, on every engine; `attnmt score` and
/v1/score give them, and refuse what cannot be scored in one line or a 422."""

import json
import random

import pytest
import torch

from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions, length_penalty
from attnmt.search.teacher import teacher_forced
from attnmt.vocab import EOS, PAD
from tests.cli_helpers import run_error, run_ok
from tests.search_helpers import ENGINES, translator_for
from tests.search_helpers import TINY_SOURCES as SOURCES
from tests.serve_helpers import serving


def forced_batch(hypotheses) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The sources and each best hypothesis's tokens + EOS, padded."""
    src = torch.full((len(SOURCES), max(map(len, SOURCES))), PAD)
    for row, ids in enumerate(SOURCES):
        src[row, : len(ids)] = torch.tensor(ids)
    targets = [[*h[0].tokens, EOS] for h in hypotheses]
    forced = torch.full((len(targets), max(map(len, targets))), PAD)
    for row, ids in enumerate(targets):
        forced[row, : len(ids)] = torch.tensor(ids)
    return src, torch.tensor([len(ids) for ids in SOURCES]), forced


@pytest.mark.parametrize("engine", [e for e in ENGINES if e != "shortlist"])
def test_scoring_a_search_output_gives_its_log_probability_score_and_attention(tiny, engine):
    translator = translator_for(tiny, engine)
    for options in (SearchOptions(), SearchOptions(beam_size=3)):
        hypotheses = decode_all(translator.model, SOURCES, options, batch_size=len(SOURCES))
        src, lengths, forced = forced_batch(hypotheses)
        fed = teacher_forced(translator.model, src, lengths, forced)
        for row, [best, *_] in enumerate(hypotheses):
            steps = len(best.tokens) + 1
            assert float(fed.log_probs[row].sum()) == pytest.approx(best.log_prob, abs=1e-4)
            assert torch.allclose(fed.attention[row, :steps, : lengths[row]], best.attention, atol=1e-5)
            assert bool((fed.log_probs[row, steps:] == 0).all())
            if options.is_greedy:  # greedy took the model's own choice at every step (EOS may be forced at the limit)
                assert fed.choices[row, : steps - 1].tolist() == best.tokens
                assert torch.allclose(fed.choice_log_probs[row, : steps - 1], fed.log_probs[row, : steps - 1])


def test_translator_score_matches_translate_and_the_command_and_api_give_it(reverse_run, tmp_path, capsys):
    from attnmt.loading import ModelSpec, load

    translator = load(ModelSpec(reverse_run, device="cpu"))
    sentences = [" ".join(random.Random(n).choice("abcdefgh") for _ in range(n)) for n in range(1, 9)]
    for options in (SearchOptions(), SearchOptions(beam_size=4, length_penalty=0.6)):
        translations = translator.translate(sentences, options)
        scored = translator.score(sentences, [t.text for t in translations], options)
        for translation, again in zip(translations, scored, strict=True):
            assert again.tokens == translation.tokens
            assert again.log_prob == pytest.approx(translation.log_prob, abs=1e-4)
            if not options.is_greedy:  # greedy ranks by the log-probability itself, beam search by the penalized score
                assert again.score == pytest.approx(translation.score, abs=1e-4)
            penalty = float(length_penalty(torch.tensor(len(again.tokens) + 1), options.length_penalty))
            assert again.score == pytest.approx(again.log_prob / penalty)
            assert sum(again.token_log_probs) == pytest.approx(again.log_prob, abs=1e-6)
            assert torch.allclose(again.attention, translation.attention, atol=1e-5)
    target = translations[3].text
    line = run_ok(capsys, "score", str(reverse_run), "--source", sentences[3], "--target", target, "--attention")
    record = json.loads(line)
    assert record["log_prob"] == pytest.approx(scored[3].log_prob, abs=1e-5)
    assert len(record["token_log_probs"]) == len(record["tokens"]) + 1 == len(record["attention"])
    sources, targets = tmp_path / "src.txt", tmp_path / "tgt.txt"
    sources.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    targets.write_text("\n".join(t.text for t in translations) + "\n", encoding="utf-8")
    lines = run_ok(capsys, "score", str(reverse_run), "--source-file", str(sources), "--target-file", str(targets))
    assert [json.loads(line)["target"] for line in lines.splitlines()] == [t.text for t in translations]
    _, client = serving(str(reverse_run))
    with client:
        answer = client.post("/v1/score", json={"sentences": sentences[3:4], "targets": [target]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["scored"][0]["log_prob"] == pytest.approx(record["log_prob"], abs=1e-5)
        assert "attention" not in answer.json()["scored"][0]
        refused = client.post("/v1/score", json={"sentences": ["a b"], "targets": ["b", "a"]})
        assert refused.status_code == 422 and refused.json()["field"] == "targets"
        refused = client.post("/v1/score", json={"sentences": [""], "targets": ["a"]})
        assert refused.status_code == 422 and "sentence 0 is empty" in refused.json()["error"]


def test_score_mistakes_are_one_line(reverse_run, tmp_path, capsys):
    run = str(reverse_run)
    assert run_error(capsys, "score", run, "--source", "1 2").endswith("1 sources but 0 targets: give one each")
    assert run_error(capsys, "score", run).endswith("give --source and --target, or --source-file and --target-file")
    assert run_error(capsys, "score", run, "--source", "", "--target", "1").endswith(
        "sentence 1 is empty: there is nothing to score"
    )
    short, long = tmp_path / "short.txt", tmp_path / "long.txt"
    short.write_text("1 2\n", encoding="utf-8")
    long.write_text("1 2\n3 4\n", encoding="utf-8")
    line = run_error(capsys, "score", run, "--source-file", str(short), "--target-file", str(long))
    assert line == f"attnmt: error: {short}: ends at line 1; the other file goes on: expected as many lines"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"1 2\n\xff\n")
    assert "bad.txt" in run_error(capsys, "score", run, "--source-file", str(long), "--target-file", str(bad))
    assert run_error(capsys, "score", run, "--source", "1", "--target", "1", "--shortlist").endswith(
        "a score is the model's over the whole vocabulary: drop --shortlist"
    )

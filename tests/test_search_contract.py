"""The contract of steering: a sentence that is not steered is searched exactly as the plain search
would, whatever its batch-mates ask for. In a batch where other sentences must begin with a
prefix or contain required phrases, a free sentence gets the plain search's hypotheses (the same
tokens; scores and attention equal within float tolerance), greedy or beam, for every decoder and
score."""

import random

import pytest
import torch
import yaml

from attnmt.loading import ModelSpec, load
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions, length_penalty, never_generated
from attnmt.search.prefix import Prefix
from attnmt.utils import UserError
from attnmt.vocab import BOS, EOS
from tests.cli_helpers import run_error, run_ok
from tests.search_helpers import (
    KINDS,
    SEARCH_NAMES,
    SEARCHES,
    SOURCES,
    TGT_VOCAB,
    assert_same_search,
    kind_name,
    untrained,
)

STEERED = {0, 5, 7}  # the sentences given a prefix or phrases; the others are free


@pytest.mark.parametrize("options", SEARCHES, ids=SEARCH_NAMES)
@pytest.mark.parametrize("kind", KINDS, ids=kind_name)
def test_a_free_sentence_beside_required_phrases_is_searched_as_plain_search(kind, options):
    model = untrained(kind)
    plain = decode_all(model, SOURCES, options, batch_size=4)
    required_phrases = [[[4 + n % 5], [6, 7]] if n in STEERED else [] for n in range(len(SOURCES))]
    steered = decode_all(model, SOURCES, options, batch_size=4, required_phrases=required_phrases)
    for sentence in range(len(SOURCES)):
        if sentence not in STEERED:
            assert_same_search(steered[sentence], plain[sentence], sentence)


@pytest.mark.parametrize("options", SEARCHES, ids=SEARCH_NAMES)
@pytest.mark.parametrize("kind", KINDS, ids=kind_name)
def test_a_free_sentence_beside_prefixed_ones_is_searched_as_plain_search(kind, options):
    model = untrained(kind)
    plain = decode_all(model, SOURCES, options, batch_size=4)
    prefixes = [Prefix((4 + n % 5, 9), (), TGT_VOCAB) if n in STEERED else None for n in range(len(SOURCES))]
    steered = decode_all(model, SOURCES, options, batch_size=4, prefixes=prefixes)
    for sentence in range(len(SOURCES)):
        if sentence not in STEERED:
            assert_same_search(steered[sentence], plain[sentence], sentence)
        else:
            assert all(h.tokens[:2] == [4 + sentence % 5, 9] for h in steered[sentence])  # steering did apply


def reference_best_finished(model, source: list[int], options: SearchOptions) -> list[list[int]]:
    """OpenNMT-py's beam search, one sentence, written from its rule: each step keeps the top K of
    the live hypotheses' extensions; those ending in </s> finish and leave the beam, and the
    sentence ends when the step's best extension is one of them (or K have finished, or at the
    length limit, where </s> is forced). The finished are ranked by log-probability / penalty."""
    src, lengths = torch.tensor([source]), torch.tensor([len(source)])
    limit = int(options.length_limits(lengths)[0])
    memory = model.encode(src, lengths)
    live, finished = [(0.0, [], model.init_state(memory))], []
    for step in range(limit):
        candidates = []
        for log_prob, tokens, state in live:
            prev = torch.tensor([tokens[-1] if tokens else BOS])
            step_log_probs, next_state, _ = model.next_log_probs(prev, state, memory)
            step_log_probs = never_generated(step_log_probs)[0].detach()  # a reference: no gradient to keep
            for token in [EOS] if step + 1 >= limit else range(step_log_probs.numel()):
                candidates.append((log_prob + float(step_log_probs[token]), [*tokens, token], next_state))
        top = sorted((c for c in candidates if c[0] > float("-inf")), key=lambda c: -c[0])[: options.beam_size]
        finished += [c for c in top if c[1][-1] == EOS]
        live = [c for c in top if c[1][-1] != EOS]
        if top[0][1][-1] == EOS or len(finished) >= options.beam_size or not live:
            break

    def score(hypothesis):
        log_prob, tokens, _ = hypothesis
        return log_prob / float(length_penalty(torch.tensor(len(tokens)), options.length_penalty))

    return [tokens[:-1] for _, tokens, _ in sorted(finished, key=score, reverse=True)[: options.n_best]]


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_best_finished_stopping_is_opennmt_pys_rule(tiny, alpha):
    """On a trained model (a tiny reversal run), whose outputs end where they should."""
    model = load(ModelSpec(tiny / "run", device="cpu")).model
    sources = [[random.Random(n).randrange(4, 12) for _ in range(1 + n % 9)] for n in range(16)]
    options = SearchOptions(beam_size=4, n_best=2, length_penalty=alpha, stopping="best_finished")
    searched = decode_all(model, sources, options, batch_size=5)
    for sentence, source in enumerate(sources):
        expected = reference_best_finished(model, source, options)
        assert [h.tokens for h in searched[sentence]] == expected, f"sentence {sentence}"
    fixed = decode_all(model, sources, options, batch_size=5, fixed_shapes=True)  # the fixed-shape search lacks it
    assert [[h.tokens for h in hs] for hs in fixed] == [[h.tokens for h in hs] for hs in searched]
    limits = options.length_limits(torch.tensor([len(source) for source in sources]))
    ended = [0 < len(best[0].tokens) < int(limit) - 1 for best, limit in zip(searched, limits, strict=True)]
    assert sum(ended) >= 4, ended  # the model ended these itself: the stopping rule had a say


def test_best_finished_stopping_is_refused_where_the_search_cannot_do_it(tmp_path):
    model = untrained(KINDS[0])
    options = SearchOptions(beam_size=3, stopping="best_finished")
    with pytest.raises(UserError, match="stopping best_finished is not available with required phrases"):
        decode_all(model, SOURCES, options, required_phrases=[[[5]]] + [[]] * (len(SOURCES) - 1))
    with pytest.raises(UserError, match="stopping must be one of k_finished, best_finished"):
        SearchOptions(stopping="first")


def test_the_stopping_rule_from_the_command_line(reverse_run, capsys):
    options = SearchOptions(beam_size=3, stopping="best_finished")
    expected = load(ModelSpec(reverse_run, device="cpu")).translate(["a b c d"], options)[0].text
    out = run_ok(capsys, "translate", str(reverse_run), "a b c d", "--beam", "3", "--stopping", "best_finished")
    assert out.strip() == expected
    error = run_error(
        capsys, "translate", str(reverse_run), "a b", "--beam", "3", "--stopping", "best_finished", "--require", "b"
    )
    assert "--stopping: stopping best_finished is not available with required phrases" in error


def test_a_web_page_is_not_exported_from_a_run_whose_search_it_cannot_do(copied_run, tmp_path):
    from attnmt.web.export import export_web

    config = yaml.safe_load((copied_run / "config.yaml").read_text())
    config["decode"]["stopping"] = "best_finished"
    (copied_run / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(UserError, match="web page's beam search stops once K hypotheses have ended"):
        export_web(copied_run, tmp_path / "site")
    config["decode"] |= {"stopping": "k_finished", "min_length": 2}
    (copied_run / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(UserError, match="web page's search has no minimum length"):
        export_web(copied_run, tmp_path / "site")
    assert not (tmp_path / "site").exists()

"""Prefix-constrained decoding: the search continues the start of a translation, forcing its
complete words and spelling an unfinished last word, for every decoder and engine; free prefixes
change nothing, and a prefix the search would have chosen anyway gives the same translation."""

import itertools
import random
from dataclasses import replace

import pytest

from attnmt.loading import ModelSpec, load
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions
from attnmt.search.prefix import Prefix, parse, surfaces
from attnmt.tokenize import SentencePieceTokenizer, WordTokenizer, train_sentencepiece
from attnmt.utils import UserError
from attnmt.vocab import SPECIALS, UNK, Vocab
from tests.cli_helpers import run_error, run_ok
from tests.data_helpers import corpus_lines
from tests.search_helpers import ENGINES, translator_for
from tests.search_helpers import TINY_SOURCES as SOURCES
from tests.serve_helpers import serving


class Surfaces:
    """A tokenizer stand-in whose tokens' surfaces are given outright."""

    def surface(self, token: str) -> str:
        return token.replace("_", " ")


def spells(sequence, surface_of, word: str) -> bool:
    """The reference: a token sequence spells `word` when every token but the last leaves part of
    it unwritten and the text written so far never leaves it, and the last reaches its end."""
    written = ""
    for position, token in enumerate(sequence):
        written += surface_of[token]
        if not (word.startswith(written) or written.startswith(word)):
            return False
        if len(written) >= len(word):
            return position == len(sequence) - 1
    return False


def accepted(prefix: Prefix, sequence) -> bool:
    """Whether the prefix's automaton takes the token sequence from its first state to spelled."""
    state, spelled = 0, len(prefix.moves)
    for position, token in enumerate(sequence):
        moves = dict(prefix.moves[state]) if state < spelled else {}
        if token not in moves:
            return False
        state = moves[token]
        if state == spelled:
            return position == len(sequence) - 1
    return False


@pytest.mark.parametrize("word", ["_abc", "_ab", "_a", "_abx", "_zz"])
def test_the_spelling_automaton_takes_exactly_the_token_sequences_that_spell_the_word(word):
    tokens = ["_a", "_ab", "_abc", "_abcd", "b", "bc", "c", "cd", "x", "_b", "_"]
    vocab = Vocab(SPECIALS + tuple(tokens))
    surface_of = {vocab.token_to_id(token): token.replace("_", " ") for token in tokens}
    word = word.replace("_", " ")
    try:
        prefix = parse(word, _Typed(word), vocab, surfaces(Surfaces(), vocab))
    except UserError:
        prefix = None
    found = False
    for length in range(1, 5):
        for sequence in itertools.product(sorted(surface_of), repeat=length):
            expected = spells(sequence, surface_of, word)
            found |= expected
            assert prefix is not None or not expected, sequence
            if prefix is not None:
                assert accepted(prefix, sequence) == expected, (word, [vocab.tokens[t] for t in sequence])
    assert (prefix is not None) == found  # an unspellable word is refused, a spellable one is not


class _Typed:
    """A tokenizer stand-in whose whole text is an unfinished word."""

    def __init__(self, word: str):
        self.word = word

    def prefix_tokens(self, text: str) -> tuple[list[str], str]:
        return [], self.word


def test_a_prefix_of_unknown_tokens_only_or_a_word_nothing_spells_is_refused():
    tokenizer = WordTokenizer("en")
    vocab = Vocab((*SPECIALS, "a", "man", "sleeps"))
    token_surfaces = surfaces(tokenizer, vocab)
    with pytest.raises(UserError, match="every token is unknown to the model's target vocabulary"):
        parse("zebra quokka ", tokenizer, vocab, token_surfaces)
    with pytest.raises(UserError, match="no tokens of the target vocabulary spell 'q'"):
        parse("a man q", tokenizer, vocab, token_surfaces)
    prefix = parse("a zebra sl", tokenizer, vocab, token_surfaces)  # unknown words among known ones are kept
    assert prefix.forced == (vocab.token_to_id("a"), UNK) and prefix.text == "a zebra"  # as typed
    assert prefix.moves[0] == ((vocab.token_to_id("sleeps"), 3),)  # " sl": " sleeps" spells it at once
    assert parse("a man ", tokenizer, vocab, token_surfaces) == Prefix((4, 5), (), len(vocab), "a man")


def test_a_sentencepiece_prefix_cut_anywhere_continues_into_the_whole_sentences_pieces(tmp_path):
    lines = corpus_lines("tatoeba", "fr")[:2500]
    tatoeba_pieces = SentencePieceTokenizer(
        train_sentencepiece(lines, vocab_size=500, model_type="bpe", cache_dir=tmp_path)
    )
    vocab = Vocab(SPECIALS + tuple(sorted({piece for line in lines for piece in tatoeba_pieces.tokenize(line)})))
    token_surfaces = surfaces(tatoeba_pieces, vocab)
    rng = random.Random(5)
    for sentence in rng.sample(corpus_lines("tatoeba", "fr")[2500:], 40):
        pieces = vocab.encode(tatoeba_pieces.tokenize(sentence))
        for cut in sorted(rng.sample(range(1, len(sentence) + 1), min(4, len(sentence)))):
            prefix = parse(sentence[:cut], tatoeba_pieces, vocab, token_surfaces)
            assert tuple(pieces[: len(prefix.forced)]) == prefix.forced, sentence[:cut]
            if prefix.moves:  # the rest of the sentence's pieces spell the unfinished word
                state, rest = 0, pieces[len(prefix.forced) :]
                while state < len(prefix.moves):
                    state = dict(prefix.moves[state])[rest.pop(0)]


SEARCHES = [SearchOptions(), SearchOptions(beam_size=3, n_best=2)]


def decoded(translator, options, prefixes=None):
    return decode_all(
        translator.model, SOURCES, options, shortlist=translator.shortlist, prefixes=prefixes, batch_size=4
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_free_prefixes_change_nothing(tiny, engine):
    translator = translator_for(tiny, engine)
    free = [Prefix((), (), len(translator.codec.tgt_vocab))] * len(SOURCES)
    for options in SEARCHES:
        expected, got = decoded(translator, options), decoded(translator, options, free)
        assert [[h.tokens for h in hs] for hs in got] == [[h.tokens for h in hs] for hs in expected]
        assert [[h.score for h in hs] for hs in got] == [[h.score for h in hs] for hs in expected]


@pytest.mark.parametrize("engine", ENGINES)
def test_its_own_start_as_prefix_gives_the_same_translation(tiny, engine):
    translator = translator_for(tiny, engine)
    size = len(translator.codec.tgt_vocab)
    for options in SEARCHES:
        best = [hypotheses[0] for hypotheses in decoded(translator, options)]
        for cut in (1, 2, 4):
            prefixes = [Prefix(tuple(h.tokens[:cut]), (), size) for h in best]
            again = [hypotheses[0] for hypotheses in decoded(translator, options, prefixes)]
            for before, after in zip(best, again, strict=True):
                if options.is_greedy:
                    assert after.tokens == before.tokens
                else:  # the same, or one the model scores at least as high
                    assert after.tokens == before.tokens or after.score >= before.score - 1e-5


@pytest.mark.parametrize("engine", ENGINES)
def test_every_output_starts_with_its_prefix_and_then_spells_its_word(tiny, engine):
    translator = translator_for(tiny, engine)
    size = len(translator.codec.tgt_vocab)
    rng = random.Random(11)
    # a made-up word: token a then token c, or token b alone
    a, b, c = 5, 6, 7
    spelled = (((a, 1), (b, 2)), ((c, 2),))
    prefixes = [
        Prefix(tuple(rng.randrange(4, size) for _ in range(rng.randrange(0, 3))), spelled if n % 2 else (), size)
        for n in range(len(SOURCES))
    ]
    for options in SEARCHES:
        for prefix, hypotheses in zip(prefixes, decoded(translator, options, prefixes), strict=True):
            for hypothesis in hypotheses:
                forced = len(prefix.forced)
                assert tuple(hypothesis.tokens[:forced]) == prefix.forced
                if prefix.moves:
                    rest = hypothesis.tokens[forced : forced + 2]
                    assert rest[:1] == [b] or rest == [a, c], rest


def test_translate_continues_text_prefixes_and_refuses_what_cannot_be_met(reverse_run, tmp_path, capsys):
    translator = load(ModelSpec(reverse_run, device="cpu"))
    sentences = ["a b c d", "e f g", "h h a"]
    prefixes = ["d c ", "g a", ""]  # complete words; an unfinished one; none
    for options in SEARCHES:
        translations = translator.translate(sentences, options, prefixes=prefixes)
        assert translations[0].text.startswith("d c ") and translations[1].text.startswith("g a")
        assert translations[2].text == translator.translate(sentences[2:], options)[0].text
        # a word the vocabulary lacks is forced as <unk>, and every output still shows it as typed
        [unknown] = translator.translate(
            sentences[:1], replace(options, n_best=options.beam_size), prefixes=["d zebra "]
        )
        assert unknown.tokens[:2] == ["d", "<unk>"]
        assert all(t.text.startswith("d zebra ") for t in [unknown, *unknown.alternatives])
    output = run_ok(capsys, "translate", str(reverse_run), "a b c d", "e f g", "--prefix", "d c", "--prefix", "")
    assert output.splitlines()[0].startswith("d c")
    lines = tmp_path / "lines.tsv"
    lines.write_text("a b c d\td c\ne f g\n", encoding="utf-8")
    from_file = run_ok(capsys, "translate", str(reverse_run), "--input", str(lines), "--prefix-column")
    assert from_file.splitlines()[0] == output.splitlines()[0]
    assert from_file.splitlines()[1] == output.splitlines()[1]
    refused = {
        ("a b", "--prefix", "a", "--prefix", "b"): "--prefix: 2 prefixes for 1 sentences: give one each",
        ("--prefix", "a"): "--prefix: --prefix goes with SENTENCE arguments; for --input lines use --prefix-column",
        ("a b", "--prefix", "zebra "): "--prefix: sentence 1: prefix 'zebra ': every token is unknown",
        ("", "--prefix", "a"): "--prefix: sentence 1 is empty: there is nothing for its prefix to continue",
        ("a", "--prefix", "a b c d e f g h i j k l m"): "--prefix: sentence 1: its prefix takes 13 tokens, more",
    }
    for arguments, message in refused.items():
        assert run_error(capsys, "translate", str(reverse_run), *arguments).startswith(f"attnmt: error: {message}")


def test_prefix_length_must_leave_room_for_eos_within_the_limit(reverse_run):
    translator = load(ModelSpec(reverse_run, device="cpu"))
    options = SearchOptions(max_length=3)  # two tokens, then EOS
    assert translator.translate(["a b c"], options, prefixes=["c b"])[0].text == "c b"
    with pytest.raises(UserError, match="its prefix takes 3 tokens, more than the 2 its length limit leaves"):
        translator.translate(["a b c"], options, prefixes=["c b a"])


def test_the_api_continues_prefixes_and_refuses_bad_ones_with_a_422(reverse_run):
    _, client = serving(str(reverse_run))
    with client:
        body = {"sentences": ["a b c d", "e f g"], "prefixes": ["d c", ""], "beam_size": 2}
        answer = client.post("/v1/translate", json=body)
        assert answer.status_code == 200, answer.text
        first, second = (sentence["hypotheses"][0]["text"] for sentence in answer.json()["translations"])
        assert first.startswith("d c")
        alone = client.post("/v1/translate", json={"sentences": ["e f g"], "beam_size": 2}).json()
        assert second == alone["translations"][0]["hypotheses"][0]["text"]
        refused = {
            "prefixes": (["d c"], "1 prefixes for 2 sentences: give one each"),
            "zebra": (["zebra ", ""], "sentence 0: prefix 'zebra ': every token is unknown"),
        }
        for prefixes, message in refused.values():
            answer = client.post("/v1/translate", json={"sentences": ["a b c d", "e f g"], "prefixes": prefixes})
            assert answer.status_code == 422 and answer.json()["field"] == "prefixes", answer.text
            assert message in answer.json()["error"]

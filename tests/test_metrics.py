"""Metrics: sacreBLEU semantics (multi-reference, signatures), buckets, bootstrap."""

import math

import pytest

from attnmt.data.textfiles import read_lines
from attnmt.metrics import (
    bleu,
    bleu_by_length,
    chrf,
    moses_bleu,
    moses_tokenized,
    paired_bootstrap,
    perplexity,
    reference_streams,
    tokenized_bleu,
)
from attnmt.utils import UserError
from tests.data_helpers import SHARED_DATA, needs_multi30k

HYPOTHESES = ["the cat sat on the mat .", "he is calm .", "i am at home ."]


def test_perfect_output_scores_100_and_signature_says_how():
    score = bleu(HYPOTHESES, [(h,) for h in HYPOTHESES])
    assert score.score == pytest.approx(100.0)
    assert "tok:13a" in score.signature and "nrefs:1" in score.signature
    assert chrf(HYPOTHESES, [(h,) for h in HYPOTHESES]).score == pytest.approx(100.0)


def test_extra_matching_reference_can_only_help():
    one_ref = [("a cat is sitting on the mat .",), ("he's calm .",), ("i'm home .",)]
    two_refs = [(*refs, hyp) for refs, hyp in zip(one_ref, HYPOTHESES, strict=True)]
    assert bleu(HYPOTHESES, two_refs).score > bleu(HYPOTHESES, one_ref).score
    assert "nrefs:2" in bleu(HYPOTHESES, two_refs).signature


def test_variable_reference_counts_become_padded_streams():
    streams = reference_streams([("a",), ("b", "c", "d"), ("e", "f")])
    assert streams == [["a", "b", "e"], [None, "c", "f"], [None, "d", None]]
    with pytest.raises(UserError):
        reference_streams([("a",), ()])


def test_tokenized_bleu_ignores_case():
    hyps = [["The", "Cat", "sat", "."]]
    refs = [[["the", "cat", "sat", "."]]]
    assert tokenized_bleu(hyps, refs).score == pytest.approx(100.0)
    assert tokenized_bleu([["the", "cat"]], refs).length_ratio == pytest.approx(2 / 4)


def test_length_buckets_partition_the_sentences():
    lengths = [1, 5, 10, 11, 25, 70]
    hyps = ["a b c d"] * 6
    refs = [("a b c d",)] * 6
    buckets = bleu_by_length(lengths, hyps, refs)
    assert sum(b.sentences for b in buckets) == 6
    assert [b.label for b in buckets] == ["1-10", "11-20", "21-30", ">60"]


def test_mismatched_lengths_are_user_errors():
    with pytest.raises(UserError, match="2 hypotheses but 1 reference sets"):
        bleu(["a", "b"], [("a",)])


def test_perplexity():
    assert perplexity(0.0, 10) == 1.0
    assert perplexity(10 * math.log(4), 10) == pytest.approx(4.0)
    assert perplexity(1e6, 1) == math.inf


def test_paired_bootstrap_prefers_the_better_system():
    refs = [(h,) for h in HYPOTHESES] * 10
    good = HYPOTHESES * 10
    bad = ["the dog ran .", "she is loud .", "you are out ."] * 10
    baseline, other = paired_bootstrap([("good", good), ("bad", bad)], refs, samples=200)
    assert baseline.p_value is None and baseline.bleu > other.bleu
    assert other.p_value < 0.05


def test_evaluation_counts_a_word_models_unk_as_the_one_token_it_wrote():
    """Tokenized BLEU re-tokenizes the detokenized output: "<unk>" must stay one (unmatched)
    token there, or a word model's outputs look 2 tokens longer for each word it did not know."""
    from types import SimpleNamespace

    from attnmt.data.splits import Example
    from attnmt.evaluation import evaluate

    class Writes:
        config = SimpleNamespace(data=SimpleNamespace(src_lang="en", tgt_lang="de", lowercase=True))

        def translate(self, sources, options):
            return [SimpleNamespace(text="ein <unk> läuft.") for _ in sources]

    scored = evaluate(Writes(), [Example("a man runs.", ("Ein Mann läuft.",))])
    assert "hyp_len = 4 ref_len = 4" in scored.tokenized_bleu.detail and scored.tokenized_bleu.length_ratio == 1


def test_moses_bleu_on_a_hand_worked_sentence():
    """The papers' metric lowercases, normalizes punctuation and Moses-tokenizes the hypothesis (the
    French elision split and escaped, the comma split off) before counting, as the dataset's
    references were made. By hand, "l&apos; homme , qui court ." against "l&apos; homme , qui court
    vite .": n-gram precisions 6/6, 4/5, 3/4, 2/3; brevity penalty exp(1 - 7/6)."""
    assert moses_tokenized("L\u2019homme, qui court.", "fr") == "l&apos; homme , qui court ."
    scored = moses_bleu(["L\u2019homme, qui court."], [["l&apos; homme , qui court vite ."]], "fr")
    by_hand = math.exp(1 - 7 / 6) * (6 / 6 * 4 / 5 * 3 / 4 * 2 / 3) ** (1 / 4) * 100
    assert scored.score == pytest.approx(by_hand, abs=1e-9)
    assert scored.length_ratio == pytest.approx(6 / 7)
    assert scored.name == "BLEU moses-tok-lc"
    assert all(part in scored.signature for part in ("case:lc", "tok:moses-fr", "refs:dataset-tok"))


def test_moses_bleu_escapes_as_the_references_do():
    """A quote in the output is `&quot;` in the dataset's references: unescaped, it would not match."""
    assert moses_tokenized('Er sagt "Hallo" & geht.', "de") == "er sagt &quot; hallo &quot; &amp; geht ."
    scored = moses_bleu(['Er sagt "Hallo" & geht.'], [["er sagt &quot; hallo &quot; &amp; geht ."]], "de")
    assert scored.score == pytest.approx(100)


@needs_multi30k
@pytest.mark.parametrize("lang", ["de", "fr"])
def test_moses_tokenized_remakes_the_datasets_tokenized_references(lang):
    """The pipeline is the dataset's own: the raw test2016 references, through `moses_tokenized`,
    are its tokenized file again on all but a line or two (Moses's normalizer moves a period out of
    closing quotes on some lines; the published files were made by an older release)."""
    raw = read_lines(SHARED_DATA / "multi30k" / f"test_2016_flickr.{lang}.gz")
    published = read_lines(SHARED_DATA / "multi30k" / "tok" / f"test_2016_flickr.lc.norm.tok.{lang}.gz")
    differing = sum(moses_tokenized(line, lang) != tokens.strip() for line, tokens in zip(raw, published, strict=True))
    assert len(raw) == 1000 and differing <= 2


@needs_multi30k
def test_evaluation_scores_the_papers_bleu_against_the_datasets_tokenized_references(monkeypatch):
    """Multi30k's own tokenized references are found beside its raw files and matched to each
    example's reference: outputs equal to the references score 100, the word-token figure beside
    it; a reference the tokenized file does not hold is refused by name."""
    from types import SimpleNamespace

    from attnmt.config import DataConfig
    from attnmt.data import corpora
    from attnmt.evaluation import evaluate

    monkeypatch.setenv("ATTNMT_DATA", str(SHARED_DATA))
    data = DataConfig(corpus="multi30k", src_lang="en", tgt_lang="de")
    examples = corpora.load_corpus(data).test
    tokenized = corpora.tokenized_references(data, "test")
    assert corpora.tokenized_references(DataConfig(corpus="tatoeba-eng-fra"), "test") is None
    czech = DataConfig(corpus="multi30k", src_lang="en", tgt_lang="cs")  # the dataset tokenized no Czech
    assert corpora.tokenized_references(czech, "test") is None

    class Echoes:  # writes each example's reference: the tokenized files must match them line by line
        config = SimpleNamespace(data=SimpleNamespace(src_lang="en", tgt_lang="de", lowercase=False))

        def translate(self, sources, options):
            return [SimpleNamespace(text=example.refs[0]) for example in examples][: len(sources)]

    scored = evaluate(Echoes(), examples, tokenized=tokenized)
    assert scored.moses_bleu is not None and scored.moses_bleu.score == pytest.approx(100)
    assert scored.figures()["moses_bleu"] == scored.moses_bleu.score and "tokenized_bleu" in scored.figures()
    with pytest.raises(UserError, match=r"no tokenized reference for 'Zwei Hunde\.'"):
        evaluate(Echoes(), [examples[0].__class__("two dogs.", ("Zwei Hunde.",))], tokenized=tokenized)


@needs_multi30k
def test_a_multi30k_reference_file_given_by_path_brings_its_tokenized_references(tmp_path):
    """`attnmt evaluate --src ... --ref multi30k/test_2017_flickr.de.gz` scores the papers' BLEU too:
    the tokenized file beside it is found; a file outside a multi30k folder, or several, bring none."""
    from attnmt.evaluation import files_tokenized

    reference = SHARED_DATA / "multi30k" / "test_2017_flickr.de.gz"
    tokenized = files_tokenized([reference])
    raw = read_lines(reference)
    assert tokenized is not None and len(raw) == 1000 and tokenized[raw[0].strip()].startswith(raw[0].lower()[:3])
    copied = tmp_path / "test_2017_flickr.de.gz"
    copied.write_bytes(reference.read_bytes())
    assert files_tokenized([copied]) is None and files_tokenized([reference, reference]) is None

"""Translation metrics, all from sacreBLEU so that our numbers match everyone else's.

- `bleu` / `chrf`: sacreBLEU on detokenized text (its own 13a tokenization), with the
  signature that says exactly how the number was computed. Multi-reference: each sentence
  may have any number of references (Tatoeba has up to dozens); sacreBLEU takes them as
  reference streams padded with None (`nrefs:var` in the signature).
- `sentence_chrf`: chrF of each sentence alone, to rank a test set's translations.
- `moses_bleu`: the papers' tokenized, lowercased BLEU (multi-bleu.perl's figure): hypotheses
  lowercased, punctuation-normalized and tokenized by the Moses tokenizer itself (sacremoses,
  escaped as Moses escapes), scored against the dataset's own tokenized references (Multi30k
  ships them). Named `BLEU moses-tok-lc`; never compare it with sacreBLEU's.
- `tokenized_bleu`: BLEU on attnmt's own word tokens, lowercased (tokenize=none), named
  `BLEU word-tok-lc`: the tokenized figure where no tokenized references exist. The word
  tokens follow the Moses rules on most lines of Multi30k's test sets, not on all (they differ on
  abbreviations), so it is close to `moses_bleu`, not the same.
- `bleu_by_length`: BLEU per source-length bucket (Bahdanau et al. 2015, Figure 2).
- `paired_bootstrap`: sacreBLEU's paired bootstrap resampling between systems.
- `pooled_bootstrap`: the paired bootstrap of two systems' BLEU difference pooled over seeds, from
  each sentence's BLEU statistics, as a comparison between toolkits is judged.

Leaf module: imports nothing from attnmt but utils, and no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Sized
from dataclasses import dataclass
from typing import cast

from sacrebleu.metrics import BLEU, CHRF
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from attnmt.utils import UserError

References = Sequence[Sequence[str]]  # per sentence: one or more reference strings


@dataclass(frozen=True)
class Score:
    name: str
    score: float
    signature: str
    detail: str
    length_ratio: float | None = None  # BLEU only: hypothesis length / reference length (sacreBLEU's)

    def __str__(self) -> str:
        return f"{self.name} {self.score:.2f} ({self.signature})"


def reference_streams(references: References) -> list[list[str | None]]:
    """Per-sentence reference lists -> sacreBLEU's streams (stream k = k-th reference, or None)."""
    if not references:
        return [[]]
    if any(len(refs) == 0 for refs in references):
        raise UserError("every sentence needs at least one reference")
    depth = max(len(refs) for refs in references)
    return [[refs[k] if k < len(refs) else None for refs in references] for k in range(depth)]


def _streams(references: References) -> Sequence[Sequence[str]]:
    """`reference_streams` as sacreBLEU's hints have them: it takes None for a missing reference
    (its documented `nrefs:var`), though the hints say strings only."""
    return cast("Sequence[Sequence[str]]", reference_streams(references))


def _check(hypotheses: Sized, references: Sized) -> None:
    if len(hypotheses) != len(references):
        raise UserError(f"{len(hypotheses)} hypotheses but {len(references)} reference sets")


def bleu(hypotheses: Sequence[str], references: References, lowercase: bool = False) -> Score:
    """sacreBLEU BLEU on detokenized text, multi-reference. `lowercase` for models trained on
    lowercased text (the signature then says case:lc)."""
    _check(hypotheses, references)
    metric = BLEU(lowercase=lowercase)
    result = metric.corpus_score(list(hypotheses), _streams(references))
    ratio = result.sys_len / result.ref_len if result.ref_len else None
    return Score("BLEU", result.score, str(metric.get_signature()), str(result), ratio)


def chrf(hypotheses: Sequence[str], references: References, lowercase: bool = False) -> Score:
    """sacreBLEU chrF2 on detokenized text, multi-reference."""
    _check(hypotheses, references)
    metric = CHRF(lowercase=lowercase)
    result = metric.corpus_score(list(hypotheses), _streams(references))
    return Score("chrF2", result.score, str(metric.get_signature()), str(result))


def sentence_chrf(hypotheses: Sequence[str], references: References, lowercase: bool = False) -> list[float]:
    """chrF2 of each sentence on its own, against all its references: for finding the worst
    translations of a test set (a corpus score is not the mean of these)."""
    _check(hypotheses, references)
    metric = CHRF(lowercase=lowercase)
    return [metric.sentence_score(h, list(refs)).score for h, refs in zip(hypotheses, references, strict=True)]


def tokenized_bleu(
    hypothesis_tokens: Sequence[Sequence[str]], reference_tokens: Sequence[Sequence[Sequence[str]]]
) -> Score:
    """BLEU on attnmt's word tokens, lowercased: tokenized BLEU where no tokenized references exist."""
    _check(hypothesis_tokens, reference_tokens)
    metric = BLEU(tokenize="none", lowercase=True, force=True)
    hypotheses = [" ".join(tokens) for tokens in hypothesis_tokens]
    references = [[" ".join(tokens) for tokens in refs] for refs in reference_tokens]
    result = metric.corpus_score(hypotheses, _streams(references))
    ratio = result.sys_len / result.ref_len if result.ref_len else None
    return Score("BLEU word-tok-lc", result.score, str(metric.get_signature()), str(result), ratio)


def moses_tokenized(text: str, lang: str) -> str:
    """`text` as a Multi30k `lc.norm.tok` file has it: lowercased, then punctuation-normalized, then
    Moses-tokenized with the language's rules, `&`, `'`, `"` and the like escaped as `&amp;`,
    `&apos;`, `&quot;` (the dataset's pipeline: lowercase.perl, normalize-punctuation.perl -l,
    tokenizer.perl -l, without -a). Tokens are joined by single spaces."""
    normalized = _moses(MosesPunctNormalizer, lang).normalize(text.lower())
    return " ".join(_moses(MosesTokenizer, lang).tokenize(normalized, escape=True))


def _moses(kind: type, lang: str):
    key = (kind, lang)
    if key not in _MOSES:  # building one reads its language's files and compiles its rules
        _MOSES[key] = kind(lang=lang)
    return _MOSES[key]


_MOSES: dict[tuple[type, str], object] = {}


def moses_bleu(hypotheses: Sequence[str], tokenized_references: References, lang: str) -> Score:
    """The papers' tokenized, lowercased BLEU: each hypothesis `moses_tokenized` in `lang`, then BLEU
    on whitespace tokens (sacreBLEU with tokenize=none, as multi-bleu.perl counts) against
    `tokenized_references`, the dataset's own lowercased, normalized, Moses-tokenized lines. The
    signature says so: case:lc, tok:moses-LANG, refs:dataset-tok."""
    _check(hypotheses, tokenized_references)
    metric = BLEU(tokenize="none", force=True)
    tokenized = [moses_tokenized(hypothesis, lang) for hypothesis in hypotheses]
    result = metric.corpus_score(tokenized, _streams(tokenized_references))
    ratio = result.sys_len / result.ref_len if result.ref_len else None
    signature = str(metric.get_signature()).replace("case:mixed", "case:lc").replace("tok:none", f"tok:moses-{lang}")
    return Score("BLEU moses-tok-lc", result.score, f"{signature}|refs:dataset-tok", str(result), ratio)


def perplexity(loss_sum: float, tokens: int) -> float:
    """exp of the mean per-token negative log-likelihood (inf on overflow)."""
    if tokens == 0:
        return float("nan")
    mean = loss_sum / tokens
    return math.exp(mean) if mean < 700 else float("inf")


DEFAULT_LENGTH_BUCKETS = (0, 10, 20, 30, 40, 50, 60)


@dataclass(frozen=True)
class BucketScore:
    low: int
    high: int | None  # None: no upper bound
    sentences: int
    bleu: float

    @property
    def label(self) -> str:
        return f"{self.low + 1}-{self.high}" if self.high is not None else f">{self.low}"


def bleu_by_length(
    source_lengths: Sequence[int],
    hypotheses: Sequence[str],
    references: References,
    edges: Sequence[int] = DEFAULT_LENGTH_BUCKETS,
    lowercase: bool = False,
) -> list[BucketScore]:
    """sacreBLEU per source-length bucket (low, high]; empty buckets are left out."""
    _check(hypotheses, references)
    if len(source_lengths) != len(hypotheses):
        raise UserError(f"{len(source_lengths)} source lengths but {len(hypotheses)} hypotheses")
    bounds = [(edges[k], edges[k + 1]) for k in range(len(edges) - 1)] + [(edges[-1], None)]
    buckets = []
    for low, high in bounds:
        members = [i for i, n in enumerate(source_lengths) if n > low and (high is None or n <= high)]
        if members:
            score = bleu([hypotheses[i] for i in members], [references[i] for i in members], lowercase).score
            buckets.append(BucketScore(low, high, len(members), score))
    return buckets


@dataclass(frozen=True)
class BootstrapResult:
    system: str
    bleu: float
    mean: float
    ci: float  # half-width of the 95% confidence interval
    p_value: float | None  # None for the baseline (the first system)


def paired_bootstrap(
    systems: Sequence[tuple[str, Sequence[str]]], references: References, samples: int = 1000, lowercase: bool = False
) -> list[BootstrapResult]:
    """Paired bootstrap resampling (Koehn 2004) of BLEU; the first system is the baseline."""
    from sacrebleu.significance import PairedTest, Result

    for _, hypotheses in systems:
        _check(hypotheses, references)
    test = PairedTest(
        [(name, list(hyps)) for name, hyps in systems],
        {"BLEU": BLEU(lowercase=lowercase)},
        _streams(references),
        test_type="bs",
        n_samples=samples,
    )
    _, scores = test()
    results = []
    for index, ((name, _), result) in enumerate(zip(systems, scores["BLEU"], strict=True)):
        # a metric's column holds Results (names are the "System" column's); the bootstrap sets mean and ci
        assert isinstance(result, Result) and result.mean is not None and result.ci is not None
        p_value: float | None = None
        if index > 0:  # every system but the baseline has its p-value
            assert result.p_value is not None
            p_value = float(result.p_value)
        results.append(BootstrapResult(name, float(result.score), float(result.mean), float(result.ci), p_value))
    return results


@dataclass(frozen=True)
class PooledDifference:
    """BLEU(a) - BLEU(b), the mean over seeds, with its 95% paired-bootstrap interval."""

    delta: float
    low: float
    high: float
    seeds: int
    samples: int

    @property
    def verdict(self) -> str:
        """ "ahead" when the interval lies above zero, "behind" below it, else "level"."""
        return "ahead" if self.low > 0 else "behind" if self.high < 0 else "level"


def _corpus_bleu(stats):
    """BLEU (0-100) of each row of summed statistics (..., 6): hypothesis length, reference length,
    matched 1- to 4-grams; a sentence of h tokens has max(h - n + 1, 0) n-grams, summed beforehand."""
    import numpy as np

    hyp, ref, matched, total = stats[..., 0], stats[..., 1], stats[..., 2:6], stats[..., 6:10]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_precision = np.log(matched / total).mean(axis=-1)
        brevity = np.minimum(0.0, 1.0 - ref / hyp)
    return np.where((matched > 0).all(axis=-1), 100 * np.exp(log_precision + brevity), 0.0)


def sentence_bleu_stats(lines: Sequence[str]):
    """Per-sentence BLEU statistics as sacreBLEU writes them ("h r m1 m2 m3 m4") -> (N, 10) array:
    the six, then each order's n-gram count max(h - n + 1, 0)."""
    import numpy as np

    stats = np.array([[float(value) for value in line.split()] for line in lines], dtype=np.float64)
    if stats.ndim != 2 or stats.shape[1] != 6:
        raise UserError("expected six statistics a sentence: hypothesis length, reference length, 4 matches")
    totals = np.stack([np.maximum(stats[:, 0] - n + 1, 0) for n in range(1, 5)], axis=1)
    return np.concatenate([stats, totals], axis=1)


def pooled_bootstrap(
    seeds: Sequence[tuple[Sequence[str], Sequence[str]]], samples: int = 1000, seed: int = 12345
) -> PooledDifference:
    """Paired bootstrap (Koehn 2004) of BLEU(a) - BLEU(b) pooled over seeds: `seeds` holds, for each
    seed, both systems' per-sentence statistics on one test set. Every sample draws one resampling of
    the sentences, used for every seed and both systems; its difference is the mean over seeds of
    each seed's corpus-BLEU difference. The interval is the samples' 2.5th to 97.5th percentile."""
    import numpy as np

    if not seeds:
        raise UserError("no seeds to compare")
    pairs = [(sentence_bleu_stats(a), sentence_bleu_stats(b)) for a, b in seeds]
    sentences = {len(stats) for pair in pairs for stats in pair}
    if len(sentences) != 1:
        raise UserError(f"every seed and system must score the same sentences, got counts {sorted(sentences)}")
    count = sentences.pop()
    draws = np.random.default_rng(seed).integers(0, count, size=(samples, count))  # (samples, N)
    differences = np.zeros(samples)
    observed = 0.0
    for a, b in pairs:
        observed += float(_corpus_bleu(a.sum(axis=0)) - _corpus_bleu(b.sum(axis=0))) / len(pairs)
        differences += (_corpus_bleu(a[draws].sum(axis=1)) - _corpus_bleu(b[draws].sum(axis=1))) / len(pairs)
    low, high = np.percentile(differences, [2.5, 97.5])
    return PooledDifference(observed, float(low), float(high), len(pairs), samples)

"""Whether the exported page tokenizes as attnmt does: attnmt/web/static/tokenizers.js, run in
Node, against `attnmt.tokenize` on every test sentence of the corpora the configs translate.

    python -m benchmarks.web_tokenizers [--cache DIR] [--json benchmarks/results/web-tokenizers.json]

Corpora: Multi30k's test2016 (English and German: configs/multi30k-en-de.yaml) and the Tatoeba
test split of `make demo` (configs/demo.yaml: English sources and all their French references).
Tokenizers, for each language: the word tokenizer with lowercase off and on, and SentencePiece
bpe and unigram models trained by `train_sentencepiece` on that language's training sentences,
lowercased, at the config's vocabulary size (6,000 and 4,000), as `attnmt train` trains them.
For each, the sentences compared, those the page tokenizes into Python's tokens, and those whose
Python tokens it detokenizes into Python's text. Every sentence is the target of one direction.
Models are cached in --cache (default: a temporary folder), by their training data.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece

import attnmt.web
from attnmt.codec import sample_pairs
from attnmt.config import load_config
from attnmt.data.corpora import load_corpus
from attnmt.tokenize import SentencePieceTokenizer, Tokenizer, WordTokenizer, train_sentencepiece
from attnmt.web.tokenizers import web_tokenizer

TOKENIZERS_JS = Path(attnmt.web.__file__).parent / "static" / "tokenizers.js"
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TOKENIZER_NAMES = ("word", "word-lowercase", "bpe", "unigram")

# Reads [{spec, normalize, texts, token_lists}, ...] on stdin; writes [{tokens, texts}, ...]: each
# text tokenized (or normalizeText'ed, with the spec's Unicode tables if there is a spec) and each
# token list detokenized. A call that throws gives {error} in its place.
_RUNNER = """
import {createTokenizer, normalizeText} from %s;
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const attempt = (work) => { try { return work(); } catch (error) { return {error: String(error)}; } };
const jobs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const results = jobs.map(({spec, normalize, texts, token_lists}) => {
  const tokenizer = normalize ? {tokenize: (text) => normalizeText(text, spec)} : createTokenizer(spec);
  return {
    tokens: texts.map((text) => attempt(() => tokenizer.tokenize(text))),
    texts: token_lists.map((tokens) => attempt(() => tokenizer.detokenize(tokens))),
  };
});
process.stdout.write(JSON.stringify(results));
"""


def node_program() -> str | None:
    return shutil.which("node")


def node_version() -> str | None:
    node = node_program()
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() if node else None


def run_in_node(jobs: Sequence[dict]) -> list[dict]:
    """tokenizers.js on `jobs` in one Node process: for each {"spec": a `web_tokenizer` spec,
    "texts": [...], "token_lists": [[...], ...]}, {"tokens": one result per text, "texts": one
    per token list}. With "normalize": true, the texts get `normalizeText` (with the Unicode
    tables of the spec, if not None) instead of the tokenizer."""
    script = _RUNNER % json.dumps(TOKENIZERS_JS.as_uri())
    jobs = [{"spec": None, "normalize": False, "texts": [], "token_lists": [], **job} for job in jobs]
    done = subprocess.run(
        [node_program() or "node", "--input-type=module", "--eval", script],
        input=json.dumps(jobs).encode(),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"node failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    return json.loads(done.stdout)


@dataclass
class Language:
    """One language of a corpus: its test sentences, and the training sentences and settings a
    SentencePiece model of it is trained with."""

    corpus: str
    lang: str
    sentences: list[str]
    training: list[str]
    spm_vocab_size: int
    lowercase: bool


def languages(data_dir: str | None = None, training_pairs: int | None = None) -> list[Language]:
    """Multi30k test2016 en and de, the demo's Tatoeba test split en and fr (the module docstring);
    SentencePiece trains on at most `training_pairs` of the training pairs (drawn as
    data.tokenizer_sample draws them), or all of them."""
    found = []
    for corpus, config in (("multi30k-test2016", "multi30k-en-de.yaml"), ("tatoeba-demo-test", "demo.yaml")):
        cfg = load_config(CONFIGS / config).with_data_dir(data_dir).data
        splits = load_corpus(cfg)
        sources = [example.src for example in splits.test]
        references = [ref for example in splits.test for ref in example.refs]
        pairs = sample_pairs(splits.train, training_pairs or len(splits.train), cfg.split_seed)
        for lang, sentences, side in ((cfg.src_lang, sources, 0), (cfg.tgt_lang, references, 1)):
            training = [pair[side] for pair in pairs]
            found.append(Language(corpus, lang, sentences, training, cfg.spm_vocab_size, cfg.lowercase))
    return found


def tokenizers(language: Language, cache_dir: Path) -> dict[str, Tokenizer]:
    """{name: tokenizer} of `TOKENIZER_NAMES` for one language, models trained into `cache_dir`."""
    made: dict[str, Tokenizer] = {
        "word": WordTokenizer(language.lang),
        "word-lowercase": WordTokenizer(language.lang, lowercase=True),
    }
    training = [text.lower() for text in language.training] if language.lowercase else language.training
    for model_type in ("bpe", "unigram"):
        model = train_sentencepiece(
            training, vocab_size=language.spm_vocab_size, model_type=model_type, cache_dir=cache_dir
        )
        made[model_type] = SentencePieceTokenizer(model, lowercase=language.lowercase)
    return made


def compare(cases: Sequence[tuple[Tokenizer, list[str]]], examples: int = 3) -> list[dict]:
    """For each (tokenizer, sentences): the sentences, how many the page tokenizes equally and
    how many of their Python tokens it detokenizes equally, and the first few that differ."""
    python_tokens = [[tokenizer.tokenize(text) for text in texts] for tokenizer, texts in cases]
    jobs = [
        {"spec": web_tokenizer(tokenizer), "texts": texts, "token_lists": tokens}
        for (tokenizer, texts), tokens in zip(cases, python_tokens, strict=True)
    ]
    rows = []
    for (tokenizer, texts), tokens, page in zip(cases, python_tokens, run_in_node(jobs), strict=True):
        detokenized = [tokenizer.detokenize(each) for each in tokens]
        differ = [
            {"text": text, "python": (want, want_text), "page": (got, got_text)}
            for text, want, got, want_text, got_text in zip(
                texts, tokens, page["tokens"], detokenized, page["texts"], strict=True
            )
            if want != got or want_text != got_text
        ]
        rows.append(
            {
                "sentences": len(texts),
                "tokenize_equal": sum(want == got for want, got in zip(tokens, page["tokens"], strict=True)),
                "detokenize_equal": sum(want == got for want, got in zip(detokenized, page["texts"], strict=True)),
                "differ": differ[:examples],
            }
        )
    return rows


def measure(cache_dir: Path, data_dir: str | None = None) -> list[dict]:
    """One row per corpus, language and tokenizer (the module docstring)."""
    cases, keys = [], []
    for language in languages(data_dir):
        for name, tokenizer in tokenizers(language, cache_dir).items():
            cases.append((tokenizer, language.sentences))
            keys.append({"corpus": language.corpus, "lang": language.lang, "tokenizer": name})
    return [{**key, **row} for key, row in zip(keys, compare(cases), strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.web_tokenizers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="where the SentencePiece models are trained")
    parser.add_argument("--data-dir", default=None, help="where the corpora are (default: $ATTNMT_DATA, the cache)")
    parser.add_argument("--json", type=Path, default=None, help="also write the counts here")
    args = parser.parse_args(argv)
    if node_program() is None:
        print("error: node (Node.js 20 or later) is not on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="web-tokenizers.") as scratch:
        rows = measure(args.cache or Path(scratch), args.data_dir)
    for row in rows:
        print(
            f"{row['corpus']:18} {row['lang']} {row['tokenizer']:15} {row['sentences']:5} sentences: "
            f"tokens equal {row['tokenize_equal']}, text equal {row['detokenize_equal']}"
        )
    if args.json:
        from benchmarks.measure import describe_machine, write_results  # torch: only to write results

        machine = {**describe_machine(), "node": node_version()}
        versions = {"sentencepiece": sentencepiece.__version__, "python_unicode": unicodedata.unidata_version}
        totals = {key: sum(row[key] for row in rows) for key in ("sentences", "tokenize_equal", "detokenize_equal")}
        results = {"machine": machine, **versions, "totals": {"cases": len(rows), **totals}, "results": rows}
        write_results(args.json, results, "benchmarks.web_tokenizers", argv)
    return 0 if all(row["sentences"] == row["tokenize_equal"] == row["detokenize_equal"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

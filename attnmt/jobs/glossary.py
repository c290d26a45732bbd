"""Glossaries: source terms that must be translated a given way, applied as required phrases.

A glossary file holds one term a line, SOURCE<TAB>TARGET (UTF-8; blank lines and lines that
start with '#' are skipped). For each sentence, the terms whose source words occur in it become
required phrases of its translation (`search.phrases`, as `--require` gives them), so a
translation that has room for them contains them.

Matching is on words, never on subword pieces: the sentence and every source term are split by
the run's word tokenizer for the source language, with the run's text normalization and
lowercasing (`tokenize.WordTokenizer`), also for a SentencePiece run. A term matches whole
words only; scanning left to right, at each position the longest term starting there wins and
matches do not overlap ("new york city" before "new york"). Inflected forms are not matched:
list each form as its own line.

A term whose target equals its source (a name, a product code) asks the model to copy it. It
works where the target vocabulary can write it: a SentencePiece model spells any text in its
alphabet, a word-level model only its known words. A target the model cannot write (a word
unknown to its target vocabulary) is refused when the glossary is read, naming the line, as are
a line without a tab, an empty term, and a source listed twice with different targets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.tokenize import WordTokenizer
from attnmt.utils import UserError
from attnmt.vocab import UNK


@dataclass(frozen=True)
class Term:
    """One glossary entry: its source words (as matched), its target text, and where it was
    given ("FILE:LINE", or "glossary[i]" in an API request)."""

    source: str
    target: str
    words: tuple[str, ...]
    where: str


@dataclass(frozen=True)
class Applied:
    """What a glossary did to one translation: the terms matched in its source that its output
    contains (`applied`), and those it lacks because its length limit left no room (`missing`:
    glossary terms, whose targets are among the translation's missing required phrases)."""

    applied: tuple[Term, ...]
    missing: tuple[Term, ...]

    def record(self) -> dict[str, list[list[str]]]:
        """As JSON: [source, target] pairs."""
        return {name: [[t.source, t.target] for t in getattr(self, name)] for name in ("applied", "missing")}


class Glossary:
    """Terms indexed by their first word; `match` finds them in a sentence."""

    def __init__(self, terms: Sequence[Term], words: Callable[[str], list[str]]) -> None:
        self.terms = list(terms)
        self.words = words
        self.starting: dict[str, list[Term]] = {}
        for term in sorted(self.terms, key=lambda t: -len(t.words)):  # longest first at each word
            self.starting.setdefault(term.words[0], []).append(term)

    def __len__(self) -> int:
        return len(self.terms)

    def match(self, sentence: str) -> tuple[Term, ...]:
        """The terms found in `sentence`: whole words, left to right, the longest at each position."""
        words, found, position = self.words(sentence), [], 0
        while position < len(words):
            term = next(
                (
                    t
                    for t in self.starting.get(words[position], ())
                    if tuple(words[position : position + len(t.words)]) == t.words
                ),
                None,
            )
            if term is None:
                position += 1
            else:
                found.append(term)
                position += len(term.words)
        return tuple(found)

    def required_phrases(self, sentence: str) -> tuple[str, ...]:
        """The required phrases of `sentence`'s translation: its matched terms' targets, once each."""
        return tuple(dict.fromkeys(term.target for term in self.match(sentence)))

    def applied(self, source: str, missing_required_phrases: Sequence[str]) -> Applied:
        """What the glossary did to the translation of `source`, whose output lacks the phrases
        `missing_required_phrases` (`Translation.missing_required_phrases`)."""
        terms = self.match(source)
        return Applied(
            tuple(t for t in terms if t.target not in missing_required_phrases),
            tuple(t for t in terms if t.target in missing_required_phrases),
        )


def required_phrases(source: str, phrases: Sequence[str], glossary: Glossary | None) -> tuple[str, ...]:
    """The required phrases of a translation of `source`: `phrases`, then the targets of the
    `glossary`'s terms found in it (none without one), each once."""
    return tuple(dict.fromkeys([*phrases, *(glossary.required_phrases(source) if glossary is not None else ())]))


def read_glossary(
    path: str | Path, src_lang: str, lowercase: bool, encode_target: Callable[[str], list[int]]
) -> Glossary:
    """The glossary file at `path` (SOURCE<TAB>TARGET lines) for a run of `src_lang` with
    `lowercase`, whose target tokenizer and vocabulary are `encode_target`; any bad line is a
    UserError naming the file and line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: cannot read the glossary ({error})", field="glossary") from None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.count("\t") != 1:
            raise UserError(f"{path}:{number}: expected SOURCE<TAB>TARGET (one tab), got {line!r}", field="glossary")
        source, target = line.split("\t")
        entries.append((f"{path}:{number}", source, target))
    if not entries:
        raise UserError(f"{path}: the glossary holds no terms", field="glossary")
    return glossary_of(entries, src_lang, lowercase, encode_target)


def glossary_of(
    entries: Sequence[tuple[str, str, str]], src_lang: str, lowercase: bool, encode_target: Callable[[str], list[int]]
) -> Glossary:
    """A glossary of (where, source, target) entries, checked: no empty term, no target the
    model cannot write, no source given two targets (the same entry twice is one term)."""
    tokenizer = WordTokenizer(src_lang, lowercase=lowercase)
    terms: dict[tuple[str, ...], Term] = {}
    for where, source, target in entries:
        source, target = source.strip(), target.strip()
        words = tuple(tokenizer.tokenize(source))
        if not words or not target:
            raise UserError(f"{where}: an empty {'source' if not words else 'target'} term", field="glossary")
        unknown = encode_target(target).count(UNK)
        if unknown:
            raise UserError(
                f"{where}: target {target!r} has {unknown} token(s) unknown to the model's target vocabulary: "
                "it cannot be written",
                field="glossary",
            )
        earlier = terms.get(words)
        if earlier is not None and earlier.target != target:
            raise UserError(
                f"{where}: {source!r} is already translated {earlier.target!r} ({earlier.where})", field="glossary"
            )
        terms.setdefault(words, Term(source, target, words, where))
    return Glossary(list(terms.values()), tokenizer.tokenize)

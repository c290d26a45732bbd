"""A translation job: what a caller asks of a translation besides its sentences, composed once.

Both faces describe what they were asked as a `TranslationJob` of plain values (the CLI from its
arguments, the API from a request) and then do the same four things: `check()` the features
against `REFUSED`, the one table of which features cannot be combined; `bind(translator)` reads
the glossary and makes the sentence splitter and the markup reader once; `sources(lines)` turns
lines into what the translator takes, lazily, so that `stream.translate_windows` and the server's
batcher take them as they take plain lines; `finish(chunks)` turns translations, in chunks of any
size, back into finished units: a sentence (its tags put back, its glossary outcome) or, with
`document`, a paragraph (its sentences joined with their spacing, its tags put back over the whole
paragraph).

A feature is named by the API's field (`prefixes`, `required_phrases`); the CLI shows a refusal's
field as the flag that sets it. A refusal names the feature that cannot be given, not the one that
was given with it: a prefix cannot go with a document, so the field at fault is `prefixes`.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from attnmt.jobs.documents import Documents, Paragraph
from attnmt.jobs.glossary import Applied, Glossary, glossary_of, read_glossary, required_phrases
from attnmt.jobs.markup import Marked, MarkupError, read_markup, tagged
from attnmt.search.options import SearchOverrides
from attnmt.translate import MAX_SOURCE_TOKENS, Translator, warn
from attnmt.translation import Source, Translation
from attnmt.utils import UserError

# The features a job combines, each named by the API's field that asks for it (a refusal's `field`;
# `attention` is the API's `return_attention`) -> what it is. `alignment` is the CLI's alone; the
# API returns attention, from which it follows.
FEATURES = {
    "document": "each line a paragraph, cut into sentences",
    "markup": "inline tags, put back around the aligned target words",
    "prefixes": "the start of a sentence's translation",
    "required_phrases": "target phrases a sentence's translation must contain",
    "glossary": "source terms that must be translated a given way",
    "n_best": "several hypotheses a sentence",
    "attention": "each translation's attention",
    "alignment": "each translation's word alignment",
}

PER_SENTENCE = "each is given per sentence, and a document is cut into sentences the caller does not see"
# (the feature refused, the feature it cannot go with) -> why. Every pair not here combines.
REFUSED = {
    ("prefixes", "document"): PER_SENTENCE,
    ("required_phrases", "document"): PER_SENTENCE,
    ("prefixes", "markup"): "a prefix is typed text, and the tags would not know where in it they stand",
    ("alignment", "document"): "an alignment is a sentence's, and a document's output is one line a paragraph",
    ("alignment", "markup"): "the alignment would count the words of the text without its tags",
}

GlossaryGiven = str | Path | Sequence[Sequence[str]]


@dataclass(frozen=True)
class TranslationJob:
    """What a translation was asked to do besides translating its sentences.

    prefixes / required_phrases: whether the sentences come with them (each `Source` carries its
    own); glossary: a glossary file, or [source, target] terms; None: the one `bind` is given
    (the server's), an empty sequence: none at all; search: the search settings asked for."""

    document: bool = False
    markup: Literal["html"] | None = None
    prefixes: bool = False
    required_phrases: bool = False
    glossary: GlossaryGiven | None = None
    search: SearchOverrides = field(default_factory=SearchOverrides)
    attention: bool = False
    alignment: bool = False

    def features(self) -> list[str]:
        """The FEATURES this job uses, in FEATURES' order."""
        used = {
            "document": self.document,
            "markup": self.markup is not None,
            "prefixes": self.prefixes,
            "required_phrases": self.required_phrases,
            "glossary": bool(self.glossary),
            "n_best": (self.search.n_best or 1) > 1,
            "attention": self.attention,
            "alignment": self.alignment,
        }
        return [name for name in FEATURES if used[name]]

    def check(self, spell: Callable[[str], str] = str) -> None:
        """A UserError, its field the refused feature, for the first pair of REFUSED this job
        asks for; `spell` writes a feature as the face says it (the CLI: its flag)."""
        used = self.features()
        for (refused, other), why in REFUSED.items():
            if refused in used and other in used:
                raise UserError(f"{spell(refused)} cannot be combined with {spell(other)}: {why}", field=refused)

    def bind(
        self,
        translator: Translator,
        *,
        default_glossary: Glossary | None = None,
        bad_line: Callable[[int, str], UserError] | None = None,
        say: Callable[[str], None] = warn,
    ) -> BoundJob:
        """The job made ready for `translator`: its glossary read, its splitter and markup reader
        made. `bad_line(number, problem)` is the error for a line (from 1) whose markup is not
        well-formed (default: a MarkupError naming the line); `say` tells a sentence cut to fit."""
        self.check()
        return BoundJob(self, translator, self._glossary(translator, default_glossary), bad_line, say)

    def _glossary(self, translator: Translator, default: Glossary | None) -> Glossary | None:
        given = self.glossary
        if given is None:
            return default
        language, lowercase, encode = translator.source_language, translator.lowercase, translator.encode_target
        if isinstance(given, str | Path):
            return read_glossary(given, language, lowercase, encode)
        entries = []  # none: a glossary of no terms, which replaces the default
        for index, term in enumerate(given):
            if len(term) != 2:
                raise UserError(
                    f"glossary[{index}]: expected [source, target], got {len(term)} strings", field="glossary"
                )
            entries.append((f"glossary[{index}]", term[0], term[1]))
        return glossary_of(entries, language, lowercase, encode)


@dataclass
class Finished:
    """One finished unit of a job's output: a sentence, or with `document` a paragraph.

    translation: the unit as one `Translation`, as it is written: a sentence's best translation
    with its tags put back, its alternatives likewise; a paragraph's sentences joined with its
    spacing (tokens concatenated, attention block-diagonal, scores summed; its k-th alternative
    joins its sentences' k-th, or their last where they have fewer). sentences: the translations
    of its sentences as the translator gave them, in order. glossary: what the glossary did to
    each sentence (None without a glossary)."""

    translation: Translation
    sentences: list[Translation]
    glossary: list[Applied] | None = None


class BoundJob:
    """A `TranslationJob` ready for one translator: `sources` out, `finish` back, in order."""

    def __init__(self, job: TranslationJob, translator: Translator, glossary, bad_line, say) -> None:
        self.job, self.translator, self.glossary = job, translator, glossary
        self.bad_line = bad_line or (lambda number, problem: MarkupError(f"line {number}: {problem}", field="markup"))
        self.documents = None
        if job.document:
            count = translator.count_source_tokens
            self.documents = Documents(translator.source_language, count, MAX_SOURCE_TOKENS, say)
        self.marked: deque[Marked] = deque()  # lines read and not yet finished, with markup
        self.lines = 0

    def sources(self, lines: Iterable[str | Source]) -> Iterator[str | Source]:
        """Each line as the translator takes it: its text (tags taken out), or with a document its
        sentences, each a `Source` when it has a prefix or phrases to contain (its own, and the
        targets of the glossary's terms found in it)."""
        for line in lines:
            self.lines += 1
            source = Source(line) if isinstance(line, str) else line
            text = source.text
            if self.job.markup is not None:
                try:
                    self.marked.append(read_markup(text))
                except MarkupError as error:
                    raise self.bad_line(self.lines, error.problem) from None
                text = self.marked[-1].text
            if self.documents is None:
                yield self._source(Source(text, source.prefix, source.required_phrases))
            else:
                yield from (self._source(Source(sentence)) for sentence in self.documents.sentences([text]))

    def _source(self, source: Source) -> str | Source:
        phrases = required_phrases(source.text, source.required_phrases, self.glossary)
        return source._replace(required_phrases=phrases) if source.prefix or phrases else source.text

    def finish(self, chunks: Iterable[Sequence[Translation]]) -> Iterator[list[Finished]]:
        """The translations of `sources`' output, in order and in chunks of any size, back as the
        sentences or paragraphs each chunk completes (a list, maybe empty, per chunk)."""
        documents = self.documents
        for chunk in chunks:
            if documents is None:
                yield [self._finished([translation]) for translation in chunk]
            else:
                yield [self._finished(done, paragraph) for paragraph, done in documents.completed(chunk)]
        if documents is not None and (rest := documents.rest()):
            yield [self._finished(done, paragraph) for paragraph, done in rest]

    def _finished(self, sentences: list[Translation], paragraph: Paragraph | None = None) -> Finished:
        marked = self.marked.popleft() if self.job.markup is not None else None
        applied = None
        if self.glossary is not None:
            applied = [self.glossary.applied(t.source, t.missing_required_phrases) for t in sentences]
        if paragraph is None and marked is None:  # a plain sentence is written as it was translated
            return Finished(sentences[0], sentences, applied)
        depth = max((1 + len(t.alternatives) for t in sentences), default=1)
        ranked = []
        for k in range(depth):
            chosen = [[t, *t.alternatives][min(k, len(t.alternatives))] for t in sentences]
            one = chosen[0] if paragraph is None else _joined(chosen, paragraph)
            if marked is not None:
                one = dataclasses.replace(
                    one, text=tagged(marked, one, *self.translator.surfaces, self.translator.lowercase)
                )
            ranked.append(dataclasses.replace(one, alternatives=[]))
        best = ranked[0]
        best.alternatives = ranked[1:]
        return Finished(best, sentences, applied)


def _joined(sentences: Sequence[Translation], paragraph: Paragraph) -> Translation:
    """A paragraph's sentence translations as one: text joined with the paragraph's spacing,
    tokens concatenated, attention (T + 1, S) block-diagonal over the whole paragraph, scores summed."""
    rows = sum(len(t.tokens) for t in sentences) + 1  # + </s>'s row, which alignment leaves out
    attention = torch.zeros(rows, sum(len(t.source_tokens) for t in sentences))
    row = column = 0
    for sentence in sentences:
        tokens, columns = len(sentence.tokens), len(sentence.source_tokens)
        attention[row : row + tokens, column : column + columns] = sentence.attention[:tokens, :columns]
        row, column = row + tokens, column + columns
    return Translation(
        source=paragraph.join([t.source for t in sentences]),
        text=paragraph.join([t.text for t in sentences]),
        tokens=[token for t in sentences for token in t.tokens],
        source_tokens=[token for t in sentences for token in t.source_tokens],
        score=sum(t.score for t in sentences),
        log_prob=sum(t.log_prob for t in sentences),
        attention=attention,
        missing_required_phrases=[phrase for t in sentences for phrase in t.missing_required_phrases],
    )

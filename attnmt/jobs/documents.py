"""Documents: each line a paragraph, cut into sentences, translated, and put back with its spacing.

A model trained on sentences translates a paragraph of several badly when it reads it as one
line: it has rarely seen a sentence end and another begin, and its output length limit grows
with a source it was never trained on. So a paragraph is cut into sentences with sentencex
(Wikimedia's rule-based splitter, per source language; docs/design.md says why this one), the
sentences are translated as any others, and the translations are joined with the whitespace
that followed each source sentence. The line's leading and trailing whitespace stay as they were,
and a blank line stays blank.

A sentence longer than the model reads (`translate.MAX_SOURCE_TOKENS` tokens) is cut into parts
that fit, each ending at the last punctuation mark within the limit when there is one, and at the
limit otherwise, with a warning: translated in parts it keeps its end, where a sentence read as
one would lose everything past the limit.

Lines stream: `Documents.sentences` yields sentences as lines are read, and `Documents.joined`
gives back each paragraph once its last sentence is translated, so memory holds the sentences in
flight (`stream.translate_windows`' windows), never the file.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from attnmt.utils import UserError

WORD = re.compile(r"\S+")
# A word ending in one of these (or followed by a closing quote or bracket) is a place to cut a
# long sentence: a clause ends there, so each part is still something a sentence model can read.
CLAUSE_END = re.compile(r"[,;:.!?\u2026\u2013\u2014\u3001\u3002\uff0c\uff1b][\"'\u201d\u2019\u00bb)\]]*$")


@dataclass
class Paragraph:
    """One input line: the whitespace before its first sentence, its sentences (or parts of a
    long one) without surrounding whitespace, and the whitespace after each (the last's is the
    line's trailing whitespace). `number` is the line's, from 1."""

    number: int
    leading: str
    sentences: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)

    def join(self, translations: Sequence[str]) -> str:
        """The paragraph's translation: each sentence's translation followed by its gap."""
        if len(translations) != len(self.sentences):
            raise ValueError(f"{len(translations)} translations for {len(self.sentences)} sentences")
        return self.leading + "".join(text + gap for text, gap in zip(translations, self.gaps, strict=True))


def segment(text: str, language: str) -> list[str]:
    """`text` cut into sentences by sentencex's rules for `language` (an ISO 639 code; a language
    it does not know falls back to its defaults), each with the whitespace after it."""
    import sentencex  # imported when a document is read: the CLI starts without it

    return list(sentencex.segment(language, text))


def split_paragraph(
    line: str,
    number: int,
    language: str,
    count_tokens: Callable[[str], int],
    limit: int,
    say: Callable[[str], None],
) -> Paragraph:
    """The `Paragraph` of one line (module docstring). `count_tokens` gives the model's source
    tokens in a text; a sentence with more than `limit` is cut into parts, and `say` tells it."""
    body = line.strip()
    paragraph = Paragraph(number, line[: len(line) - len(line.lstrip())])
    if not body:
        paragraph.leading = line
        return paragraph
    cursor = 0
    for piece in segment(body, language):
        sentence = piece.strip()
        if not sentence:
            continue
        start = body.find(sentence, cursor)
        if start < 0:  # sentencex keeps every character; should a rule ever change one, keep the rest whole
            start = cursor
            sentence = body[cursor:].strip()
        if paragraph.sentences:
            paragraph.gaps[-1] = body[cursor:start]
        else:
            paragraph.leading += body[cursor:start]
        for part, gap in _within_limit(sentence, count_tokens, limit, number, say):
            paragraph.sentences.append(part)
            paragraph.gaps.append(gap)
        cursor = start + len(sentence)
        if cursor >= len(body):
            break
    paragraph.gaps[-1] = body[cursor:] + line[len(line.rstrip()) :]
    return paragraph


def _within_limit(
    sentence: str, count_tokens: Callable[[str], int], limit: int, number: int, say: Callable[[str], None]
) -> list[tuple[str, str]]:
    """The sentence as (part, whitespace after it) pairs of at most `limit` tokens each: words are
    added to a part while they fit, and a part that is full ends at its last clause-ending word
    (CLAUSE_END), or before the word that did not fit."""
    total = count_tokens(sentence)
    if total <= limit:
        return [(sentence, "")]
    words = list(WORD.finditer(sentence))
    counts = [count_tokens(word.group()) for word in words]
    groups: list[list[int]] = []  # word indices of each part
    current: list[int] = []
    for index, count in enumerate(counts):
        while current and sum(counts[i] for i in current) + count > limit:
            ends = [k for k, i in enumerate(current) if CLAUSE_END.search(words[i].group())]
            cut = ends[-1] if ends else len(current) - 1
            groups.append(current[: cut + 1])
            current = current[cut + 1 :]
        current.append(index)
    groups.append(current)
    spans = [(words[group[0]].start(), words[group[-1]].end()) for group in groups]
    pieces = []
    starts_after = [start for start, _ in spans[1:]] + [len(sentence)]  # the sentence has no trailing space
    for (start, stop), following in zip(spans, starts_after, strict=True):
        pieces += _split_word_runs(sentence[start:stop], count_tokens, limit)
        pieces[-1] = (pieces[-1][0], sentence[stop:following])
    say(
        f"line {number}: a sentence of {total:,} tokens is longer than the model's limit of {limit}; "
        f"translated in {len(pieces)} parts"
    )
    return pieces


def _split_word_runs(part: str, count_tokens: Callable[[str], int], limit: int) -> list[tuple[str, str]]:
    """A part that is still over the limit (one word longer than the limit: a URL, a text without
    spaces) cut into runs of characters that fit, with no whitespace between them."""
    tokens = count_tokens(part)
    if tokens <= limit:
        return [(part, "")]
    size = max(1, len(part) * limit // tokens)
    return [(part[i : i + size], "") for i in range(0, len(part), size)]


class Documents:
    """Paragraphs in, sentences out to the translator, paragraphs' translations back in order.

    `sentences(lines)` yields every line's sentences and remembers the line's `Paragraph`;
    `joined(translated)` takes the translations of those sentences in order, in chunks of any
    size, and yields (paragraph, its translations) as soon as each paragraph is complete."""

    def __init__(self, language: str, count_tokens: Callable[[str], int], limit: int, say: Callable[[str], None]):
        self.language, self.count_tokens, self.limit, self.say = language, count_tokens, limit, say
        self.pending: deque[Paragraph] = deque()
        self.done: list = []  # translations of the first pending paragraph's sentences, so far
        self.lines = 0  # read so far, over every call: lines are numbered from 1 across them

    def sentences(self, lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            self.lines += 1
            paragraph = split_paragraph(line, self.lines, self.language, self.count_tokens, self.limit, self.say)
            self.pending.append(paragraph)
            yield from paragraph.sentences

    def joined(self, translated: Iterable[Sequence]) -> Iterator[tuple[Paragraph, list]]:
        for chunk in translated:
            yield from self.completed(chunk)
        yield from self.rest()

    def completed(self, chunk: Sequence) -> list[tuple[Paragraph, list]]:
        """The paragraphs that `chunk`, the next translations in order, completes, each with its
        translations; a paragraph whose sentences the chunks split waits for its last one."""
        self.done.extend(chunk)
        complete = []
        while self.pending and len(self.done) >= len(self.pending[0].sentences):
            paragraph = self.pending.popleft()
            count = len(paragraph.sentences)
            complete.append((paragraph, self.done[:count]))
            del self.done[:count]
        return complete

    def rest(self) -> list[tuple[Paragraph, list]]:
        """At the end of the input: the blank lines after the last sentence, which had nothing
        translated; a paragraph still waiting for translations is an error."""
        rest: list[tuple[Paragraph, list]] = []
        while self.pending:
            paragraph = self.pending.popleft()
            if paragraph.sentences:
                raise UserError(f"line {paragraph.number}: its sentences were not all translated")
            rest.append((paragraph, []))
        return rest

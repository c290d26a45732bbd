"""Inline markup: tags taken out of a sentence before translation and put back around the target
words aligned to the words they enclosed.

A sentence such as `Click <a href="/x">the red button</a> now.` is read with the standard
library's HTML parser into its text (`Click the red button now.`, entities decoded) and a tree of
its tags, each element spanning characters of that text. The text is translated as any sentence;
then each element is put around the target words aligned, through the translation's attention
(`alignment.alignment`: each target token to its most attended source token), to the source
words it enclosed: from the first of them to the last. Void and self-closing tags (`<br>`,
`<img/>`), comments, and tags without a partner stand before the target word aligned to the
source word that followed them (at the end when none did).

The output is well-formed whenever the input was: an element's target span is cut to lie inside
its parent's, and siblings that would overlap are made to follow each other in the source's order
(an element whose words went to a sibling, or none of whose words were aligned, is kept empty at
its place), then the tree is written out, its text escaped again. Markup that is not well-formed
(an element closed while a child is open, a tag left unfinished) is a `MarkupError` naming the
column, never a guess.
"""

from __future__ import annotations

import html
import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser

from attnmt.alignment import alignment
from attnmt.utils import UserError

# HTML's void elements: they have no content and no end tag, with or without "/>"
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
WORD = re.compile(r"\S+")
UNFINISHED = re.compile(r"<[A-Za-z/!?]")  # what starts a tag, found in the text: the tag was never finished


class MarkupError(UserError):
    """Markup that is not well-formed, naming the column (from 1) where it breaks."""


@dataclass
class Element:
    """A tag pair as written (`opening` with its attributes, `closing`) around the text characters
    [start, end), with the elements and standalone tags inside it."""

    name: str
    opening: str
    closing: str
    start: int
    end: int = -1
    children: list[Element | Standalone] = field(default_factory=list)


@dataclass
class Standalone:
    """A tag with no content as written (void, self-closing, a comment, or one without its
    partner), standing before text character `position`."""

    text: str
    position: int


@dataclass
class Marked:
    """A sentence's text without its tags (entities decoded) and its tags as a tree (`root`)."""

    text: str
    root: Element

    @property
    def has_tags(self) -> bool:
        return bool(self.root.children)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)  # text arrives raw: a "<" in it is a tag left unfinished
        self.text: list[str] = []
        self.length = 0
        self.open = [Element("", "", "", 0)]
        self.columns: list[int] = [0]

    def handle_data(self, data: str) -> None:
        if unfinished := UNFINISHED.search(data):
            column = self.getpos()[1] + unfinished.start() + 1
            raise MarkupError(f"column {column}: an unfinished tag {data[unfinished.start() :][:20]!r}")
        self._text(data)

    def _text(self, text: str) -> None:
        self.text.append(text)
        self.length += len(text)

    def handle_entityref(self, name: str) -> None:
        self._text(html.unescape(f"&{name};"))

    def handle_charref(self, name: str) -> None:
        self._text(html.unescape(f"&#{name};"))

    def _standalone(self, text: str) -> None:
        self.open[-1].children.append(Standalone(text, self.length))

    def handle_starttag(self, tag: str, attrs) -> None:
        written = self.get_starttag_text() or f"<{tag}>"
        if tag in VOID:
            self._standalone(written)
            return
        element = Element(tag, written, f"</{tag}>", self.length)
        self.open[-1].children.append(element)
        self.open.append(element)
        self.columns.append(self.getpos()[1] + 1)

    def handle_startendtag(self, tag: str, attrs) -> None:
        self._standalone(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        column = self.getpos()[1] + 1
        if self.open[-1].name == tag:
            self.open.pop().end = self.length
            self.columns.pop()
        elif any(element.name == tag for element in self.open[1:]):
            inner = self.open[-1]
            raise MarkupError(
                f"column {column}: </{tag}> closes <{tag}> while {inner.opening} "
                f"(column {self.columns[-1]}) is still open: the markup is not well-formed"
            )
        elif tag not in VOID:  # an end tag without its start: kept where it stands
            self._standalone(f"</{tag}>")

    def handle_comment(self, data: str) -> None:
        self._standalone(f"<!--{data}-->")


def read_markup(sentence: str) -> Marked:
    """The sentence's text and tags (module docstring); MarkupError for markup that is not
    well-formed. An element left open at the end is kept as a standalone opening tag."""
    reader = _Reader()
    reader.feed(sentence)
    if UNFINISHED.match(reader.rawdata):  # held back, waiting for the rest of a tag that never came
        column = len(sentence) - len(reader.rawdata) + 1
        raise MarkupError(f"column {column}: an unfinished tag {reader.rawdata[:20]!r}")
    reader.close()  # the rest is text ("&amp" without its ";", a last "<")
    text = "".join(reader.text)
    while len(reader.open) > 1:  # opened and never closed: a standalone tag, its content its parent's
        element = reader.open.pop()
        parent = reader.open[-1]
        at = parent.children.index(element)
        parent.children[at : at + 1] = [Standalone(element.opening, element.start), *element.children]
    return Marked(text, reader.open[0])


def _spans(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in WORD.finditer(text)]


def token_words(tokens: Sequence[str], text: str, surface, lowercase: bool) -> list[int]:
    """Each token's word in `text` (whitespace-separated, from 0), found by its surface from where
    the previous token ended; a token not found (a normalizer rewrote it) keeps the current word."""
    haystack = text.lower() if lowercase else text
    starts = [start for start, _ in _spans(text)]
    words, position, current = [], 0, 0
    for token in tokens:
        piece = surface(token).strip()
        found = haystack.find(piece.lower() if lowercase else piece, position) if piece else -1
        if found >= 0:
            current = max(0, sum(start <= found for start in starts) - 1)
            position = found + len(piece)
        words.append(current)
    return words


@dataclass
class _Placed:
    node: Element | Standalone
    low: int  # first target word
    high: int  # one past the last; low == high: empty, standing before word `low`
    children: list[_Placed] = field(default_factory=list)


def put_back(marked: Marked, target: str, aligned: dict[int, set[int]]) -> str:
    """The target text with `marked`'s tags put around the words `aligned` (source word -> target
    words) gives each element's source words, its text escaped (module docstring)."""
    source_spans, target_spans = _spans(marked.text), _spans(target)

    def source_words_in(start: int, end: int) -> list[int]:
        return [k for k, (a, b) in enumerate(source_spans) if a < end and b > start]

    def insertion_point(position: int) -> int:
        """The target word before which a tag standing before text character `position` goes."""
        following = [k for k, (a, _) in enumerate(source_spans) if a >= position]
        for word in following:
            if aligned.get(word):
                return min(aligned[word])
        return len(target_spans)

    def place(node: Element | Standalone, low: int, high: int, taken: list[tuple[int, int]]) -> _Placed:
        """`node` placed within target words [low, high), outside its placed siblings' spans (`taken`)."""
        if isinstance(node, Element):
            words = {t for s in source_words_in(node.start, node.end) for t in aligned.get(s, ())}
            free = _longest_free(sorted(w for w in words if low <= w < high), taken)
            if free is not None:
                placed = _Placed(node, *free)
                inner: list[tuple[int, int]] = []
                for child in node.children:
                    placed.children.append(place(child, free[0], free[1], inner))
                return placed
        position = node.position if isinstance(node, Standalone) else node.start
        point = min(max(insertion_point(position), low), high)
        for taken_low, taken_high in taken:  # not inside a sibling: after it
            if taken_low < point < taken_high:
                point = taken_high
        placed = _Placed(node, point, point)
        if isinstance(node, Element):  # empty: what it held stands at its place
            placed.children = [place(child, point, point, []) for child in node.children]
        return placed

    root = _Placed(marked.root, 0, len(target_spans))
    taken: list[tuple[int, int]] = []
    for child in marked.root.children:
        root.children.append(place(child, 0, len(target_spans), taken))
    return _write(root, target, target_spans)


def _longest_free(words: list[int], taken: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The longest run [first, last + 1) of the span from words[0] to words[-1] that no interval
    in `taken` covers, recorded in `taken`; None when the words are none or all taken."""
    if not words:
        return None
    best, start = None, None
    for word in range(words[0], words[-1] + 2):
        free = word <= words[-1] and not any(a <= word < b for a, b in taken)
        if free and start is None:
            start = word
        elif not free and start is not None:
            if best is None or word - start > best[1] - best[0]:
                best = (start, word)
            start = None
    if best is not None:
        taken.append(best)
    return best


def _write(root: _Placed, target: str, spans: list[tuple[int, int]]) -> str:
    """The placed tree as text: an element's tag goes after the whitespace before its first word and
    its end tag right after its last word; a standalone tag or an empty element stands after the
    whitespace before the word it precedes; the words are escaped."""
    opens: list[list[str]] = [[] for _ in range(len(spans) + 1)]  # before word k, in the tree's order
    closes: list[list[str]] = [[] for _ in range(len(spans) + 1)]  # after word k - 1, innermost first

    def whole(placed: _Placed) -> str:
        node = placed.node
        if isinstance(node, Standalone):
            return node.text
        return node.opening + "".join(whole(child) for child in placed.children) + node.closing

    def visit(placed: _Placed) -> None:
        for child in placed.children:
            if isinstance(child.node, Standalone) or child.low == child.high:
                opens[child.low].append(whole(child))
                continue
            opens[child.low].append(child.node.opening)
            visit(child)
            closes[child.high].append(child.node.closing)

    visit(root)
    out, previous_end = [], 0
    for word, (start, end) in enumerate(spans):
        out += closes[word]
        out.append(target[previous_end:start])
        out += opens[word]
        out.append(html.escape(target[start:end], quote=False))
        previous_end = end
    out += closes[len(spans)]
    out += opens[len(spans)]
    out.append(target[previous_end:])
    return "".join(out)


def tagged(marked: Marked, translation, source_surface, target_surface, lowercase: bool) -> str:
    """`translation` (of `marked.text`) with `marked`'s tags put back (`put_back`), its words aligned
    to the source's through its attention; the translation's own text when there are no tags."""
    if not marked.has_tags:
        return translation.text
    source_words = token_words(translation.source_tokens, marked.text, source_surface, lowercase)
    target_words = token_words(translation.tokens, translation.text, target_surface, False)
    aligned: dict[int, set[int]] = {}
    for source_word, target_word in alignment(translation.attention, source_words, target_words):
        aligned.setdefault(source_word, set()).add(target_word)
    return put_back(marked, translation.text, aligned)


class MarkupLines:
    """Tagged lines in, their text out to the translator (`texts`), and the tags put back on the
    translations as they come back in order (`put_back`): memory holds the lines in flight."""

    def __init__(self, codec, lowercase: bool, where: str = "line") -> None:
        self.source_surface, self.target_surface = codec.src_tokenizer.surface, codec.tgt_tokenizer.surface
        self.lowercase, self.where = lowercase, where
        self.pending: deque[Marked] = deque()

    def texts(self, lines: Iterable[str]) -> Iterator[str]:
        for number, line in enumerate(lines, start=1):
            self.pending.append(read_line(line, f"{self.where}:{number}"))
            yield self.pending[-1].text

    def put_back(self, translations: Sequence) -> Sequence:
        """Each translation's text replaced by its text with its line's tags."""
        for translation in translations:
            marked = self.pending.popleft()
            translation.text = tagged(marked, translation, self.source_surface, self.target_surface, self.lowercase)
        return translations


def read_line(line: str, where: str) -> Marked:
    """`read_markup` of one line, a MarkupError naming `where` (file:line) and the column."""
    try:
        return read_markup(line)
    except MarkupError as error:
        raise MarkupError(f"{where}: {error.problem}", field="markup") from None

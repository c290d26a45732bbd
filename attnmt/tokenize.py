"""Text <-> tokens: a rule-based word tokenizer/detokenizer and a SentencePiece wrapper.

Both tokenizers first apply `normalize_text` (NFC, every kind of space -> " ", invisible
characters dropped), so that French "Va !" and "Cours\u202f!" give the same tokens.

The word tokenizer splits punctuation off words and keeps together what reads as one word:
hyphenated words ("well-known", "peut-être"), numbers ("3.5", "1,000", "10:30"),
abbreviations ("U.S", "p.m": the final period is its own token) and "aujourd'hui". Clitics:

- English (Penn Treebank style): "don't" -> "do" "n't", "can't" -> "ca" "n't",
  "Tom's" -> "Tom" "'s", "I'm" -> "I" "'m" (also 're 've 'll 'd).
- French elision: "j'ai" -> "j'" "ai", "qu'il" -> "qu'" "il", "jusqu'à" -> "jusqu'" "à";
  words that merely contain an apostrophe ("aujourd'hui", "quelqu'un") stay whole.
- Dates and ranges written with digits and hyphens are split: "2021-03-05" -> "2021" "-"
  "03" "-" "05", and the detokenizer joins a hyphen between two numbers again.

The detokenizer writes the text back as a person would, for BLEU against untokenized
references: no space before , . ) % etc.; French puts a space before ! ? : ; » and after «.
It holds `tokenize(detokenize(tokens)) == tokens` for every `tokens = tokenize(text)`: a
join that the tokenizer would not split again the same way gets a space instead.

Leaf module: imports nothing from attnmt but `utils`, and no torch.
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from attnmt.utils import UserError, atomic_path


class Tokenizer(Protocol):
    """What the data pipeline needs from a tokenizer."""

    def tokenize(self, text: str) -> list[str]: ...

    def detokenize(self, tokens: Sequence[str]) -> str: ...

    def prefix_tokens(self, text: str) -> tuple[list[str], str]:
        """The start of a text as (the tokens of its complete words, its unfinished last word
        as `surface` writes it: "" when the text ends with a space or is empty)."""
        ...

    def surface(self, token: str) -> str:
        """The text a token puts into a sentence, a word start written as a leading " "."""
        ...


def _ends_a_word(text: str) -> bool:
    """Whether the text typed so far leaves no word unfinished."""
    return not text.strip() or text[-1].isspace()


# Control characters (whitespace ones excepted: those become spaces) and invisible format
# characters (soft hyphen, zero-width space, word joiner, BOM) change nothing a reader sees.
_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u200b\u2060\ufeff]")


def normalize_text(text: str) -> str:
    """NFC; every Unicode space (U+00A0, U+202F, tab, newline...) -> one " "; control and
    invisible characters dropped; ends stripped. Idempotent; both tokenizers start with it."""
    return " ".join(unicodedata.normalize("NFC", _INVISIBLE.sub("", text)).split())


@functools.cache
def punctuation_class() -> str:
    """Regex character-class body of every Unicode punctuation (P*) and symbol (S*) character.

    Built from `unicodedata` rather than `\\w`, because `\\w` leaves out combining marks and so
    would cut "e\\u0301" or Devanagari words apart. Planes 0-1 hold the P/S characters met in
    text. The underscore stays a word character, as in `\\w`.
    """
    ranges, start = [], None
    for code in range(0x20001):
        is_punctuation = code < 0x20000 and code != ord("_") and unicodedata.category(chr(code))[0] in "PS"
        if is_punctuation and start is None:
            start = code
        elif not is_punctuation and start is not None:
            last = code - 1
            ranges.append(re.escape(chr(start)) + ("-" + re.escape(chr(last)) if last > start else ""))
            start = None
    return "".join(ranges)


@functools.cache
def _token_pattern() -> re.Pattern[str]:
    word_char = rf"[^\s{punctuation_class()}]"
    # Inside a word: a hyphen, an apostrophe, a period before a word character (I.D, 3.5,
    # tatoeba.org), or a comma or colon between digits (1,000 and 10:30). A hyphen may also
    # open or close a word, as in German "Ess- und Wohnzimmer" or "mit Tellern und -tassen".
    joiner = r"(?:-|['’]|\.(?=\w)|(?<=\d)[,:](?=\d))"
    word = rf"-?{word_char}+(?:{joiner}{word_char}+)*-?"
    return re.compile(rf"{word}|\.{{2,}}|\S")


_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_CLITIC = r"n['’]t|['’](?:s|m|re|ve|ll|d)"
_ENGLISH_CLITIC_SUFFIX = re.compile(rf"(?i)(?<=\w)(?:{_CLITIC})$")
_ENGLISH_CLITIC = re.compile(rf"(?i)(?:{_CLITIC})")
_ELIDED = r"(?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu|quoiqu)['’]"
_FRENCH_ELISION_PREFIX = re.compile(rf"(?i){_ELIDED}(?=\w)")
_FRENCH_ELIDED = re.compile(rf"(?i){_ELIDED}")


def _split_word(word: str, lang: str) -> list[str]:
    """Split one regex word into clitics and numeric pieces, per the module docstring."""
    if "-" in word and all(_NUMBER.fullmatch(piece) for piece in word.split("-")):
        return [piece for number in word.split("-") for piece in ("-", number)][1:]
    prefix: list[str] = []
    suffix: list[str] = []
    if lang == "fr":
        while elided := _FRENCH_ELISION_PREFIX.match(word):
            prefix.append(elided.group())
            word = word[elided.end() :]
    elif lang == "en":
        while clitic := _ENGLISH_CLITIC_SUFFIX.search(word):
            suffix.insert(0, clitic.group())
            word = word[: clitic.start()]
    return [*prefix, word, *suffix]


# How punctuation sits against its neighbours when detokenizing.
_STICKS_TO_PREVIOUS = set(",.)]}%°…”’!?:;»") | {"..."}
_STICKS_TO_NEXT = set("([{¿¡«")
_STICKS_TO_BOTH = set("/")
_QUOTES = set("\"'“‘„‚")
_CLOSING_QUOTES = set("\"'“”‘’»")
_FRENCH_SPACED = set("!?:;«»")  # French typography: "Qui ?", "« Oui »"
_CURRENCY_LIKE = set("$£€¥#")


class WordTokenizer:
    """Rule-based word tokenizer for `lang` ("en" and "fr" get their clitic rules, "fr" its
    spacing; other languages the neutral rules). The module docstring has the conventions."""

    def __init__(self, lang: str, lowercase: bool = False, keep: Sequence[str] = ()):
        """`keep`: strings that are one token wherever they occur, e.g. a model's "<unk>", which
        the rules would split into "<" "unk" ">"."""
        self.lang = lang
        self.lowercase = lowercase
        self.keep = tuple(keep)
        self._kept = re.compile("(" + "|".join(map(re.escape, self.keep)) + ")") if self.keep else None

    def __repr__(self) -> str:
        return f"WordTokenizer(lang={self.lang!r}, lowercase={self.lowercase}, keep={self.keep!r})"

    def tokenize(self, text: str) -> list[str]:
        text = normalize_text(text)
        if self.lowercase:
            text = text.lower()
        parts = self._kept.split(text) if self._kept else [text]  # kept strings at the odd positions
        return [
            token for position, part in enumerate(parts) for token in ([part] if position % 2 else self._words(part))
        ]

    def _words(self, text: str) -> list[str]:
        return [piece for word in _token_pattern().findall(text) for piece in _split_word(word, self.lang)]

    def prefix_tokens(self, text: str) -> tuple[list[str], str]:
        """Complete tokens, and the last token as a word still being typed (`Tokenizer`)."""
        tokens = self.tokenize(text)
        if _ends_a_word(text):
            return tokens, ""
        return tokens[:-1], self.surface(tokens[-1])

    def surface(self, token: str) -> str:
        """Every token starts a word of its own: " " + token (the detokenizer's spacing aside)."""
        return " " + token

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Tokens -> natural text. Two tokens are joined only where the tokenizer splits the
        joined text into the same tokens again; elsewhere a space keeps them apart."""
        tokens = list(tokens)
        groups: list[list[str]] = []  # tokens the punctuation rules write without spaces
        for token, glue in zip(tokens, self._glue_flags(tokens), strict=True):
            if glue and groups:
                groups[-1].append(token)
            else:
                groups.append([token])
        return " ".join(text for group in groups for text in self._join_safely(group))

    def _join_safely(self, group: list[str]) -> list[str]:
        """Join `group` into one string if it tokenizes back into `group`; otherwise join
        greedily from the left, starting a new string wherever a join would re-tokenize
        differently (hyphens do: "3202-" alone is one word, "3202-5625" three tokens)."""
        if len(group) == 1 or self.tokenize("".join(group)) == group:
            return ["".join(group)]
        runs = [[group[0]]]
        for token in group[1:]:
            if self.tokenize("".join(runs[-1]) + token) == [*runs[-1], token]:
                runs[-1].append(token)
            else:
                runs.append([token])
        return ["".join(run) for run in runs]

    def _glue_flags(self, tokens: list[str]) -> list[bool]:
        """For each token: whether it is written right after the previous one, with no space."""
        sticks_to_previous: list[bool] = []
        sticks_to_next: list[bool] = []
        open_quotes: set[str] = set()
        for i, token in enumerate(tokens):
            previous = tokens[i - 1] if i > 0 else ""
            following = tokens[i + 1 : i + 2]
            if token in _QUOTES:
                opens = _quote_opens(token, previous, tokens[i + 1 :], open_quotes)
                left, right = not opens, opens
            elif token == "-":  # from "2021-03-05": sticks to both numbers
                left = right = bool(_NUMBER.fullmatch(previous) and following and _NUMBER.fullmatch(following[0]))
            elif token in _CURRENCY_LIKE:  # "$5", "#19"; "15$" when no number follows
                right = bool(following and following[0][:1].isdigit())
                left = not right and previous[-1:].isdigit()
            elif token.startswith("-") and i > 0 and sticks_to_previous[-1] and previous in _CLOSING_QUOTES:
                left, right = True, False  # German „Thriller“-Video
            else:
                left, right = self._punctuation_sides(token, previous)
            sticks_to_previous.append(left)
            sticks_to_next.append(right)
        return [i > 0 and (sticks_to_next[i - 1] or sticks_to_previous[i]) for i in range(len(tokens))]

    def _punctuation_sides(self, token: str, previous: str) -> tuple[bool, bool]:
        """(sticks to the previous token, sticks to the next one) for any token but quotes,
        hyphens and currency signs."""
        if self.lang == "fr":
            if token in _FRENCH_SPACED:
                return token in "!?" and previous in ("!", "?"), False  # "Quoi ?!"
            if _FRENCH_ELIDED.fullmatch(token):
                return False, True
        if self.lang == "en" and _ENGLISH_CLITIC.fullmatch(token):
            return True, False
        both = token in _STICKS_TO_BOTH
        return both or token in _STICKS_TO_PREVIOUS, both or token in _STICKS_TO_NEXT


def _quote_opens(quote: str, previous: str, rest: list[str], open_quotes: set[str]) -> bool:
    """Whether a quote mark opens (else closes) a quotation; updates `open_quotes`.

    A mark closes a quotation that is open. Otherwise it opens one, except an apostrophe
    right after a word with no other apostrophe later on: "the boys' room", "goin'".
    German „...“ and ‚...‘ close with the marks that open English quotations.
    """
    opener = {"“": "„", "‘": "‚"}.get(quote, quote)
    if opener in open_quotes:
        open_quotes.discard(opener)
        return False
    if quote == "'" and previous[-1:].isalnum() and "'" not in rest:
        return False
    open_quotes.add(quote)
    return True


def train_sentencepiece(
    sentences: Iterable[str],
    *,
    vocab_size: int,
    model_type: str,
    cache_dir: Path,
    character_coverage: float = 1.0,
) -> Path:
    """Train a SentencePiece model on `sentences` (the train split) and return its path.

    The model file is named by a sha256 of the normalized sentences and the settings, so the
    same inputs find the cached model and train nothing. It is written atomically. Lowercase
    the sentences first if the tokenizer will lowercase. A `vocab_size` the data cannot fill,
    or one too small for its characters, is a UserError.
    """
    import sentencepiece

    if model_type not in ("bpe", "unigram"):
        raise UserError(f"data.spm_model_type: unknown model type {model_type!r}; expected bpe or unigram")
    texts = [text for text in map(normalize_text, sentences) if text]
    if not texts:
        raise UserError("cannot train SentencePiece: the training sentences are empty")
    settings = f"v1 vocab_size={vocab_size} model_type={model_type} character_coverage={character_coverage}"
    digest = hashlib.sha256(settings.encode())
    for text in texts:
        digest.update(text.encode() + b"\n")
    model_path = Path(cache_dir) / f"spm-{model_type}-{vocab_size}-{digest.hexdigest()[:20]}.model"
    if model_path.exists():
        return model_path
    model = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            normalization_rule_name="identity",  # normalize_text did it; NFKC would rewrite "…" and "½"
            unk_id=0,
            bos_id=-1,  # Vocab adds <s>, </s> and <pad> itself
            eos_id=-1,
            pad_id=-1,
            minloglevel=2,
            num_threads=1,
        )
    except RuntimeError as error:
        raise UserError(_explain_sentencepiece_error(error, vocab_size, len(texts))) from None
    with atomic_path(model_path) as tmp:
        tmp.write_bytes(model.getvalue())
    return model_path


def _explain_sentencepiece_error(error: RuntimeError, vocab_size: int, n_sentences: int) -> str:
    message = str(error)
    too_high = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", message)
    if too_high:
        return (
            f"data.spm_vocab_size={vocab_size} is too large for {n_sentences} training sentences; "
            f"set it to at most {too_high.group(2)}"
        )
    too_low = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", message)
    if too_low:
        return (
            f"data.spm_vocab_size={vocab_size} is too small: the characters of the training sentences "
            f"and <unk> need at least {too_low.group(2)} pieces"
        )
    return f"SentencePiece training failed on {n_sentences} sentences: {message.splitlines()[-1]}"


class SentencePieceTokenizer:
    """A trained SentencePiece model behind the `Tokenizer` interface: text <-> pieces."""

    def __init__(self, model_path: str | Path, lowercase: bool = False):
        import sentencepiece

        self._model_path = Path(model_path)
        self.lowercase = lowercase
        try:
            self._processor = sentencepiece.SentencePieceProcessor(model_file=str(self._model_path))
        except (OSError, RuntimeError) as error:
            raise UserError(f"{self._model_path}: not a readable SentencePiece model ({error})") from None

    @property
    def model_path(self) -> Path:
        return self._model_path

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer({str(self._model_path)!r}, lowercase={self.lowercase})"

    def __getstate__(self) -> dict:
        # the processor is a C++ object: pickle the path and load it again (DataLoader workers)
        return {"model_path": self._model_path, "lowercase": self.lowercase}

    def __setstate__(self, state: dict) -> None:
        type(self).__init__(self, state["model_path"], state["lowercase"])

    def tokenize(self, text: str) -> list[str]:
        text = normalize_text(text)
        return self._processor.encode(text.lower() if self.lowercase else text, out_type=str)

    def detokenize(self, tokens: Sequence[str]) -> str:
        return self._processor.decode(list(tokens))

    def pieces(self) -> list[str]:
        """Every piece the model can write, in its id order (no control or unknown piece)."""
        processor = self._processor
        return [
            processor.id_to_piece(i)
            for i in range(processor.get_piece_size())
            if not (processor.is_control(i) or processor.is_unknown(i))
        ]

    def resample(self, pieces: Sequence[str], alpha: float) -> list[str]:
        """The same text segmented at random: for a BPE model each merge dropped with probability
        `alpha` (BPE-dropout), for a unigram model a segmentation sampled with smoothing `alpha`.
        The draws come from SentencePiece's own generator (`sentencepiece.set_random_generator_seed`)."""
        text = self._processor.decode(list(pieces))
        return self._processor.encode(text, out_type=str, enable_sampling=True, alpha=alpha, nbest_size=-1)

    def prefix_tokens(self, text: str) -> tuple[list[str], str]:
        """The pieces of the complete words, and the last word as typed (`Tokenizer`): its pieces
        depend on how it ends, so it is left to be spelled."""
        finished = _ends_a_word(text)
        text = normalize_text(text)
        text = text.lower() if self.lowercase else text
        if finished:
            return self.tokenize(text), ""
        head, _, word = text.rpartition(" ")
        return (self.tokenize(head) if head else []), " " + word

    def surface(self, token: str) -> str:
        """A piece's text: SentencePiece's word-start mark "▁" is a space."""
        return token.replace("▁", " ")

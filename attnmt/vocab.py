"""`Vocab`: tokens <-> ids, with the four special tokens at fixed ids in every vocabulary.

Every vocabulary starts with `<pad>` = 0, `<unk>` = 1, `<s>` = 2, `</s>` = 3, so the model,
the loss (ignore_index=PAD) and the search (stop at EOS) can use the constants below
without asking the vocabulary. The other tokens follow in descending frequency, ties broken
by the token text, so the same training data always gives the same ids.

Leaf module: imports nothing from attnmt but `utils`, and no torch.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from attnmt.utils import UserError, write_text_atomic

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")

_FORMAT = "attnmt-vocab"
_FORMAT_VERSION = 1


class Vocab:
    """An ordered token list; a token's id is its position. Build with `Vocab.build`."""

    def __init__(self, tokens: Sequence[str]):
        """`tokens`: every token in id order, starting with `SPECIALS`, no duplicates."""
        tokens = tuple(tokens)
        if tokens[: len(SPECIALS)] != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {tokens[: len(SPECIALS)]}")
        self._tokens = tokens
        self._ids = {token: index for index, token in enumerate(tokens)}
        if len(self._ids) != len(tokens):
            duplicates = sorted(token for token, count in Counter(tokens).items() if count > 1)
            raise ValueError(f"a vocabulary lists each token once; repeated: {duplicates[:5]}")

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """Count tokens and keep those seen at least `min_freq` times, most frequent first
        (`from_counts`)."""
        return cls.from_counts(Counter(token for tokens in token_lists for token in tokens), min_freq, max_size)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """Tokens counted at least `min_freq` times, most frequent first, ties by the token text.

        `max_size` counts the four specials: `max_size=10` keeps the 6 most frequent tokens.
        Tokens spelled like a special are not counted (they already have their id).
        """
        if min_freq < 1:
            raise ValueError(f"min_freq must be at least 1, got {min_freq}")
        if max_size is not None and max_size < len(SPECIALS):
            raise ValueError(f"max_size counts the {len(SPECIALS)} special tokens, so it must be >= 4, got {max_size}")
        kept = sorted(
            (token for token, count in counts.items() if count >= min_freq and token not in SPECIALS),
            key=lambda t: (-counts[t], t),
        )
        if max_size is not None:
            kept = kept[: max_size - len(SPECIALS)]
        return cls(SPECIALS + tuple(kept))

    @property
    def tokens(self) -> tuple[str, ...]:
        """All tokens in id order, specials first."""
        return self._tokens

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self._tokens == other._tokens

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {', '.join(self._tokens[len(SPECIALS) : len(SPECIALS) + 5])}, ...)"

    def token_to_id(self, token: str) -> int:
        """The token's id, or UNK for a token not in the vocabulary."""
        return self._ids.get(token, UNK)

    def id_to_token(self, index: int) -> str:
        if not 0 <= index < len(self._tokens):
            raise IndexError(f"token id {index} is outside this vocabulary of {len(self._tokens)} tokens")
        return self._tokens[index]

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Tokens -> ids; unknown tokens -> UNK. Adds no BOS/EOS: the batching does that."""
        return [self._ids.get(token, UNK) for token in tokens]

    def decode(self, ids: Iterable[int], strip_specials: bool = True) -> list[str]:
        """Ids -> tokens. With `strip_specials`, stop at the first EOS and drop PAD and BOS;
        UNK stays as "<unk>", since the output did contain an unknown word there."""
        tokens = []
        for index in ids:
            index = int(index)  # accepts numpy / torch integer scalars too
            if strip_specials and index == EOS:
                break
            if strip_specials and index in (PAD, BOS):
                continue
            tokens.append(self.id_to_token(index))
        return tokens

    def coverage(self, token_lists: Iterable[Sequence[str]]) -> float:
        """Fraction of the tokens in `token_lists` that are in the vocabulary (1 - OOV rate).
        No tokens at all counts as full coverage, 1.0."""
        total = known = 0
        for tokens in token_lists:
            total += len(tokens)
            known += sum(token in self._ids for token in tokens)
        return known / total if total else 1.0

    def save(self, path: str | Path) -> None:
        """Write JSON atomically: a crash mid-write leaves any previous file intact."""
        document = {"format": _FORMAT, "version": _FORMAT_VERSION, "tokens": list(self._tokens)}
        write_text_atomic(path, json.dumps(document, ensure_ascii=False, indent=0) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Read a file written by `save`; anything else is a UserError naming the file."""
        path = Path(path)
        expected = f'expected a JSON object {{"format": "{_FORMAT}", "tokens": [...]}} as written by Vocab.save'
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"{path}: vocabulary file not found") from None
        except (OSError, UnicodeDecodeError) as error:
            raise UserError(f"{path}: cannot read the vocabulary file ({error})") from None
        except json.JSONDecodeError as error:
            raise UserError(f"{path}: not valid JSON at line {error.lineno} ({error.msg}); {expected}") from None
        if not isinstance(document, dict) or document.get("format") != _FORMAT:
            raise UserError(f"{path}: not an attnmt vocabulary; {expected}")
        if document.get("version") != _FORMAT_VERSION:
            raise UserError(
                f"{path}: vocabulary format version {document.get('version')!r}; expected {_FORMAT_VERSION}"
            )
        tokens = document.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
            raise UserError(f'{path}: "tokens" must be a list of strings; {expected}')
        try:
            return cls(tokens)
        except ValueError as error:
            raise UserError(f"{path}: {error}") from None

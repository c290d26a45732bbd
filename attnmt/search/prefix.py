"""Target prefixes: the start of a translation, typed by a user, that the search must continue.

A prefix is text in the target language. Its complete words are tokenized with the target
tokenizer and forced one token per step; an unfinished last word (the text does not end with a
space: "Ein Mann spiel") is not tokenized, since its tokens depend on how the word ends, but
spelled: the search may take only tokens whose text continues the typed characters, until they
are all out ("spiel" + "t" or "▁spielt" alike). Which tokens may follow which is worked out
once per prefix over the target vocabulary's surfaces (`Tokenizer.surface`), as a small
automaton: state j = the first j characters of the word spelled.

`parse` turns text into a `Prefix` (or a UserError: nothing but unknown tokens, a word no
tokens spell), `parse_prefixes` a batch's, checked against their sentences' length limits;
`kept` writes an output's forced start as it was typed. `forcing.Forcing.of` turns a batch's
prefixes into the tensors the search takes, in the index space it runs in (the whole
vocabulary, or a shortlist's).

Light module: no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnmt.utils import UserError
from attnmt.vocab import SPECIALS, UNK, Vocab


@dataclass(frozen=True)
class Prefix:
    """forced: the target ids of the complete words, in order. moves: for the unfinished last
    word, per state j (characters spelled), the (token id, next state) pairs it may take, the
    next state being the word's length once it is spelled; empty when the text ends a word.
    `forcing.Forcing` forces it."""

    forced: tuple[int, ...]
    moves: tuple[tuple[tuple[int, int], ...], ...]
    vocab_size: int  # of the target vocabulary the ids belong to
    # The complete words as the tokenizer reads them (normalized, lowercased where it lowercases),
    # unknown words included: what an output shows for its forced tokens (`kept`).
    text: str = ""

    def ids(self) -> set[int]:
        """Every target id the prefix may put out: what a shortlist must hold for it."""
        return set(self.forced) | {token for state in self.moves for token, _ in state}

    def min_tokens(self) -> int:
        """The fewest tokens the prefix takes: its forced ones and at least one for a word to spell."""
        return len(self.forced) + (1 if self.moves else 0)


def surfaces(tokenizer, vocab: Vocab) -> list[str | None]:
    """Each target id's text as it runs in a sentence (a word start as " "); None for the specials."""
    return [None if token in SPECIALS else tokenizer.surface(token) for token in vocab.tokens]


def parse(text: str, tokenizer, vocab: Vocab, token_surfaces: Sequence[str | None]) -> Prefix:
    """The prefix `text` for a model whose target side is `tokenizer` and `vocab` (with their
    `surfaces`); a UserError when nothing of it is known to the model or its last word cannot
    be spelled with the vocabulary."""
    tokens, word = tokenizer.prefix_tokens(text)
    forced = tuple(vocab.encode(tokens))
    if forced and all(token == UNK for token in forced) and not word:
        raise UserError(f"{text!r}: every token is unknown to the model's target vocabulary", field="prefix")
    moves = _spelling(word, token_surfaces) if word else ()
    if word and moves is None:
        raise UserError(f"{text!r}: no tokens of the target vocabulary spell {word.strip()!r}", field="prefix")
    return Prefix(forced, moves or (), len(vocab), tokenizer.detokenize(tokens) if tokens else "")


def parse_prefixes(
    texts: Sequence[str | None],
    source_lengths: Sequence[int],
    limits: Sequence[int],
    tokenizer,
    vocab: Vocab,
    token_surfaces: Sequence[str | None],
    first: int = 1,
) -> list[Prefix | None]:
    """Each sentence's prefix (None or "": free) parsed for the target side `tokenizer`, `vocab`
    and their `surfaces`, and checked to leave room for EOS within the sentence's length limit
    (`limits`, tokens with EOS; `source_lengths` in tokens); a UserError naming the sentence
    (numbered from `first`) otherwise."""
    if len(texts) != len(source_lengths):
        raise UserError(f"{len(texts)} prefixes for {len(source_lengths)} sentences", field="prefix")
    parsed: list[Prefix | None] = []
    for index, (text, source_length, limit) in enumerate(zip(texts, source_lengths, limits, strict=True)):
        if not text:
            parsed.append(None)
            continue
        where = f"sentence {first + index}"
        if not source_length:
            raise UserError(f"{where} is empty: there is nothing for its prefix to continue", field="prefix")
        try:
            prefix = parse(text, tokenizer, vocab, token_surfaces)
        except UserError as error:
            raise UserError(f"{where}: prefix {error.problem}", field="prefix") from None
        room = limit - 1  # tokens before the EOS that ends every output
        if prefix.min_tokens() > room:
            raise UserError(
                f"{where}: its prefix takes {prefix.min_tokens()} tokens, more than the {room} its length "
                "limit leaves before EOS (decode.max_length_a, decode.max_length_b)",
                field="prefix",
            )
        parsed.append(prefix)
    return parsed


def kept(output: str, forced_output: str, prefix: Prefix) -> str:
    """`output` (a translation's text) with its start `forced_output` (the text its forced tokens
    make) written as the prefix's own words: a word or character the target vocabulary lacks is
    forced as <unk>, and the translation must still begin with what was typed."""
    if prefix.text and output.startswith(forced_output):
        return prefix.text + output[len(forced_output) :]
    return output


def _spelling(word: str, token_surfaces: Sequence[str | None]) -> tuple[tuple[tuple[int, int], ...], ...] | None:
    """Per state j (the first j characters of `word` spelled) the tokens that continue it and
    the state they lead to (len(word): spelled), keeping only moves from which the word can be
    finished; None when it cannot be spelled at all."""
    length = len(word)
    moves: list[tuple[tuple[int, int], ...]] = [()] * length
    for j in range(length - 1, -1, -1):  # from the end: a move must lead somewhere finishable
        rest = word[j:]
        found = []
        for token, surface in enumerate(token_surfaces):
            if not surface:
                continue
            if surface.startswith(rest):
                found.append((token, length))
            elif rest.startswith(surface) and moves[j + len(surface)]:
                found.append((token, j + len(surface)))
        moves[j] = tuple(found)
    return tuple(moves) if moves[0] else None

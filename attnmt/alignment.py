"""Word alignments from attention: each target word aligned to the source word its tokens attend
to most, as Pharaoh `i-j` pairs (source word i, target word j, from 0), the format fast_align
and the alignment literature use.

A translation's attention is over tokens, subwords included; users and alignment tools count
words, the whitespace-separated words of the detokenized text. `word_of_tokens` maps each token
to its word by finding the token's text in the detokenized text, in order; every target token
but </s> then contributes the pair (word of its most-attended source token, its own word), and
pairs repeated by the subwords of one word are given once. `aer` is the alignment error rate of
Och and Ney (2003) against sure and possible reference links.

Light module: no torch (attention is taken as nested lists or anything with `.tolist()`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


def word_of_tokens(tokens: Sequence[str], text: str, surface: Callable[[str], str]) -> list[int]:
    """Each token's word in `text` (whitespace-separated, from 0): the token's text, its
    `surface` without the word-start space, is looked for from where the previous one ended; a
    token not found there (a detokenizer that rewrote it) stays in the current word."""
    words, position, current = [], 0, 0
    for token in tokens:
        piece = surface(token).lstrip(" ")
        found = text.find(piece, position) if piece else -1
        if found >= 0:
            current = text.count(" ", 0, found) if found > 0 else 0
            position = found + len(piece)
        words.append(current)
    return words


def alignment(attention, source_words: Sequence[int], target_words: Sequence[int]) -> list[tuple[int, int]]:
    """attention (T + 1, S) rows over source tokens, the last row </s>'s; source_words (S,) and
    target_words (T,) each token's word -> the sorted (source word, target word) pairs."""
    rows = attention.tolist() if hasattr(attention, "tolist") else attention
    pairs = set()
    for target_word, row in zip(target_words, rows, strict=False):  # </s>'s row is left out
        if row:
            source_token = max(range(len(row)), key=row.__getitem__)
            pairs.add((source_words[source_token], target_word))
    return sorted(pairs, key=lambda pair: (pair[1], pair[0]))


def pharaoh(pairs: Iterable[tuple[int, int]]) -> str:
    """Pairs as the Pharaoh format writes them: "0-0 1-2 2-1"."""
    return " ".join(f"{i}-{j}" for i, j in pairs)


def aer(
    found: Iterable[tuple[int, int]], sure: Iterable[tuple[int, int]], possible: Iterable[tuple[int, int]] = ()
) -> float:
    """Alignment error rate 1 - (|A & S| + |A & P|) / (|A| + |S|), P holding S (Och and Ney, 2003)."""
    found, sure = set(found), set(sure)
    possible = set(possible) | sure
    total = len(found) + len(sure)
    return 0.0 if total == 0 else 1.0 - (len(found & sure) + len(found & possible)) / total

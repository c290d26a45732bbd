"""Translation with a trained model: `load(ModelSpec(run_dir)).translate(sentences)` (`loading`).

The path a sentence takes: source tokenizer -> source vocabulary -> `search.decode_all`
(length-sorted batches, greedy or beam) -> target vocabulary -> detokenizer. `explain` replays
one sentence's search step by step; the pictures draw a translation's attention. Scoring
translations is `evaluation`; reading the user's text files is `textfiles`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnmt.config import Config
from attnmt.data import TextCodec
from attnmt.plot import attention_grid, attention_heatmap
from attnmt.search import BeamStep, SearchOptions, Shortlisting, StepModel, beam_search, decode_all
from attnmt.utils import Say, UserError

# Longer sources are cut to this many tokens (with a warning): the encoder and the search's
# length limit grow with the source, and a runaway line (a whole file without newlines)
# should cost a truncated translation, not the memory of the machine.
MAX_SOURCE_TOKENS = 250
EOS_LABEL = "</s>"


def _warn(message: str) -> None:
    print(f"attnmt: warning: {message}", file=sys.stderr)


@dataclass
class Translation:
    """One translated sentence (its best hypothesis) and the rest of its n-best list.

    attention: (len(tokens) + 1, len(source_tokens)); row t is the attention while emitting
    output token t, the last row the one for </s>. The source carries no EOS, so there is no
    extra column.
    """

    source: str
    text: str
    tokens: list[str]
    source_tokens: list[str]
    score: float  # log-probability / length penalty: what the search ranked by
    log_prob: float  # summed log-probability of the tokens and </s>
    attention: torch.Tensor
    alternatives: list[Translation] = field(default_factory=list)


def _rows(attention: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """Attention with exactly `rows` rows: a search that stopped on a non-EOS special token
    leaves one row short (pad with zeros) so the (tokens + 1, S) promise always holds."""
    attention = attention[:rows, :columns]
    if attention.shape[0] < rows or attention.shape[1] < columns:
        padded = attention.new_zeros(rows, columns)
        padded[: attention.shape[0], : attention.shape[1]] = attention
        return padded
    return attention


@dataclass
class SearchCandidate:
    """One of the 2K continuations beam search ranked at one step (see `search.BeamStep`)."""

    tokens: list[str]  # the hypothesis so far, the new token last
    parent: int  # slot of the beam it extends, among the previous step's kept candidates
    log_prob: float  # summed over its tokens
    status: str  # "finished" (ended in EOS among the first K), "kept" (a beam of the next step) or "dropped"
    slot: int  # its slot among the next step's beams; -1 unless kept
    score: float | None  # log_prob / length penalty, the ranking score, when finished
    attention: list[float]  # (S,) the attention of the step that chose its last token


@dataclass
class Explanation:
    """A sentence's search step by step (candidates best first) and the translation it gave."""

    source_tokens: list[str]
    steps: list[list[SearchCandidate]]
    translation: Translation


class Translator:
    """A trained model with its tokenizers, vocabularies and decoding defaults."""

    def __init__(
        self,
        model: StepModel,
        codec: TextCodec,
        config: Config,
        *,
        device: str,
        checkpoint: Path,
        members: Sequence[Path] = (),
        parameters: int = 0,
        shortlist: Shortlisting | None = None,
    ):
        """`model` is in eval mode on `device`; `checkpoint` is the checkpoint folder (or export
        directory) it was read from, `members` those of every member of an ensemble (default: the
        one checkpoint), `parameters` the model's number of parameters (an ensemble's: all its
        members'), `shortlist` the vocabulary shortlist every search uses (None: the whole
        vocabulary). `loading.load` builds one from a `ModelSpec`."""
        self.model = model
        self.codec = codec
        self.config = config
        self.device = device
        self.checkpoint = checkpoint
        self.members = list(members) or [checkpoint]
        self.parameters = parameters
        self.shortlist = shortlist

    def search_options(self, **overrides) -> SearchOptions:
        """The run's `decode` settings as SearchOptions, with `overrides` (None keeps a setting);
        impossible settings are a UserError."""
        return SearchOptions.from_config(self.config.decode, **overrides)

    def translate(
        self,
        sentences: Sequence[str],
        options: SearchOptions | None = None,
        *,
        first_number: int = 1,
        say: Say = _warn,
    ) -> list[Translation]:
        """One Translation per sentence, in order, searched as `options` say (default: the run's
        decode settings). Empty or blank sentences give empty translations; sources over
        MAX_SOURCE_TOKENS are truncated with a warning, told by `say`, that names the sentence
        (numbered from `first_number`)."""
        options = self.search_options() if options is None else options
        source_tokens = [self.codec.source_tokens(sentence) for sentence in sentences]
        for index, tokens in enumerate(source_tokens):
            if len(tokens) > MAX_SOURCE_TOKENS:
                say(
                    f"sentence {first_number + index} has {len(tokens)} tokens; "
                    f"only its first {MAX_SOURCE_TOKENS} are translated"
                )
                source_tokens[index] = tokens[:MAX_SOURCE_TOKENS]
        hypotheses = decode_all(
            self.model,
            [self.codec.src_vocab.encode(tokens) for tokens in source_tokens],
            options,
            batch_size=self.config.decode.batch_size,
            batch_tokens=self.config.decode.batch_tokens,
            device=self.device,
            shortlist=self.shortlist,
        )
        results = []
        for sentence, tokens, candidates in zip(sentences, source_tokens, hypotheses, strict=True):
            # decode_all gives an empty source one empty hypothesis, so `outputs` is never empty.
            best, *alternatives = [self._translation(sentence, tokens, hypothesis) for hypothesis in candidates]
            best.alternatives = alternatives
            results.append(best)
        return results

    def explain(self, sentence: str, options: SearchOptions | None = None) -> Explanation:
        """Beam search of one sentence, every step recorded: enough to replay it. With a beam of
        one this is greedy search (two candidates a step, the best one kept)."""
        options = self.search_options() if options is None else options
        source_tokens = self.codec.source_tokens(sentence)[:MAX_SOURCE_TOKENS]
        if not source_tokens:
            raise UserError("nothing to explain: the sentence has no tokens")
        ids = self.codec.src_vocab.encode(source_tokens)
        src = torch.tensor([ids], dtype=torch.long, device=self.device)  # (1, S)
        lengths = torch.tensor([len(ids)], dtype=torch.long, device=self.device)  # (1,)
        steps: list[list[SearchCandidate]] = []
        beams: list[list[str]] = [[]]  # the live hypotheses' tokens by slot

        def record(seen: BeamStep) -> None:
            fields = (seen.tokens, seen.origin, seen.log_probs, seen.finished, seen.slot, seen.attention.float())
            rows = zip(*(field[0].tolist() for field in fields), strict=True)  # sentence 0: the only one
            candidates = []
            for token, parent, log_prob, finished, slot, attention in rows:
                if log_prob == float("-inf"):  # not a candidate (a vocabulary smaller than 2K)
                    continue
                candidates.append(
                    SearchCandidate(
                        tokens=[*beams[parent], self.codec.tgt_vocab.id_to_token(token)],
                        parent=parent,
                        log_prob=log_prob,
                        status="finished" if finished else "kept" if slot >= 0 else "dropped",
                        slot=slot,
                        score=log_prob / seen.length_penalty if finished else None,
                        attention=attention,
                    )
                )
            beams[:] = [c.tokens for c in sorted((c for c in candidates if c.slot >= 0), key=lambda c: c.slot)]
            steps.append(candidates)

        best, *alternatives = [
            self._translation(sentence, source_tokens, hypothesis)
            for hypothesis in beam_search(self.model, src, lengths, options, observer=record)[0]
        ]
        best.alternatives = alternatives
        return Explanation(source_tokens, steps, best)

    def _translation(self, sentence: str, source_tokens: list[str], hypothesis) -> Translation:
        vocab = self.codec.tgt_vocab
        tokens = [vocab.id_to_token(index) for index in hypothesis.tokens]
        return Translation(
            source=sentence,
            text=self.codec.decode_target(hypothesis.tokens),
            tokens=tokens,
            source_tokens=source_tokens,
            score=hypothesis.score,
            log_prob=hypothesis.log_prob,
            attention=_rows(hypothesis.attention.float(), len(tokens) + 1, len(source_tokens)),
        )


# --- pictures ---------------------------------------------------------------------------


def _heatmap_item(translation: Translation):
    if not translation.source_tokens:
        raise UserError("an empty sentence has no attention to draw")
    return translation.attention.numpy(), translation.source_tokens, [*translation.tokens, EOS_LABEL]


def heatmap(translation: Translation, path: str | Path, title: str = "") -> Path:
    """The attention of one translation: source tokens along x, output tokens and </s> along y."""
    return attention_heatmap(*_heatmap_item(translation), path, title=title)


def heatmap_grid(translations: Sequence[Translation], path: str | Path) -> Path:
    """Several translations' attention in one figure (empty sentences are left out)."""
    shown = [t for t in translations if t.source_tokens]
    if not shown:
        raise UserError("only empty sentences; no attention to draw")
    return attention_grid([_heatmap_item(t) for t in shown], path, titles=[t.text or "(empty)" for t in shown])


def write_heatmaps(translations: Sequence[Translation], out_dir: str | Path, first_index: int = 0) -> list[Translation]:
    """OUT_DIR/NNNN.png for each non-empty sentence, NNNN its 1-based position counted from
    `first_index` (so file names match input lines); returns the translations drawn."""
    drawn = []
    for offset, translation in enumerate(translations):
        if translation.source_tokens:
            path = Path(out_dir) / f"{first_index + offset + 1:04d}.png"
            try:
                heatmap(translation, path, title=translation.text)
            except OSError as exc:
                raise UserError(f"{out_dir}: cannot write heatmaps ({exc.strerror or exc})") from None
            drawn.append(translation)
    return drawn


def nbest_lines(translations: Sequence[Translation], first_index: int = 0) -> list[str]:
    """Moses-style n-best lines `i ||| text ||| score`, i counted from `first_index`."""
    lines = []
    for offset, translation in enumerate(translations):
        for candidate in [translation, *translation.alternatives]:
            lines.append(f"{first_index + offset} ||| {candidate.text} ||| {candidate.score:.4f}")
    return lines

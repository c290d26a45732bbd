"""Translation with a trained model: `load(ModelSpec(run_dir)).translate(sentences)` (`loading`).

The path a sentence takes: source tokenizer -> source vocabulary -> `search.decode.decode_all`
(length-sorted batches, greedy or beam) -> target vocabulary -> detokenizer. A translation may
be steered: a prefix it continues, phrases it must contain, or both. `score` gives the model's
reading of a given translation, `align` a translation's word alignment, `explain` replays one
sentence's search step by step. What they return is `translation`'s; a translation's attention
is drawn by `heatmaps`; scoring against references is `evaluation`; reading the user's text files
is `data.textfiles`; documents, markup and glossaries are composed by `jobs.job`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import torch

from attnmt.alignment import alignment, word_of_tokens
from attnmt.codec import TextCodec
from attnmt.config import Config, DataConfig
from attnmt.search.beam import BeamStep, beam_search
from attnmt.search.decode import Shortlisting, decode_all, steering_of
from attnmt.search.hypotheses import Hypothesis
from attnmt.search.options import SearchOptions, SearchOverrides, ShortlistStepModel, length_penalty
from attnmt.search.phrases import missing_required_phrases, parse_required_phrases
from attnmt.search.prefix import Prefix, kept, parse_prefixes, surfaces
from attnmt.search.teacher import teacher_forced
from attnmt.translation import Explanation, SearchCandidate, Source, Translation
from attnmt.utils import Say, UserError
from attnmt.vocab import EOS, PAD

# Longer sources are cut to this many tokens (with a warning): the encoder and the search's
# length limit grow with the source, and a runaway line (a whole file without newlines)
# should cost a truncated translation, not the memory of the machine.
MAX_SOURCE_TOKENS = 250


def warn(message: str) -> None:
    print(f"attnmt: warning: {message}", file=sys.stderr)


def _padded(sequences: Sequence[Sequence[int]]) -> torch.Tensor:
    """Id sequences -> (B, L) long, PAD after each."""
    padded = torch.full((len(sequences), max(len(ids) for ids in sequences)), PAD, dtype=torch.long)
    for row, ids in enumerate(sequences):
        padded[row, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
    return padded


def _rows(attention: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """Attention with exactly `rows` rows: a search that stopped on a non-EOS special token
    leaves one row short (pad with zeros) so the (tokens + 1, S) promise always holds."""
    attention = attention[:rows, :columns]
    if attention.shape[0] < rows or attention.shape[1] < columns:
        padded = attention.new_zeros(rows, columns)
        padded[: attention.shape[0], : attention.shape[1]] = attention
        return padded
    return attention


# The settings `Translator.describe` names a model's architecture by, per family.
ARCHITECTURE = {
    "rnn": (
        "rnn",
        "attention",
        "decoder",
        "embedding_size",
        "encoder_hidden",
        "encoder_layers",
        "bidirectional",
        "decoder_hidden",
        "decoder_layers",
    ),
    "transformer": ("d_model", "heads", "feed_forward", "encoder_layers", "decoder_layers", "norm"),
}


class Translator:
    """A trained model with its tokenizers, vocabularies and decoding defaults."""

    def __init__(
        self,
        model: ShortlistStepModel,
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
        self.model, self.codec, self.config = model, codec, config
        self.device = device
        self.checkpoint = checkpoint
        self.members = list(members) or [checkpoint]
        self.parameters = parameters
        self.shortlist = shortlist
        self._target_surfaces: list[str | None] | None = None  # each target id's text, for prefixes

    def search_options(self, overrides: SearchOverrides | None = None, **settings) -> SearchOptions:
        """The run's `decode` settings as SearchOptions, with `overrides` and then `settings` (the
        same names; None keeps a setting); impossible settings are a UserError."""
        return SearchOptions.from_config(self.config.decode, (overrides or SearchOverrides()).replace(**settings))

    # What the faces and the job read of the model, by name: never its codec or config.

    @property
    def source_language(self) -> str:
        """The language it translates from (its data.src_lang)."""
        return self.config.data.src_lang

    @property
    def target_language(self) -> str:
        """The language it translates into (its data.tgt_lang)."""
        return self.config.data.tgt_lang

    @property
    def lowercase(self) -> bool:
        """Whether it reads and writes lowercased text (its data.lowercase)."""
        return self.config.data.lowercase

    @property
    def data(self) -> DataConfig:
        """The data settings it was trained with: corpus, languages, tokenizers; what its splits
        are read by (`data.splits.split_examples`)."""
        return self.config.data

    @property
    def n_best(self) -> int:
        """How many hypotheses a sentence its run writes by default (its decode.n_best)."""
        return self.config.decode.n_best

    @property
    def surfaces(self) -> tuple[Callable[[str], str], Callable[[str], str]]:
        """Each side's token -> the text it stands for (source, target): where a token sits in a sentence."""
        return self.codec.src_tokenizer.surface, self.codec.tgt_tokenizer.surface

    def count_source_tokens(self, text: str) -> int:
        """How many source tokens the model reads `text` as."""
        return len(self.codec.source_tokens(text))

    def encode_target(self, text: str) -> list[int]:
        """`text` as target ids: whether the model can write it (UNK where it cannot)."""
        return self.codec.encode_target(text)

    def describe(self) -> dict:
        """What it is, as plain data: languages, architecture and size, validation metric and
        default search."""
        config, model = self.config, self.config.model
        return {
            "source_language": config.data.src_lang,
            "target_language": config.data.tgt_lang,
            "architecture": {name: getattr(model, name) for name in ("family", *ARCHITECTURE[model.family])}
            | {"tokenizer": config.data.tokenizer, "parameters": self.parameters},
            "valid_metric": config.train.early_stopping_metric,
            "decoding": {
                "beam_size": config.decode.beam_size,
                "length_penalty": config.decode.length_penalty,
                "max_length_a": config.decode.max_length_a,
                "max_length_b": config.decode.max_length_b,
            },
        }

    def translate(
        self,
        sentences: Sequence[str],
        options: SearchOptions | None = None,
        *,
        prefixes: Sequence[str | None] | None = None,
        required_phrases: Sequence[Sequence[str]] | None = None,
        first_number: int = 1,
        say: Say = warn,
    ) -> list[Translation]:
        """One Translation per sentence, in order, searched as `options` say (default: the run's
        decode settings). Empty or blank sentences give empty translations; sources over
        MAX_SOURCE_TOKENS are truncated with a warning, told by `say`, that names the sentence
        (numbered from `first_number`). `prefixes`, one per sentence (None or "": free), are the
        starts of the translations, which the search continues (`search.prefix`).
        `required_phrases`, one list per sentence, are target phrases its translations must
        contain (`search.phrases`); a phrase its length limit left no room for is named in the
        translation's `missing_required_phrases` and told by `say`. A sentence may have both."""
        options = self.search_options() if options is None else options
        phrase_ids = None
        if required_phrases is not None:
            phrase_ids = parse_required_phrases(
                required_phrases, len(sentences), self.codec.encode_target, first_number
            )
        source_tokens = [self.codec.source_tokens(sentence) for sentence in sentences]
        for index, tokens in enumerate(source_tokens):
            if len(tokens) > MAX_SOURCE_TOKENS:
                say(
                    f"sentence {first_number + index} has {len(tokens)} tokens; "
                    f"only its first {MAX_SOURCE_TOKENS} are translated"
                )
                source_tokens[index] = tokens[:MAX_SOURCE_TOKENS]
        parsed = None if prefixes is None else self._parse_prefixes(prefixes, source_tokens, options, first_number)
        hypotheses = decode_all(
            self.model,
            [self.codec.src_vocab.encode(tokens) for tokens in source_tokens],
            options,
            batch_size=self.config.decode.batch_size,
            batch_tokens=self.config.decode.batch_tokens,
            device=self.device,
            shortlist=self.shortlist,
            prefixes=parsed,
            required_phrases=phrase_ids,
            # CUDA graphs replay fixed shapes: a transformer's cache grows by a position each step
            fixed_shapes=self.config.decode.cuda_graphs
            and self.device.startswith("cuda")
            and self.config.model.family == "rnn",
        )
        results = []
        for index, (sentence, tokens, candidates) in enumerate(zip(sentences, source_tokens, hypotheses, strict=True)):
            # decode_all gives an empty source one empty hypothesis: `candidates` is never empty, so
            # `_steered` always has a best translation to return.
            prefix = None if parsed is None else parsed[index]
            phrases = (
                ([], [])
                if required_phrases is None or phrase_ids is None
                else (required_phrases[index], phrase_ids[index])
            )
            best = self._steered(sentence, tokens, candidates, prefix, *phrases)
            if best.missing_required_phrases:
                names = ", ".join(repr(phrase) for phrase in best.missing_required_phrases)
                say(f"sentence {first_number + index}: its length limit left no room for {names}")
            results.append(best)
        return results

    def _steered(
        self,
        sentence: str,
        source_tokens: list[str],
        hypotheses: Sequence[Hypothesis],
        prefix: Prefix | None,
        required_phrases: Sequence[str],
        phrase_ids: Sequence[Sequence[int]],
    ) -> Translation:
        """A sentence's best translation with the others as its alternatives, each written as its
        steering asked: the start of its prefix as typed (`prefix.kept`), and the required
        phrases it lacks named (`phrases.missing_required_phrases`); `phrase_ids` are
        `required_phrases` as target ids."""
        best, *alternatives = [self._translation(sentence, source_tokens, hypothesis) for hypothesis in hypotheses]
        best.alternatives = alternatives
        for translation, hypothesis in zip([best, *alternatives], hypotheses, strict=True):
            if prefix is not None:
                forced_output = self.codec.decode_target(hypothesis.tokens[: len(prefix.forced)])
                translation.text = kept(translation.text, forced_output, prefix)
            if phrase_ids:
                lacking = missing_required_phrases(hypothesis.tokens, phrase_ids)
                translation.missing_required_phrases = [required_phrases[k] for k in lacking]
        return best

    def translate_sources(
        self, sources: Sequence[str | Source], options: SearchOptions | None = None, *, first_number: int = 1, say=warn
    ) -> list[Translation]:
        """`translate` of sentences given as text or as `Source`s, whose prefixes are continued and
        whose required phrases are met."""
        if all(isinstance(source, str) for source in sources):  # all text, as the cast below tells the type checker
            return self.translate(cast("Sequence[str]", sources), options, first_number=first_number, say=say)
        given = [Source(source) if isinstance(source, str) else source for source in sources]
        prefixes = [source.prefix for source in given] if any(source.prefix for source in given) else None
        required_phrases = (
            [list(source.required_phrases) for source in given] if any(s.required_phrases for s in given) else None
        )
        texts = [source.text for source in given]
        return self.translate(
            texts, options, prefixes=prefixes, required_phrases=required_phrases, first_number=first_number, say=say
        )

    def check_required_phrases(self, required_phrases: Sequence[Sequence[str]], first_number: int = 1) -> None:
        """What `translate` would refuse of these required phrases (one list per sentence), as its UserError."""
        parse_required_phrases(required_phrases, len(required_phrases), self.codec.encode_target, first_number)

    def check_prefixes(
        self, sentences: Sequence[str], prefixes: Sequence[str | None], options: SearchOptions, first_number: int = 1
    ) -> None:
        """What `translate` would refuse of these prefixes, as the UserError it would raise
        (sentences numbered from `first_number`): a server checks each request before it joins
        a batch with others."""
        source_tokens = [self.codec.source_tokens(sentence)[:MAX_SOURCE_TOKENS] for sentence in sentences]
        self._parse_prefixes(prefixes, source_tokens, options, first_number)

    def _parse_prefixes(
        self, texts: Sequence[str | None], source_tokens: Sequence[list[str]], options: SearchOptions, first: int
    ) -> list[Prefix | None]:
        """Each sentence's prefix parsed for this model's target side (`prefix.parse_prefixes`)."""
        if self._target_surfaces is None:
            self._target_surfaces = surfaces(self.codec.tgt_tokenizer, self.codec.tgt_vocab)
        lengths = [len(tokens) for tokens in source_tokens]
        limits = options.length_limits(torch.tensor(lengths, dtype=torch.long)).tolist()
        tokenizer, vocab = self.codec.tgt_tokenizer, self.codec.tgt_vocab
        return parse_prefixes(texts, lengths, limits, tokenizer, vocab, self._target_surfaces, first)

    def score(
        self,
        sentences: Sequence[str],
        targets: Sequence[str],
        options: SearchOptions | None = None,
        *,
        first_number: int = 1,
        batch_size: int = 64,
    ) -> list[Translation]:
        """Each given target as a Translation of its sentence: the model's log-probability of
        each of its tokens and of </s> (`token_log_probs`), their sum, the score under the
        length penalty of `options` (default: the run's), and the attention of each step, all as
        the model computes them when it puts out those tokens itself. The whole vocabulary is
        scored, never a shortlist. An empty sentence is a UserError naming it (numbered from
        `first_number`)."""
        if len(sentences) != len(targets):
            raise UserError(f"{len(sentences)} sentences but {len(targets)} targets", field="target")
        options = self.search_options() if options is None else options
        source_tokens = [self.codec.source_tokens(sentence)[:MAX_SOURCE_TOKENS] for sentence in sentences]
        for index, tokens in enumerate(source_tokens):
            if not tokens:
                raise UserError(f"sentence {first_number + index} is empty: there is nothing to score", field="source")
        target_ids = [[*self.codec.encode_target(target), EOS] for target in targets]
        results = []
        for start in range(0, len(sentences), batch_size):
            rows = range(start, min(start + batch_size, len(sentences)))
            src = _padded([self.codec.src_vocab.encode(source_tokens[i]) for i in rows]).to(self.device)
            lengths = torch.tensor([len(source_tokens[i]) for i in rows], device=self.device)
            forced = _padded([target_ids[i] for i in rows]).to(self.device)
            fed = teacher_forced(self.model, src, lengths, forced)
            log_probs, attention = fed.log_probs.cpu(), fed.attention.cpu()
            choices, choice_log_probs = fed.choices.cpu(), fed.choice_log_probs.cpu()
            for row, i in enumerate(rows):
                steps = len(target_ids[i])
                token_log_probs = log_probs[row, :steps].tolist()
                total = sum(token_log_probs)
                penalty = float(length_penalty(torch.tensor(steps), options.length_penalty))
                tokens = self.codec.target_tokens(target_ids[i])
                results.append(
                    Translation(
                        source=sentences[i],
                        text=targets[i],
                        tokens=tokens,
                        source_tokens=source_tokens[i],
                        score=total / penalty,
                        log_prob=total,
                        attention=attention[row, :steps, : len(source_tokens[i])].clone(),
                        token_log_probs=token_log_probs,
                        choices=[self.codec.tgt_vocab.id_to_token(int(t)) for t in choices[row, :steps]],
                        choice_log_probs=choice_log_probs[row, :steps].tolist(),
                    )
                )
        return results

    def align(self, translation: Translation) -> list[tuple[int, int]]:
        """The translation's word alignment from its attention (`alignment`): sorted (source
        word, target word) pairs over the words of the detokenized source and target."""
        source = self.codec.src_tokenizer
        source_text = source.detokenize(translation.source_tokens)
        source_words = word_of_tokens(translation.source_tokens, source_text, source.surface)
        target_words = word_of_tokens(translation.tokens, translation.text, self.codec.tgt_tokenizer.surface)
        return alignment(translation.attention, source_words, target_words)

    def explain(
        self,
        sentence: str,
        options: SearchOptions | None = None,
        *,
        prefix: str | None = None,
        required_phrases: Sequence[str] = (),
    ) -> Explanation:
        """Beam search of one sentence, every step recorded: enough to replay it. With a beam of
        one this is greedy search (two candidates a step, the best one kept). `prefix` and
        `required_phrases` steer it as they steer `translate`: the steps then show what they allowed."""
        options = self.search_options() if options is None else options
        source_tokens = self.codec.source_tokens(sentence)[:MAX_SOURCE_TOKENS]
        if not source_tokens:
            raise UserError("nothing to explain: the sentence has no tokens", field="source")
        parsed = self._parse_prefixes([prefix], [source_tokens], options, 1) if prefix else None
        encode = self.codec.encode_target
        phrase_ids = parse_required_phrases([list(required_phrases)], 1, encode) if required_phrases else None
        steering = steering_of(parsed, phrase_ids, options, device=self.device)
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

        hypotheses = beam_search(self.model, src, lengths, options, observer=record, steering=steering)[0]
        phrases = (list(required_phrases), phrase_ids[0]) if phrase_ids else ([], [])
        best = self._steered(sentence, source_tokens, hypotheses, parsed[0] if parsed else None, *phrases)
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

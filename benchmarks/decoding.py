"""Decoding speed: attnmt's batched search against the references' textbook decoding.

attnmt decodes with `attnmt.search.decode_all` (length-sorted batches, early exit, EOS forced
at 1.5 S + 10). The references decode greedily in batches in corpus order for a fixed 50 steps
with no early exit, as their tutorials do; bentrevett's reference beam-searches one sentence
at a time, d2l's has no beam search (its book has none in code). Each measurement decodes one
batch untimed first; repeats alternate the implementations. Generated tokens are those before EOS.
"""

from __future__ import annotations

import time
from pathlib import Path

from attnmt.checkpoint import load_weights, resolve_checkpoint, run_dir_of
from attnmt.codec import TextCodec
from attnmt.config import Config, load_config
from attnmt.data.batching import pad_sequences
from attnmt.models.seq2seq import Seq2Seq, build_model
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions
from benchmarks.flops import synchronize
from benchmarks.measure import combine_repeats, rotated
from benchmarks.references import REFERENCES

RATES = ("seconds", "sentences_per_s", "tokens_per_s")


def load_trained(run_dir: str | Path) -> tuple[Path, Config, TextCodec, Seq2Seq]:
    """A trained run's best checkpoint, config, tokenizers + vocabularies, and model (eval mode, CPU)."""
    checkpoint = resolve_checkpoint(run_dir, "best")
    config = load_config(run_dir_of(checkpoint) / "config.yaml")
    codec = TextCodec.load(run_dir_of(checkpoint), config.data)
    model = build_model(config.model, len(codec.src_vocab), len(codec.tgt_vocab))
    load_weights(model, checkpoint)
    return checkpoint, config, codec, model.eval()


def _rates(sentences: int, tokens: int, seconds: float, algorithm: str) -> dict:
    return {
        "algorithm": algorithm,
        "sentences": sentences,
        "generated_tokens": tokens,
        "seconds": seconds,
        "sentences_per_s": sentences / seconds,
        "tokens_per_s": tokens / seconds,
    }


def time_attnmt_decoding(model: Seq2Seq, src_ids: list[list[int]], *, beam_size: int, batch_size: int, device) -> dict:
    """attnmt.search.decode_all: length-sorted batches, early exit, EOS forced at 1.5 S + 10."""
    model.eval()
    options = SearchOptions(beam_size=beam_size)
    decode_all(model, src_ids[:batch_size], options, batch_size=batch_size, device=device)
    synchronize(device)
    start = time.perf_counter()
    results = decode_all(model, src_ids, options, batch_size=batch_size, device=device)
    synchronize(device)
    seconds = time.perf_counter() - start
    tokens = sum(len(hypotheses[0].tokens) for hypotheses in results)
    algorithm = "batched greedy" if beam_size == 1 else f"batched beam {beam_size}"
    return _rates(len(src_ids), tokens, seconds, f"attnmt {algorithm}, limit 1.5 S + 10")


def time_reference_decoding(
    name: str, model, src_ids, *, beam_size: int, batch_size: int, beam_sentences: int, device
) -> dict | None:
    """A reference: greedy on batches in corpus order for 50 steps; beam search sentence by
    sentence, or None where the reference has no beam search."""
    module = REFERENCES[name]
    model.eval()
    if beam_size > 1:
        if module.beam_search is None:
            return None
        src_ids = src_ids[:beam_sentences]
        module.beam_search(model, src_ids[0], beam_size=beam_size, device=device)
        start = time.perf_counter()
        outputs = [module.beam_search(model, ids, beam_size=beam_size, device=device) for ids in src_ids]
        algorithm = f"per-sentence beam {beam_size}, limit {module.GREEDY_STEPS}, first {len(src_ids)} sentences"
    else:
        batches = [src_ids[i : i + batch_size] for i in range(0, len(src_ids), batch_size)]

        def decode(batch):
            src, lengths = pad_sequences(batch)
            return module.greedy(model, src.to(device), lengths.to(device))

        decode(batches[0])
        start = time.perf_counter()
        outputs = [tokens for batch in batches for tokens in decode(batch)]
        algorithm = f"batched greedy, fixed {module.GREEDY_STEPS} steps"
    synchronize(device)
    seconds = time.perf_counter() - start
    return _rates(len(src_ids), sum(len(tokens) for tokens in outputs), seconds, algorithm)


def benchmark_decoding(
    models: dict,
    src_ids: list[list[int]],
    *,
    beam_size: int,
    batch_size: int,
    reference_beam_sentences: int,
    device,
    repeats: int = 1,
) -> dict:
    """Greedy and beam decoding of `src_ids` by models["attnmt"] and each reference, `repeats`
    times alternating; medians, with attnmt's speed-up over each reference."""
    results = {}
    for mode, beam in (("greedy", 1), ("beam", beam_size)):
        runs: dict[str, list[dict]] = {name: [] for name in models}
        for turn in range(repeats):
            for name in rotated(list(models), turn):
                if name == "attnmt":
                    measured = time_attnmt_decoding(
                        models[name], src_ids, beam_size=beam, batch_size=batch_size, device=device
                    )
                else:
                    measured = time_reference_decoding(
                        name,
                        models[name],
                        src_ids,
                        beam_size=beam,
                        batch_size=batch_size,
                        beam_sentences=reference_beam_sentences,
                        device=device,
                    )
                if measured is not None:
                    runs[name].append(measured)
        measured_by = {name: combine_repeats(measured, RATES) for name, measured in runs.items() if measured}
        ours = measured_by["attnmt"]
        references = {name: theirs for name, theirs in measured_by.items() if name != "attnmt"}
        results[mode] = {
            "implementations": measured_by,
            "speedup_tokens": {
                name: ours["tokens_per_s"] / max(theirs["tokens_per_s"], 1e-9) for name, theirs in references.items()
            },
            "speedup_sentences": {
                name: ours["sentences_per_s"] / theirs["sentences_per_s"] for name, theirs in references.items()
            },
        }
    return results

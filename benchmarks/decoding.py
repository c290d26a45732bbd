"""Decoding speed: attnmt's batched search against the reference's textbook decoding.

attnmt decodes with `attnmt.search.decode_all` (length-sorted batches, early exit, EOS forced
at 1.5 S + 10). The reference decodes greedily in batches in corpus order for a fixed 50 steps
with no early exit, and beam-searches one sentence at a time (`benchmarks.naive`). Each
measurement decodes one batch untimed first. Generated tokens are those before EOS.
"""

from __future__ import annotations

import time
from pathlib import Path

from attnmt.checkpoint import load_weights, resolve_checkpoint, run_dir_of
from attnmt.config import Config, load_config
from attnmt.data import TextCodec, pad_sequences
from attnmt.model import Seq2Seq, build_model
from attnmt.search import decode_all
from benchmarks import naive
from benchmarks.flops import synchronize


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
    decode_all(model, src_ids[:batch_size], batch_size=batch_size, device=device, beam_size=beam_size)
    synchronize(device)
    start = time.perf_counter()
    results = decode_all(model, src_ids, batch_size=batch_size, device=device, beam_size=beam_size)
    synchronize(device)
    seconds = time.perf_counter() - start
    tokens = sum(len(hypotheses[0].tokens) for hypotheses in results)
    algorithm = "batched greedy" if beam_size == 1 else f"batched beam {beam_size}"
    return _rates(len(src_ids), tokens, seconds, f"attnmt {algorithm}, limit 1.5 S + 10")


def time_naive_decoding(
    model: naive.NaiveSeq2Seq, src_ids, *, beam_size: int, batch_size: int, beam_sentences: int, device
) -> dict:
    """The reference: greedy on batches in corpus order for 50 steps; beam search sentence by sentence."""
    model.eval()
    if beam_size > 1:
        src_ids = src_ids[:beam_sentences]
        naive.beam_search(model, src_ids[0], beam_size=beam_size, device=device)
        start = time.perf_counter()
        outputs = [naive.beam_search(model, ids, beam_size=beam_size, device=device) for ids in src_ids]
        algorithm = f"per-sentence beam {beam_size}, limit {naive.GREEDY_STEPS}, first {len(src_ids)} sentences"
    else:
        batches = [src_ids[i : i + batch_size] for i in range(0, len(src_ids), batch_size)]

        def decode(batch):
            src, lengths = pad_sequences(batch)
            return naive.greedy(model, src.to(device), lengths.to(device))

        decode(batches[0])
        start = time.perf_counter()
        outputs = [tokens for batch in batches for tokens in decode(batch)]
        algorithm = f"batched greedy, fixed {naive.GREEDY_STEPS} steps"
    synchronize(device)
    seconds = time.perf_counter() - start
    return _rates(len(src_ids), sum(len(tokens) for tokens in outputs), seconds, algorithm)


def benchmark_decoding(
    models: dict, src_ids: list[list[int]], *, beam_size: int, batch_size: int, naive_beam_sentences: int, device
) -> dict:
    """Greedy and beam decoding of `src_ids` by models["attnmt"] and models["naive"]."""
    results = {}
    for mode, beam in (("greedy", 1), ("beam", beam_size)):
        attnmt = time_attnmt_decoding(models["attnmt"], src_ids, beam_size=beam, batch_size=batch_size, device=device)
        reference = time_naive_decoding(
            models["naive"],
            src_ids,
            beam_size=beam,
            batch_size=batch_size,
            beam_sentences=naive_beam_sentences,
            device=device,
        )
        results[mode] = {
            "attnmt": attnmt,
            "naive": reference,
            "speedup_sentences": attnmt["sentences_per_s"] / reference["sentences_per_s"],
            "speedup_tokens": attnmt["tokens_per_s"] / max(reference["tokens_per_s"], 1e-9),
        }
    return results

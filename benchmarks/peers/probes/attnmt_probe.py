"""attnmt under the peer benchmark's probe: train or translate in-process, recording as every system does.

    python attnmt_probe.py train --config CONFIG.yaml --events EVENTS.jsonl [--max-minutes M]
    python attnmt_probe.py translate --checkpoint DIR --source FILE --output FILE --beam K
                                     --batch B [--batch-tokens T] --max-length N --result RESULT.json
                                     [--attention-focus F.json]
                                     [--stopping k_finished|best_finished] [--alpha A]

The source file holds word tokens already (the benchmark's shared data): they are looked up
in the run's vocabulary as they are, not tokenized again.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _probe import record_training, set_threads, write_attention_focus, write_translation_result

from attnmt.config import DecodeConfig, load_config
from attnmt.loading import ModelSpec, load
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions, SearchOverrides
from attnmt.train import Trainer, fit


def train(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    set_threads(config.train.threads)
    recorder = record_training(args.events, args.max_minutes)
    step = Trainer.train_step

    def counted_step(trainer: Trainer, indices: list[int], batch=None):
        # The batch's target tokens plus one EOS each: what the loss is averaged over.
        recorder.add_tokens(sum(len(trainer.bundle.train.tgt_ids[i]) + 1 for i in indices))
        return step(trainer, indices, batch)

    Trainer.train_step = counted_step
    # attnmt's own max_minutes ends training at the budget with a checkpoint of the last step.
    fit(config, log=lambda message: print(message, file=sys.stderr))


def search_options(decode: DecodeConfig, args: argparse.Namespace) -> SearchOptions:
    """The run's decode settings with the command line's beam, stopping rule and length penalty
    (the run's own where not given), and max_length_a 0: the same fixed length limit as the peers,
    whose `max_length` counts the tokens before </s> (attnmt's counts </s> too, hence the + 1)."""
    given = SearchOverrides(beam_size=args.beam, stopping=args.stopping, length_penalty=args.alpha)
    return dataclasses.replace(
        SearchOptions.from_config(decode, given), max_length_a=0.0, max_length_b=args.max_length + 1
    )


def translate(args: argparse.Namespace) -> None:
    set_threads(args.threads)
    translator = load(ModelSpec(args.checkpoint, device="cpu"))
    vocab = translator.codec.src_vocab
    sources = [vocab.encode(line.split()) for line in args.source.read_text(encoding="utf-8").splitlines()]
    started = time.perf_counter()
    options = search_options(translator.config.decode, args)
    hypotheses = decode_all(translator.model, sources, options, batch_size=args.batch, batch_tokens=args.batch_tokens)
    seconds = time.perf_counter() - started
    target = translator.codec.tgt_vocab
    lines = [" ".join(target.decode(best[0].tokens)) + "\n" for best in hypotheses]
    args.output.write_text("".join(lines), encoding="utf-8")
    write_translation_result(args.result, seconds, args.output)
    if args.attention_focus:  # a row per output token, EOS included, over the real source positions
        write_attention_focus(args.attention_focus, [best[0].attention.float() for best in hypotheses])


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt_probe.py")
    modes = parser.add_subparsers(dest="mode", required=True)
    training = modes.add_parser("train")
    training.add_argument("--config", type=Path, required=True)
    training.add_argument("--events", type=Path, required=True)
    training.add_argument("--max-minutes", type=float, default=None)
    translating = modes.add_parser("translate")
    translating.add_argument("--checkpoint", type=Path, required=True)
    translating.add_argument("--source", type=Path, required=True)
    translating.add_argument("--output", type=Path, required=True)
    translating.add_argument("--result", type=Path, required=True)
    translating.add_argument("--attention-focus", type=Path, help="write where the attention goes (JSON)")
    translating.add_argument("--beam", type=int, default=1)
    translating.add_argument("--batch", type=int, default=64, help="sentences a batch")
    translating.add_argument("--batch-tokens", type=int, help="padded source tokens a batch, times the beam")
    translating.add_argument("--max-length", type=int, default=100)
    translating.add_argument("--threads", type=int, default=2)
    translating.add_argument("--stopping", choices=("k_finished", "best_finished"), help="the run's own if not given")
    translating.add_argument("--alpha", type=float, help="GNMT length penalty; the run's own if not given")
    return parser


def main() -> None:
    args = parser().parse_args()
    train(args) if args.mode == "train" else translate(args)


if __name__ == "__main__":
    main()

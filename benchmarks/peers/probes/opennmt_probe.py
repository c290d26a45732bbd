"""Runs OpenNMT-py 3.5.1's own training or translation in-process and records what the benchmark measures.

Runs in OpenNMT-py's virtual environment: imports only torch, onmt, the standard library and `_probe`.

    opennmt_probe.py train --config train.yaml --events E --threads N --steps S --save-every K [--max-minutes M]
    opennmt_probe.py translate --model CKPT --source F --output O --result R --threads N --beam-size B
                               --batch-size N [--batch-type sents|tokens] --max-length L
                               [--length-penalty none|avg|wu --alpha A]
    opennmt_probe.py convert --weights W.pt --output CKPT.pt

Training goes through `onmt.bin.train.train`, OpenNMT's own entry point, with the clock started
just before it (so vocabularies, model and data iterator are built on the clock, as for every
system) and one wrapper around `Trainer.train`, the loop that runs the optimizer in this very
process (num_workers 0: no loader processes). The wrapper hands OpenNMT its training batches
through a generator that gives each batch's target tokens to the recorder before the batch's
optimizer step, and runs out once the time budget is spent: OpenNMT's loop then ends as at the
end of its data, and saves a checkpoint of its last step.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import torch
from _probe import Recorder, record_training, set_threads, write_translation_result


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    set_threads(args.threads)
    {"train": train, "translate": translate, "convert": convert}[args.mode](args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    training = modes.add_parser("train")
    training.add_argument("--config", type=Path, required=True)
    training.add_argument("--events", type=Path, required=True)
    training.add_argument("--threads", type=int, required=True)
    training.add_argument("--steps", type=int, required=True)
    training.add_argument("--save-every", type=int, required=True)
    training.add_argument("--max-minutes", type=float)
    translation = modes.add_parser("translate")
    translation.add_argument("--model", type=Path, required=True)
    translation.add_argument("--source", type=Path, required=True)
    translation.add_argument("--output", type=Path, required=True)
    translation.add_argument("--result", type=Path, required=True)
    translation.add_argument("--threads", type=int, required=True)
    translation.add_argument("--beam-size", type=int, required=True)
    translation.add_argument("--batch-size", type=int, required=True)
    translation.add_argument(
        "--batch-type", choices=("sents", "tokens"), default="sents", help="what --batch-size counts"
    )
    translation.add_argument("--max-length", type=int, required=True)
    translation.add_argument("--length-penalty", choices=("none", "avg", "wu"), default="none")
    translation.add_argument("--alpha", type=float, default=0.0, help="wu's alpha")
    conversion = modes.add_parser("convert")
    conversion.add_argument("--weights", type=Path, required=True, help="benchmarks/peers/same_weights.py's file")
    conversion.add_argument("--output", type=Path, required=True)
    conversion.add_argument("--threads", type=int, default=1)
    return parser


def train(args: argparse.Namespace) -> None:
    """OpenNMT's `onmt_train -config ...` with the step count and checkpoint interval of this run."""
    from onmt.bin import train as onmt_train

    options = onmt_train._get_parser().parse_args(
        ["-config", str(args.config), "-train_steps", str(args.steps), "-save_checkpoint_steps", str(args.save_every)]
    )
    recorder = record_training(args.events, args.max_minutes)
    _meter_training(recorder)
    onmt_train.train(options)


def _meter_training(recorder: Recorder) -> None:
    """Wrap `Trainer.train` so that it sees only `_metered_batches` of its training data."""
    from onmt.trainer import Trainer

    original = Trainer.train

    def metered_train(trainer: Trainer, train_iter: Iterable, *args, **kwargs):
        batches = _metered_batches(train_iter, recorder, trainer.train_loss.padding_idx)
        return original(trainer, batches, *args, **kwargs)

    Trainer.train = metered_train


def _metered_batches(train_iter: Iterable, recorder: Recorder, pad: int) -> Iterator:
    """OpenNMT's (batch, bucket) pairs, until the time budget is spent after at least one step.

    batch["tgt"] is (sentences, length, 1): <s> tokens </s> then padding; OpenNMT's loss
    predicts tgt[:, 1:], so its non-pad count is every target token plus one EOS per sentence.
    With accum_count 1 each batch is one optimizer step, taken before the next batch is asked for.
    """
    iterator = iter(train_iter)
    while not (recorder.step > 0 and recorder.over_budget()):
        pair = next(iterator, None)
        if pair is None:
            return
        batch, _ = pair
        recorder.add_tokens(int(batch["tgt"][:, 1:, 0].ne(pad).sum()))
        yield pair


def translate(args: argparse.Namespace) -> None:
    """Load the model untimed, then translate the whole file under one timer, output in input order."""
    from onmt.bin import translate as onmt_translate
    from onmt.inference_engine import InferenceEnginePY
    from onmt.utils.parse import ArgumentParser

    options = onmt_translate._get_parser().parse_args(_translate_argv(args))
    ArgumentParser.validate_translate_opts(options)
    ArgumentParser._get_all_transform_translate(options)
    ArgumentParser._validate_transforms_opts(options)
    ArgumentParser.validate_translate_opts_dynamic(options)
    _allow_full_checkpoint_load()
    engine = InferenceEnginePY(options)  # builds the translator: loads the checkpoint
    lines = args.source.read_text(encoding="utf-8").splitlines()

    start = time.perf_counter()
    engine.infer_list(lines)
    seconds = time.perf_counter() - start

    engine.translator.out_file.close()
    write_translation_result(args.result, seconds, args.output)


def _translate_argv(args: argparse.Namespace) -> list[str]:
    """onmt_translate options: BeamSearch of beam_size (beam 1 gives greedy decoding: the same
    output as its GreedySearch with random_sampling_topk 1, and as fast); no length penalty unless
    asked (avg divides a hypothesis's log-probability by its length, wu by GNMT's ((5+|y|)/6)^alpha;
    OpenNMT-py's BeamSearch ends a sentence when its best live hypothesis ends, whatever the
    penalty); max_length alone caps the output (max_length_ratio 0 turns off OpenNMT's default cap of
    1.25 x the batch's longest source + 5)."""
    return [
        "-model", str(args.model),
        "-src", str(args.source),
        "-output", str(args.output),
        "-beam_size", str(args.beam_size),
        "-batch_size", str(args.batch_size),
        "-batch_type", args.batch_type,
        "-max_length", str(args.max_length),
        "-max_length_ratio", "0",
        "-length_penalty", args.length_penalty,
        "-alpha", str(args.alpha),
        "-n_best", "1",
        "-gpu", "-1",
    ]  # fmt: skip


def convert(args: argparse.Namespace) -> None:
    """attnmt's weights as an OpenNMT-py checkpoint: OpenNMT-py's model built from the options
    the file names, every parameter loaded strictly (none missing, none left over), saved the
    way OpenNMT-py's trainer saves one (model without the generator, generator, vocabularies,
    options)."""
    from onmt.bin import train as onmt_train
    from onmt.inputters.inputter import dict_to_vocabs, vocabs_to_dict
    from onmt.model_builder import build_base_model
    from onmt.utils.parse import ArgumentParser

    given = torch.load(args.weights, weights_only=True)
    argv = ["-data", "none", "-src_vocab", "none"]  # required by the parser, read only by training
    for name, value in given["options"].items():
        argv += [f"-{name}", *(str(item) for item in (value if isinstance(value, list) else [value]))]
    options = onmt_train._get_parser().parse_args(argv)
    ArgumentParser.update_model_opts(options)
    ArgumentParser.validate_model_opts(options)
    vocabs = dict_to_vocabs({"src": given["src"], "tgt": given["tgt"], "data_task": "seq2seq"})
    model = build_base_model(options, vocabs)
    torch.nn.Module.load_state_dict(model, given["state"], strict=True)  # NMTModel overrides it for its checkpoints
    state = model.state_dict()
    checkpoint = {
        "model": {name: tensor for name, tensor in state.items() if not name.startswith("generator.")},
        "generator": model.generator.state_dict(),
        "vocab": vocabs_to_dict(vocabs),
        "opt": options,
        "optim": None,
    }
    temporary = args.output.with_name(f".{args.output.name}.partial")
    torch.save(checkpoint, temporary)
    temporary.replace(args.output)


def _allow_full_checkpoint_load() -> None:
    """OpenNMT's checkpoints hold its argparse options; torch >= 2.6 loads only tensors and plain
    containers by default (weights_only=True), so allow the Namespace (the file is our own)."""
    torch.serialization.add_safe_globals([argparse.Namespace])


if __name__ == "__main__":
    main()

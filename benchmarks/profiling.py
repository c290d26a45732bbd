"""Where the time goes: torch.profiler over a few training steps of one benchmark config, or
over decoding a test set with a trained run.

    python -m benchmarks.profiling [--config joey] [--model attnmt] [--steps 5] [--threads N]
    python -m benchmarks.profiling --decode RUN_DIR [--beam 5] [--repeats 3 --json FILE]

The training steps are the benchmark's own (`speed.training_step`, same batches), after two
warm-up steps; printed: the time per phase (data, forward, backward, optimizer: the step's
labelled regions) and torch's operator table sorted by self CPU time. `--decode` profiles
`attnmt.search.decode_all` on the run's test split (in the batches its `decode` config sets, as
`attnmt translate` does, after one untimed batch of 64). `--json FILE` writes each operator's
share of the self CPU time (median and range over `--repeats` profiled passes) and the matrix
products' share together, and with `--shapes` the products grouped by shape (the output layer's
share and GFLOP/s among them): the raw result behind the profile figures in the docs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from attnmt.data.batching import build_data
from attnmt.evaluation import split_examples
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions
from attnmt.utils import UserError, describe_machine
from benchmarks import speed, speed_models
from benchmarks.decoding import load_trained
from benchmarks.measure import positive_int, spread, write_results
from benchmarks.references import REFERENCES

PHASES = ("data", "forward", "backward", "optimizer")
PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm")  # the matrix products, counted together


def profile_training(config: str, model_name: str, steps: int, device: torch.device, data_dir=None, shapes=False):
    """Profile `steps` training steps; returns the profiler and the target vocabulary size."""
    options = speed.Options(steps=steps, warmup=2)
    bundle = build_data(speed_models.DATA.model_copy(update={"data_dir": data_dir}))
    cfg = speed_models.model_config(config, options.dropout)
    models = speed_models.build_models(cfg, len(bundle.src_vocab), len(bundle.tgt_vocab), device, options.seed)
    if model_name not in models:
        raise UserError(f"--model {model_name} cannot express the {config} config; choose attnmt")
    warmup, timed = speed.training_batches(bundle, options)["attnmt" if model_name == "attnmt" else "reference"]
    step = speed.training_step(models[model_name], speed.loss_function(model_name), bundle, device, options.lr)
    for indices in warmup:
        step(indices)
    with profile(activities=_activities(device), record_shapes=shapes) as profiler:
        for indices in timed:
            step(indices)
    return profiler, len(bundle.tgt_vocab)


def _activities(device: torch.device) -> list:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def profile_decoding(run_dir: str, beam_size: int, device: torch.device, data_dir=None, shapes=False):
    """Profile decoding the test split of a trained run; returns the profiler and the target vocabulary size."""
    _, config, codec, model = load_trained(run_dir)
    model = model.to(device)
    data = config.data.model_copy(update={"data_dir": data_dir}) if data_dir else config.data
    sources = [codec.encode_source(example.src) for example in split_examples(data, "test")]
    batching = {"batch_size": config.decode.batch_size, "batch_tokens": config.decode.batch_tokens}
    with torch.inference_mode():
        decode_all(model, sources[:64], SearchOptions(beam_size=beam_size), device=device, **batching)
        with profile(activities=_activities(device), record_shapes=shapes) as profiler:
            decode_all(model, sources, SearchOptions(beam_size=beam_size), device=device, **batching)
    return profiler, len(codec.tgt_vocab)


def phase_summary(profiler) -> str:
    averages = {event.key: event for event in profiler.key_averages()}
    total = sum(averages[name].cpu_time_total for name in PHASES if name in averages)
    lines = []
    for name in PHASES:
        if name in averages:
            event = averages[name]
            share = event.cpu_time_total / total
            lines.append(f"{name:<10} {event.cpu_time_total / 1e3 / event.count:8.1f} ms/step  {share:6.1%}")
    return "\n".join(lines)


def _product(event) -> tuple[int, tuple[int, ...]] | None:
    """(FLOPs per call, dimensions) of a recorded mm / addmm / bmm; None for other operators."""
    shapes = event.input_shapes
    if event.key == "aten::bmm":
        (batch, rows, inner), (_, _, cols) = shapes[0], shapes[1]
        return 2 * batch * rows * inner * cols, (rows, inner, cols)
    if event.key in ("aten::mm", "aten::addmm"):
        left, right = (shapes[1], shapes[2]) if event.key == "aten::addmm" else (shapes[0], shapes[1])
        return 2 * left[0] * left[1] * right[1], (left[0], left[1], right[1])
    return None


def product_groups(profiler, batch_sentences: int, vocab_size: int) -> dict[str, dict[str, float]]:
    """Matrix products grouped by shape: touching the output vocabulary (the output layer), with
    a side of at most one batch of sentences (per-step work and its gradients), batched (bmm),
    other; each group's share of the self CPU time, GFLOP and GFLOP/s."""
    total = sum(event.self_cpu_time_total for event in profiler.key_averages())
    groups: dict[str, list[float]] = {}
    for event in profiler.key_averages(group_by_input_shape=True):
        product = _product(event)
        if product is None:
            continue
        flops, dims = product
        if event.key == "aten::bmm":
            group = "batched (bmm)"
        elif vocab_size in dims:
            group = "output layer (a side = V)"
        elif min(dims) <= batch_sentences:
            group = f"per step (a side <= {batch_sentences})"
        else:
            group = "other large products"
        seconds_and_flops = groups.setdefault(group, [0.0, 0.0])
        seconds_and_flops[0] += event.self_cpu_time_total / 1e6
        seconds_and_flops[1] += flops * event.count
    return {
        group: {"share": seconds * 1e6 / total, "gflop": flops / 1e9, "gflop_per_s": flops / 1e9 / max(seconds, 1e-9)}
        for group, (seconds, flops) in sorted(groups.items(), key=lambda item: -item[1][0])
    }


def product_summary(groups: dict[str, dict[str, float]]) -> str:
    return "\n".join(
        f"{group:<28} {g['share']:6.1%} of the time  {g['gflop']:7.1f} GFLOP  {g['gflop_per_s']:6.1f} GFLOP/s"
        for group, g in groups.items()
    )


def operator_shares(profiler) -> dict[str, float]:
    """Each operator's share of the profiled self CPU time (the shares sum to 1)."""
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    return {event.key: event.self_cpu_time_total / total for event in events}


def share_summary(passes: list[dict[str, float]], rows: int, grouped: list[dict] | None = None) -> dict:
    """Repeated profiles' operator shares as median and range: the matrix products together, then
    the `rows` operators with the largest median share (an operator a pass did not record: 0);
    with `grouped` (each pass's `product_groups`), each group's share and GFLOP/s likewise."""
    names = {name for shares in passes for name in shares}
    by_name = {name: spread([shares.get(name, 0.0) for shares in passes]) for name in names}
    largest = sorted(names, key=lambda name: -by_name[name]["median"])[:rows]
    products = spread([sum(shares.get(name, 0.0) for name in PRODUCTS) for shares in passes])
    summary = {"matrix_products": products, "operators": [{"name": name, "share": by_name[name]} for name in largest]}
    if grouped:  # a group a pass did not record: 0
        names = dict.fromkeys(name for groups in grouped for name in groups)
        summary["product_groups"] = {
            name: {
                key: spread([groups.get(name, {}).get(key, 0.0) for groups in grouped])
                for key in ("share", "gflop_per_s")
            }
            for name in names
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profiling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=list(speed_models.CONFIGS), default="joey")
    parser.add_argument("--model", choices=["attnmt", *REFERENCES], default="attnmt")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--shapes", action="store_true", help="also group matrix products and operators by shape")
    parser.add_argument("--decode", metavar="RUN_DIR", help="profile decoding RUN_DIR's test split instead")
    parser.add_argument("--beam", type=int, default=1, help="with --decode: beam size (1 = greedy)")
    parser.add_argument("--repeats", type=positive_int, default=1, help="profiled passes (the tables print the last)")
    parser.add_argument("--json", type=Path, help="write the operators' shares (median and range) here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("benchmarks.profiling: error: --device cuda, but CUDA is not available", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    if args.decode:
        subject = {"decode": args.decode, "beam_size": args.beam}
        title = f"decoding {args.decode} test split, beam {args.beam}, {torch.get_num_threads()} threads"
    else:
        subject = {"config": args.config, "model": args.model, "steps": args.steps}
        title = f"{args.model} {args.config}, {args.steps} steps, {torch.get_num_threads()} threads"
    passes, grouped = [], []  # each pass's operator shares, and its product groups (--shapes)
    try:
        for _ in range(args.repeats):
            if args.decode:
                profiler, vocab_size = profile_decoding(args.decode, args.beam, device, args.data_dir, args.shapes)
            else:
                profiler, vocab_size = profile_training(
                    args.config, args.model, args.steps, device, args.data_dir, args.shapes
                )
            passes.append(operator_shares(profiler))
            if args.shapes:
                grouped.append(product_groups(profiler, speed.Options.batch_sentences, vocab_size))
    except UserError as error:
        print(f"benchmarks.profiling: error: {error}", file=sys.stderr)
        return 2
    print(title)
    if not args.decode:
        print(phase_summary(profiler))
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if args.shapes:
        print(product_summary(grouped[-1]))
        by_shape = profiler.key_averages(group_by_input_shape=True)
        print(by_shape.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=30))
    if args.json:
        summary = share_summary(passes, args.rows, grouped)
        results = {"machine": describe_machine(device), **subject, "repeats": args.repeats, **summary}
        write_results(args.json, results, "benchmarks.profiling", argv)
        products = summary["matrix_products"]
        print(f"matrix products: {products['median']:.1%} of the self CPU time (median of {args.repeats})")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

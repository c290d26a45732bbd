"""An attnmt model of OpenNMT-py's RNN architecture as an OpenNMT-py 3.5 checkpoint: one set of
weights that both toolkits decode, so their searches and their speed are compared on one model.

OpenNMT-py's `brnn` encoder with its `InputFeedRNNDecoder` and `global_attention mlp` computes
attnmt's Luong step with input feeding, additive attention with a bias in its score
(`model.attention_bias`), the attentional vector without Luong's tanh
(`model.attentional_tanh: false`), the copy bridge and an untied output layer. One parameter
differs: OpenNMT-py's attentional vector has a bias, which attnmt's has not; written as zero,
the OpenNMT-py model is the attnmt model, parameter for parameter:

    attnmt                                  OpenNMT-py
    encoder.embedding.weight                encoder.embeddings.make_embedding.emb_luts.0.weight
    encoder.rnn.*                           encoder.rnn.*            (torch's GRU, both)
    decoder.embedding.weight                decoder.embeddings.make_embedding.emb_luts.0.weight
    decoder.rnn.{weight,bias}_{ih,hh}_l{N}  decoder.rnn.layers.N.{weight,bias}_{ih,hh}
                                            (input [E y_{t-1}; h~_{t-1}] in both)
    decoder.attention.key_projection        decoder.attn.linear_context
    decoder.attention.query_projection      decoder.attn.linear_query (its bias 0 without attention_bias)
    decoder.attention.score_vector          decoder.attn.v
    decoder.combine ([c_t; h_t])            decoder.attn.linear_out (bias 0)
    decoder.output                          generator

The vocabularies keep attnmt's order, so no row moves; attnmt's special tokens take OpenNMT-py's
names (`<pad>` is its `<blank>`). Both start the decoder from the encoder's final states, forward
and backward concatenated, and feed a zero attentional vector at the first step.

The OpenNMT-py side (building its model from these options and saving its checkpoint) runs in
its own environment: `probes/opennmt_probe.py convert`.

`python -m benchmarks.peers same-weights` measures with it: an `attnmt` model trained for a number
of updates (untimed, once per seed, kept in the work folder), converted, then test2016 decoded by
both toolkits greedily and with beam 5 under OpenNMT-py's stopping rule (a sentence ends when its
best hypothesis ends, raw log-probabilities), the two taking turns `repeats` times: how often
their outputs are the same line, and each one's sentences per second on the same outputs. Each
toolkit decodes batched its fastest way: every batching it offers (more sentences, or batches
cut by tokens) is tried once first, and the timed turns use the fastest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from attnmt.checkpoint import load_trained
from attnmt.config import ModelConfig
from attnmt.utils import UserError, atomic_path
from attnmt.vocab import SPECIALS, Vocab
from benchmarks.measure import describe_machine, provenance, rotated, spread
from benchmarks.peers.harness import Harness, run_command
from benchmarks.peers.opennmt import OpenNMT, model_options
from benchmarks.peers.system import PeerError, PeerSystem

# attnmt's special tokens under OpenNMT-py's names (onmt.constants.DefaultTokens)
OPENNMT_SPECIALS = {"<pad>": "<blank>", "<unk>": "<unk>", "<s>": "<s>", "</s>": "</s>"}
# The searches both toolkits run on the converted weights: name -> (beam size, attnmt's search
# options, OpenNMT-py's), each pair the same rule.
SEARCHES = {
    "greedy": (1, {}, {}),
    "beam 5, best finished, no penalty": (
        5,
        {"stopping": "best_finished", "alpha": 0.0},
        {"length_penalty": "none", "alpha": 0.0},
    ),
}
# What the model must be for the conversion to be exact: (field, required value, why).
REQUIRED = (
    ("rnn", "gru", "OpenNMT-py's LSTM decoder starts from the encoder's final cells, attnmt's from zero"),
    ("decoder", "luong", "OpenNMT-py's RNN decoder updates its state before it attends"),
    ("input_feeding", True, "OpenNMT-py's decoder here is its InputFeedRNNDecoder"),
    ("attentional_tanh", False, "OpenNMT-py's mlp attention makes the attentional vector without a tanh"),
    ("attention", "additive", "OpenNMT-py's `global_attention mlp`"),
    ("bridge", "copy", "OpenNMT-py starts the decoder from the encoder's final states as they are"),
    ("bidirectional", True, "OpenNMT-py's `brnn` encoder"),
    ("tie_embeddings", False, "an untied output layer, OpenNMT-py's default"),
    ("tie_source_embeddings", False, "separate source and target embeddings"),
)


def check_convertible(model: ModelConfig) -> None:
    """A UserError naming the first setting that makes the OpenNMT-py model compute otherwise."""
    for field, required, why in REQUIRED:
        if getattr(model, field) != required:
            raise UserError(f"model.{field}: {getattr(model, field)!r}; OpenNMT-py needs {required!r} ({why})")
    if model.encoder_layers != model.decoder_layers:
        raise UserError(
            f"model.encoder_layers: {model.encoder_layers} against model.decoder_layers "
            f"{model.decoder_layers}; OpenNMT-py copies each encoder layer's final state into its decoder layer"
        )
    if 2 * model.encoder_hidden != model.decoder_hidden:
        raise UserError(
            f"model.decoder_hidden: {model.decoder_hidden}; OpenNMT-py's one hidden_size needs twice "
            f"model.encoder_hidden ({2 * model.encoder_hidden})"
        )
    if model.attention_size not in (None, model.decoder_hidden):
        raise UserError(f"model.attention_size: {model.attention_size}; OpenNMT-py's mlp attention is hidden_size wide")


def opennmt_tokens(vocab: Vocab) -> list[str]:
    """`vocab`'s tokens in its own order, its special tokens under OpenNMT-py's names."""
    tokens = list(vocab.tokens)
    renamed = set(OPENNMT_SPECIALS.values())
    for index, token in enumerate(tokens[len(SPECIALS) :], start=len(SPECIALS)):
        if token in renamed:
            raise UserError(f"vocabulary token {index} is {token!r}, a special token's name in OpenNMT-py")
    return [OPENNMT_SPECIALS[token] for token in tokens[: len(SPECIALS)]] + tokens[len(SPECIALS) :]


def opennmt_state(state: dict[str, torch.Tensor], model: ModelConfig) -> dict[str, torch.Tensor]:
    """attnmt's state dict under OpenNMT-py's names (module docstring), the biases it lacks zero."""
    renamed = {
        "encoder.embedding.weight": "encoder.embeddings.make_embedding.emb_luts.0.weight",
        "decoder.embedding.weight": "decoder.embeddings.make_embedding.emb_luts.0.weight",
        "decoder.attention.key_projection.weight": "decoder.attn.linear_context.weight",
        "decoder.attention.query_projection.weight": "decoder.attn.linear_query.weight",
        "decoder.attention.query_projection.bias": "decoder.attn.linear_query.bias",  # with attention_bias
        "decoder.attention.score_vector.weight": "decoder.attn.v.weight",
        "decoder.combine.weight": "decoder.attn.linear_out.weight",
        "decoder.output.weight": "generator.weight",
        "decoder.output.bias": "generator.bias",
    }
    for layer in range(model.decoder_layers):
        for kind in ("weight", "bias"):
            for gates in ("ih", "hh"):
                renamed[f"decoder.rnn.{kind}_{gates}_l{layer}"] = f"decoder.rnn.layers.{layer}.{kind}_{gates}"
    # OpenNMT-py's two biases that attnmt's model may lack: zero, the value that adds nothing
    converted = {
        f"decoder.attn.{layer}.bias": torch.zeros(model.decoder_hidden) for layer in ("linear_query", "linear_out")
    }
    for name, tensor in state.items():
        target = renamed.get(name, name if name.startswith("encoder.rnn.") else None)
        if target is None:
            raise UserError(f"{name}: a parameter the OpenNMT-py model does not have")
        converted[target] = tensor.detach().clone().contiguous()
    return converted


def write_for_opennmt(run: str | Path, path: Path, which: str = "best") -> dict:
    """The run's `which` checkpoint (or a checkpoint folder) as what the OpenNMT-py probe's
    `convert` reads: options, tensors and vocabularies, in one torch file of plain containers
    (loadable with weights_only). Returns what it wrote, without the tensors."""
    trained = load_trained(run, which)
    check_convertible(trained.config.model)
    run_dir = trained.run_dir
    vocabs = {side: opennmt_tokens(Vocab.load(run_dir / f"{side}.vocab.json")) for side in ("src", "tgt")}
    described = {"checkpoint": str(trained.checkpoint), "options": model_options(trained.config.model), **vocabs}
    state = opennmt_state(trained.model.state_dict(), trained.config.model)
    with atomic_path(path) as temporary:
        torch.save({**described, "state": state}, temporary)
    return described


def to_opennmt(harness: Harness, opennmt: OpenNMT, checkpoint: Path, folder: Path) -> Path:
    """`checkpoint` (an attnmt checkpoint folder of the race architecture) as an OpenNMT-py
    checkpoint in `folder`, made in OpenNMT-py's installed environment; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    weights, converted = folder / "attnmt-weights.pt", folder / "model_step_converted.pt"
    write_for_opennmt(checkpoint, weights)
    command = opennmt.convert_command(harness.pythons[opennmt.name], weights, converted)
    run_command(opennmt.name, "converting attnmt's weights", command, folder / "convert.log")
    return converted


@dataclass(frozen=True)
class SameWeightsOptions:
    updates: int = 4600  # what the identical-model race's attnmt runs made in their 50 minutes
    seeds: tuple[int, ...] = (1,)
    repeats: int = 3


def same_weights(
    harness: Harness, options: SameWeightsOptions, on_run: Callable[[dict], None] = lambda results: None
) -> dict:
    """Every seed's model decoded by both toolkits (module docstring); `on_run` gets the results
    after each seed. Needs the harness's `attnmt` and `opennmt-py` systems."""
    systems = {system.name: system for system in harness.systems}
    if set(systems) != {"attnmt", "opennmt-py"}:
        raise PeerError(f"same-weights: needs the systems attnmt and opennmt-py, got {', '.join(systems)}")
    attnmt, opennmt = systems["attnmt"], systems["opennmt-py"]
    assert isinstance(opennmt, OpenNMT)
    results: dict = {"options": {**options.__dict__, "seeds": list(options.seeds)}, "runs": []}
    for seed in options.seeds:
        folder = harness.work / "same-weights" / f"seed-{seed}"
        checkpoint = _trained(harness, attnmt, folder / "attnmt", options.updates, seed)
        converted = to_opennmt(harness, opennmt, checkpoint, folder / "opennmt")
        rows = [
            _decode_both(harness, folder, (attnmt, checkpoint), (opennmt, converted), name, options.repeats)
            for name in SEARCHES
        ]
        run = {"seed": seed, "updates": options.updates, "checkpoint": checkpoint.name, "rows": rows}
        results["runs"].append({**run, "machine": describe_machine(torch.device("cpu")), "provenance": provenance()})
        on_run(results)
    return results


def _trained(harness: Harness, attnmt: PeerSystem, folder: Path, updates: int, seed: int) -> Path:
    """The attnmt model of `updates` updates in `folder`, trained there once (untimed)."""
    record = folder / "trained.json"
    if not harness.kept(attnmt, record):
        harness.say(f"attnmt: training {updates} updates, seed {seed} (untimed)")
        finished, events = harness.train(attnmt, folder, steps=updates, max_minutes=None, save_every=updates, seed=seed)
        with atomic_path(record) as temporary:
            temporary.write_text(json.dumps({"updates": len(events.steps), "minutes": finished.seconds / 60}) + "\n")
    checkpoints = attnmt.checkpoints(folder)
    return checkpoints[max(checkpoints)]


def _decode_both(harness: Harness, folder: Path, ours: tuple, theirs: tuple, search: str, repeats: int) -> dict:
    """test2016 by both toolkits with `search`, each batched its fastest way (`_fastest_batching`),
    taking turns: identical lines, BLEU, speed."""
    beam, *options = SEARCHES[search]
    pairs = list(zip((ours, theirs), options, strict=True))
    batchings = {
        system.name: _fastest_batching(harness, folder, system, checkpoint, beam, o)
        for (system, checkpoint), o in pairs
    }
    measured: dict[str, list[dict]] = {}
    for turn in range(repeats):
        for (system, checkpoint), search_options in rotated(pairs, turn):
            out = folder / "decoded" / system.name
            chosen = batchings[system.name]
            decoded = harness.translate(
                system, out, checkpoint, "test2016", beam, search={**search_options, **chosen["options"]}
            )
            measured.setdefault(system.name, []).append(decoded)
    lines = [Path(runs[-1]["output"]).read_text(encoding="utf-8").splitlines() for runs in measured.values()]
    same = sum(ours_line == theirs_line for ours_line, theirs_line in zip(*lines, strict=True))
    keys = ("bleu_tok_lc", "chrf", "length_ratio", "generated_tokens")
    return {
        "search": search,
        "beam_size": beam,
        "identical_outputs": same / len(lines[0]),
        "systems": {
            name: {
                **{key: runs[-1][key] for key in keys},
                "sentences_per_s": spread([r["sentences_per_s"] for r in runs]),
                "batching": batchings[name],
            }
            for name, runs in measured.items()
        },
    }


def _fastest_batching(harness: Harness, folder: Path, system: PeerSystem, checkpoint: Path, beam: int, search: dict):
    """Each of the system's decode batchings (`PeerSystem.decode_batchings`) once on test2016: the
    fastest, by sentences per second, with what each one measured and the share of its lines
    that are the first batching's (batching should change the speed only)."""
    screen, first_lines = {}, None
    for name, options in system.decode_batchings(harness.setup).items():
        harness.say(f"{system.name}: test2016, beam {beam}, batched by {name}")
        out = folder / "batching" / system.name
        decoded = harness.translate(system, out, checkpoint, "test2016", beam, search={**search, **options})
        lines = Path(decoded["output"]).read_text(encoding="utf-8").splitlines()
        first_lines = lines if first_lines is None else first_lines
        same = sum(a == b for a, b in zip(lines, first_lines, strict=True)) / len(lines)
        screen[name] = {"options": options, "sentences_per_s": decoded["sentences_per_s"], "same_as_first": same}
    chosen = max(screen, key=lambda name: screen[name]["sentences_per_s"])
    return {"chosen": chosen, "options": screen[chosen]["options"], "screen": screen}

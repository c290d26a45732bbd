"""The fast preset: int8 weights, the vocabulary shortlist and a smaller beam, chosen once on the
validation split within a BLEU bound of the run's own search, stored with the run and reused.

`fast_spec(ModelSpec(run))` returns the spec to load (`loading.load`) with the chosen int8
quantization, shortlist and default beam size set. The first call for a checkpoint chooses:
every combination of int8 (on the CPU), the run's shortlist (when it has one) and the beam
sizes 1, 2, 3 up to the run's own is decoded over the validation split, each after one untimed
batch, and timed; the chosen one is the fastest whose sacreBLEU is at most `bound` below that
of the run's own search (float32, the whole vocabulary, its decode.beam_size and length
penalty). The reference itself is not a candidate: a preset that changes nothing is not fast,
and when no candidate is within the bound the call is a UserError saying which came closest.

The choice, every trial's BLEU and seconds, the machine and the versions are written to the
run's `fast.json` under a key made of the scored weights (their digest), the shortlist's
digest, the device and the bound; a later call with the same key reads it back without
decoding anything, and a retrained checkpoint or a rebuilt shortlist is chosen for anew.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from attnmt import __version__
from attnmt.checkpoint import WEIGHTS, resolve_checkpoint, run_dir_of
from attnmt.data.splits import Example
from attnmt.evaluation import split_examples
from attnmt.export import is_export
from attnmt.loading import ModelSpec, load
from attnmt.metrics import bleu
from attnmt.quantize import BLEU_BOUND
from attnmt.shortlist import FILENAME as SHORTLIST_FILE
from attnmt.translate import Translator
from attnmt.utils import Say, UserError, choose_device, describe_machine, silent, write_text_atomic

FILENAME = "fast.json"
SMALL_BEAMS = (1, 2, 3)  # tried besides the run's own beam size, those not above it
WARMUP_SENTENCES = 64  # decoded untimed before each timed pass


def fast_spec(spec: ModelSpec, *, bound: float = BLEU_BOUND, say: Say = silent) -> ModelSpec:
    """`spec` with the fast preset's int8, shortlist and default beam size: read from the run's
    fast.json, or chosen on the validation split now and stored there (module docstring)."""
    _check_request(spec, bound)
    run_dir = run_dir_of(resolve_checkpoint(spec.paths[0], spec.checkpoint))
    device = choose_device(spec.device, field="device")
    key = _key(spec, run_dir, device, bound)
    records = _read(run_dir / FILENAME)
    record = next((record for record in records if record["key"] == key), None)
    if record is None:
        say(f"choosing the fast settings on the validation split, once (stored in {run_dir / FILENAME})")
        record = _choose(replace(spec, device=device), key, bound, run_dir, say)
        _write(run_dir / FILENAME, [*records, record])
    chosen = record["chosen"]
    if chosen is None:
        raise UserError(_nothing_met(record), field="fast")
    say(_describe(record))
    return replace(
        spec, device=device, quantize=chosen["quantize"], shortlist=chosen["shortlist"], beam_size=chosen["beam_size"]
    )


def _check_request(spec: ModelSpec, bound: float) -> None:
    if bound < 0:
        raise UserError(f"the fast preset's BLEU bound must be at least 0, got {bound}", field="fast_bound")
    if spec.quantize != "none" or spec.shortlist or spec.beam_size is not None:
        raise UserError(
            "the fast preset chooses int8, the shortlist and the beam itself: give none of them", field="fast"
        )
    if spec.engine == "onnxruntime":
        raise UserError("the fast preset is chosen for torch: run it with the torch engine", field="engine")
    for path in spec.paths:
        if is_export(path):
            raise UserError(f"{path}: an ONNX export; the fast preset is chosen for a run", field="fast")


def _digest(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _key(spec: ModelSpec, run_dir: Path, device: str, bound: float) -> dict:
    """What a stored choice holds for: the scored weights of every member, the shortlist, the
    device and the bound."""
    weights = [_digest(resolve_checkpoint(path, spec.checkpoint) / WEIGHTS) for path in spec.paths]
    return {"weights": weights, "shortlist": _digest(run_dir / SHORTLIST_FILE), "device": device, "bound": bound}


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        records = json.loads(path.read_text(encoding="utf-8"))["choices"]
        assert isinstance(records, list) and all("key" in record for record in records)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise UserError(f"{path}: not a fast-preset record; remove it to choose again", field="fast") from None
    return records


def _write(path: Path, records: list[dict]) -> None:
    try:
        write_text_atomic(path, json.dumps({"choices": records}, indent=2) + "\n")
    except OSError as exc:
        raise UserError(f"{path}: cannot store the fast settings ({exc.strerror or exc})", field="fast") from None


def _candidates(reference_beam: int, device: str, has_shortlist: bool) -> list[dict]:
    """Every setting tried: int8 (CPU only) x shortlist (if the run has one) x the beams up to
    the run's own; the reference (float32, whole vocabulary, its own beam) left out."""
    beams = sorted({beam for beam in SMALL_BEAMS if beam <= reference_beam} | {reference_beam})
    settings = [
        {"quantize": quantize, "shortlist": shortlist, "beam_size": beam}
        for quantize in (("none", "int8") if device == "cpu" else ("none",))
        for shortlist in ((False, True) if has_shortlist else (False,))
        for beam in beams
    ]
    return [s for s in settings if (s["quantize"], s["shortlist"], s["beam_size"]) != ("none", False, reference_beam)]


def _trial(translator: Translator, examples: Sequence[Example], beam_size: int) -> dict:
    """Valid-split sacreBLEU of `translator` at `beam_size`, and the seconds its translation
    took (tokenizing and detokenizing included, scoring not)."""
    options = translator.search_options(beam_size=beam_size, n_best=1)
    sources = [example.src for example in examples]
    translator.translate(sources[:WARMUP_SENTENCES], options)
    start = time.perf_counter()
    translations = translator.translate(sources, options)
    seconds = time.perf_counter() - start
    hypotheses = [translation.text for translation in translations]
    references = [tuple(example.refs) for example in examples]
    score = bleu(hypotheses, references, lowercase=translator.config.data.lowercase).score
    return {"bleu": score, "seconds": seconds, "sentences_per_second": len(examples) / seconds}


def _choose(spec: ModelSpec, key: dict, bound: float, run_dir: Path, say: Say) -> dict:
    reference = load(spec)
    examples = split_examples(reference.config.data, "valid")
    if not examples:
        raise UserError(f"{run_dir}: its corpus has no validation sentences to choose on", field="fast")
    own = reference.config.decode
    say(f"reference: beam {own.beam_size}, float32, whole vocabulary")
    reference_trial = {"quantize": "none", "shortlist": False, "beam_size": own.beam_size}
    reference_trial |= _trial(reference, examples, own.beam_size)
    trials = []
    for setting in _candidates(own.beam_size, key["device"], key["shortlist"] is not None):
        translator = load(replace(spec, quantize=setting["quantize"], shortlist=setting["shortlist"]))
        trials.append(setting | _trial(translator, examples, setting["beam_size"]))
        say(f"  {_name(trials[-1])}: BLEU {trials[-1]['bleu']:.2f}, {trials[-1]['seconds']:.2f} s")
    within = [t for t in trials if reference_trial["bleu"] - t["bleu"] <= bound + 1e-9]
    chosen = min(within, key=lambda t: t["seconds"]) if within else None
    return {
        "key": key,
        "split": "valid",
        "sentences": len(examples),
        "length_penalty": own.length_penalty,
        "reference": reference_trial,
        "trials": trials,
        "chosen": None if chosen is None else {k: chosen[k] for k in ("quantize", "shortlist", "beam_size")},
        "machine": describe_machine(key["device"]),
        "versions": {"attnmt": __version__, "torch": _torch_version()},
    }


def _torch_version() -> str:
    import torch

    return torch.__version__


def _name(setting: dict) -> str:
    parts = ["int8" if setting["quantize"] == "int8" else "float32"]
    parts.append("shortlist" if setting["shortlist"] else "whole vocabulary")
    parts.append("greedy" if setting["beam_size"] == 1 else f"beam {setting['beam_size']}")
    return ", ".join(parts)


def _trial_of(record: dict, chosen: dict) -> dict:
    return next(t for t in record["trials"] if all(t[k] == v for k, v in chosen.items()))


def _describe(record: dict) -> str:
    reference, chosen = record["reference"], _trial_of(record, record["chosen"])
    return (
        f"fast: {_name(chosen)}: valid BLEU {chosen['bleu']:.2f} against {reference['bleu']:.2f} "
        f"({_name(reference)}), {reference['seconds'] / chosen['seconds']:.1f}x its speed"
    )


def _nothing_met(record: dict) -> str:
    reference = record["reference"]
    closest = max(record["trials"], key=lambda t: t["bleu"], default=None)
    if closest is None:
        return "the fast preset has nothing to try: the run's beam is 1 and it has no int8 or shortlist to use"
    return (
        f"no fast setting is within {record['key']['bound']} BLEU of the run's own search on valid "
        f"({reference['bleu']:.2f}); the closest, {_name(closest)}, scores {closest['bleu']:.2f}: "
        "translate without the fast preset, or allow a larger bound"
    )

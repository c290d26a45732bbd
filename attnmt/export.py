"""`attnmt export`: a trained run as ONNX graphs, and the export directory's format.

An export directory holds three graphs that mirror the step interface (`search.StepModel`:
encode, init_state, next_log_probs), so the same greedy and beam search drive them:

    encoder.onnx  src (B, S) int64, src_lengths (B,) int64
                  -> memory (B, S, H_enc), mask (B, S) bool, projected_keys, final_hidden (L_enc, B, H_enc)
    init.onnx     final_hidden -> hidden (L, B, H) [, cell (L, B, H)] [, feed (B, H)]
    step.onnx     prev_tokens (B,) int64, memory, projected_keys, mask, hidden [, cell] [, feed]
                  -> log_probs (B, V) float32, attention (B, S), hidden [, cell] [, feed]

A run with a vocabulary shortlist (`attnmt shortlist`) also gets `step_shortlist.onnx`, the
step with a second input `vocabulary` (V',) int64 of sorted target ids, whose `log_probs` are
(B, V'), and its `shortlist.safetensors`.

`projected_keys` is what the attention's `project_keys` makes of the memory: (B, S, A) for
additive, (B, S, H) for dot and general, (B, H_enc) (the fixed context) for none. `cell` exists
for LSTMs, `feed` for Luong decoders with input feeding. Beside the graphs: the run's
config.yaml, vocabularies and SentencePiece models, and manifest.json (format, versions, model
shapes, languages, each graph's inputs and outputs, and the sha256 of every file, so a missing,
changed or half-copied file is caught before it is used).

The encoder graph does not use packed sequences, whose ONNX form fixes the batch's sort
order: each direction of each layer is a one-layer RNN over the padded batch, and the backward
direction reads each sentence reversed within its own length. Padding then comes after every
real position in both directions and cannot reach them (tests check that it equals `Encoder`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from torch import nn

from attnmt.checkpoint import TrainedModel, load_trained
from attnmt.models.decoder import DecoderState, EncoderOutput
from attnmt.models.rnn import make_rnn
from attnmt.models.seq2seq import Attention, Seq2Seq
from attnmt.shortlist import FILENAME as SHORTLIST_FILE
from attnmt.utils import UserError, atomic_folder, naming_file, replace_folder

FORMAT = 1
MANIFEST = "manifest.json"
GRAPHS = ("encoder", "init", "step")
# The step over a shortlist's target ids only, exported beside the others when the run has a
# shortlist (`attnmt shortlist`): its output layer computes V' rows, not V.
SHORTLIST_STEP = "step_shortlist"
OPSET = 18
# Shapes of the example batch the graphs are traced with: B and S dynamic, chosen unlike any
# layer count so that no static size is mistaken for them.
EXAMPLE_BATCH, EXAMPLE_SOURCE = 5, 7


def _gather_positions(values: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """values (B, S, H) at positions (B, S') per sentence -> (B, S', H)."""
    return values.gather(1, positions.unsqueeze(-1).expand(-1, -1, values.size(-1)))


class UnpackedEncoder(nn.Module):
    """`Encoder` + the attention's key projection, computed without packed sequences.

    forward(src (B, S), src_lengths (B,)) -> memory (B, S, H_enc) zero at padding, mask (B, S),
    projected_keys, final_hidden (L_enc, B, H_enc): what `Seq2Seq.encode` returns.
    """

    def __init__(self, model: Seq2Seq):
        super().__init__()
        encoder = model.encoder
        self.embedding, self.attention = encoder.embedding, cast(Attention, model.decoder.attention)
        rnn = encoder.rnn
        kind = "lstm" if isinstance(rnn, nn.LSTM) else "gru"
        self.directions = encoder.directions
        self.layers = nn.ModuleList()
        for layer in range(rnn.num_layers):
            for suffix in ("", "_reverse")[: self.directions]:
                input_size = rnn.input_size if layer == 0 else encoder.output_size
                single = make_rnn(kind, input_size, rnn.hidden_size, num_layers=1, dropout=0.0)
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    setattr(single, f"{name}_l0", getattr(rnn, f"{name}_l{layer}{suffix}"))  # shared, not copied
                self.layers.append(single)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor):
        positions = torch.arange(src.size(1), device=src.device).unsqueeze(0)  # (1, S)
        mask = positions < src_lengths.unsqueeze(1)  # (B, S)
        # position j of a sentence of length n reads its token n - 1 - j; padding stays in place
        reverse = torch.where(mask, src_lengths.unsqueeze(1) - 1 - positions, positions)  # (B, S)
        last = (src_lengths - 1).unsqueeze(1)  # (B, 1) each sentence's last real position
        inputs = self.embedding(src)  # (B, S, E)
        finals = []
        for first in range(0, len(self.layers), self.directions):
            outputs, layer_finals = [], []
            for direction in range(self.directions):
                rnn = self.layers[first + direction]
                read = inputs if direction == 0 else _gather_positions(inputs, reverse)
                output = rnn(read)[0]  # (B, S, H)
                layer_finals.append(_gather_positions(output, last).squeeze(1))  # (B, H)
                outputs.append(output if direction == 0 else _gather_positions(output, reverse))
            inputs = torch.cat(outputs, dim=-1)  # (B, S, H_enc)
            finals.append(torch.cat(layer_finals, dim=-1))
        memory = inputs.masked_fill(~mask.unsqueeze(-1), 0.0)
        return memory, mask, self.attention.project_keys(memory, mask), torch.stack(finals)


class _Init(nn.Module):
    """final_hidden (L_enc, B, H_enc) -> the decoder's first state, flattened."""

    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.decoder = model.decoder

    def forward(self, final_hidden: torch.Tensor):
        return tuple(part for part in self.decoder.init_state(final_hidden) if part is not None)


class _StepBase(nn.Module):
    """One decoder step as log-probabilities; the state flattened to its present parts. Each
    subclass's `forward` takes the graph's inputs in its own order."""

    def __init__(self, model: Seq2Seq, state_names: tuple[str, ...]):
        super().__init__()
        self.model, self.state_names = model, state_names

    def step(self, prev_tokens, memory, projected_keys, mask, state, vocabulary=None):
        parts = dict(zip(self.state_names, state, strict=True))
        decoder_state = DecoderState(parts["hidden"], parts.get("cell"), parts.get("feed"))
        source = EncoderOutput(memory, mask, projected_keys, memory.new_zeros(0))
        log_probs, new_state, attention = self.model.next_log_probs(prev_tokens, decoder_state, source, vocabulary)
        return (log_probs, attention, *(part for part in new_state if part is not None))


class _Step(_StepBase):
    """One decoder step over the whole target vocabulary: log-probabilities (B, V)."""

    def forward(self, prev_tokens, memory, projected_keys, mask, *state):
        return self.step(prev_tokens, memory, projected_keys, mask, state)


class _ShortlistStep(_StepBase):
    """One decoder step over the target ids `vocabulary` (V',) only: log-probabilities (B, V')."""

    def forward(self, prev_tokens, vocabulary, memory, projected_keys, mask, *state):
        return self.step(prev_tokens, memory, projected_keys, mask, state, vocabulary)


@dataclass(frozen=True)
class Export:
    """A checked export directory: its manifest, every listed file present and unchanged."""

    directory: Path
    manifest: dict

    @property
    def state_names(self) -> tuple[str, ...]:
        return tuple(self.manifest["state"])

    def graph(self, name: str) -> Path:
        return self.directory / f"{name}.onnx"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_export(directory: str | Path) -> Export:
    """The export in `directory`, checked against its manifest; anything amiss is a UserError."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not path.is_file():
        raise UserError(f"{directory}: not an ONNX export (no {MANIFEST}); make one with `attnmt export RUN_DIR`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise UserError(
            f"{path}: export format {found!r}, this attnmt reads format {FORMAT}; export the run again with it"
        )
    for name, digest in manifest.get("files", {}).items():
        file = directory / name
        if not file.is_file():
            raise UserError(f"{file}: missing (listed in {MANIFEST})")
        if _sha256(file) != digest:
            raise UserError(f"{file}: differs from the file {MANIFEST} lists (sha256); the export was changed")
    return Export(directory, manifest)


def is_export(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


@contextlib.contextmanager
def temporary_export(path: str | Path, which: str = "best") -> Iterator[Path]:
    """Export run `path` into a temporary folder that is removed on leaving the block."""
    with tempfile.TemporaryDirectory(prefix="attnmt-export-") as folder:
        yield export_onnx(path, Path(folder) / "export", which=which)


def _run_files(run_dir: Path, shortlist: bool) -> list[Path]:
    """What translation reads from a run directory besides the weights (its shortlist if `shortlist`)."""
    names = ["config.yaml", "src.vocab.json", "tgt.vocab.json", "src.spm.model", "tgt.spm.model"]
    names += [SHORTLIST_FILE] if shortlist else []
    return [run_dir / name for name in names if (run_dir / name).is_file()]


def _graph_io(state: tuple[str, ...]) -> dict[str, dict[str, list[str]]]:
    """Each graph's input and output names, for a decoder state made of `state`."""
    return {
        "encoder": {"inputs": ["src", "src_lengths"], "outputs": ["memory", "mask", "projected_keys", "final_hidden"]},
        "init": {"inputs": ["final_hidden"], "outputs": list(state)},
        "step": {
            "inputs": ["prev_tokens", "memory", "projected_keys", "mask", *state],
            "outputs": ["log_probs", "attention", *(f"new_{name}" for name in state)],
        },
        SHORTLIST_STEP: {
            "inputs": ["prev_tokens", "vocabulary", "memory", "projected_keys", "mask", *state],
            "outputs": ["log_probs", "attention", *(f"new_{name}" for name in state)],
        },
    }


def _export_graph(module: nn.Module, args: tuple, path: Path, names: dict, dynamic: tuple) -> None:
    """Trace `module` on `args` into `path` (one file, weights inside) with torch's ONNX exporter,
    quietly: it prints its progress, which would mix with translations on stdout."""
    try:
        import onnxscript  # noqa: F401  torch's exporter needs it; say so before it does
    except ImportError:
        raise UserError("attnmt export needs onnx and onnxscript: pip install 'attnmt[onnx]'") from None
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                module,
                args,
                dynamo=True,
                input_names=names["inputs"],
                output_names=names["outputs"],
                dynamic_shapes=dynamic,
                opset_version=OPSET,
                verbose=False,
            )
            assert program is not None  # dynamo=True always gives one
            with naming_file(path):
                program.save(str(path), external_data=False)
    finally:
        exporter_log.setLevel(level)
    with naming_file(path):
        _forget_traced_shapes(path)


def _forget_traced_shapes(path: Path) -> None:
    """Drop the shapes the trace recorded for outputs and intermediate values.

    torch.export fixes the source length inside its RNN decomposition, so the recorded output
    shapes carry the example's S although every operation in the graph takes S from its input;
    onnxruntime would warn at each call whose S differs. Its own shape inference needs none of them.
    """
    import onnx

    graph = onnx.load(str(path))
    del graph.graph.value_info[:]
    for output in graph.graph.output:
        for dim in output.type.tensor_type.shape.dim:
            dim.Clear()
    onnx.save(graph, str(path))


def _axes(*axes: int) -> dict:
    """torch.export's dynamic axes of one input (the batch, and the source length where present)."""
    return {axis: torch.export.Dim.DYNAMIC for axis in axes}


def check_output(output: Path) -> None:
    """An export may replace an older export, never another folder."""
    if output.exists() and not (output / MANIFEST).is_file() and any(output.iterdir()):
        raise UserError(f"{output}: exists and is not an export; choose a new folder", field="output")


def check_exportable(trained: TrainedModel) -> None:
    """The step graphs an export holds (and the web page runs) are the recurrent family's: a
    transformer run is a UserError naming what is missing."""
    if trained.config.model.family != "rnn":
        raise UserError(
            f"{trained.run_dir}: a {trained.config.model.family} run cannot be exported yet (the ONNX and web-page "
            "graphs are the rnn family's); translate and serve it with the torch engine",
            field="model.family",
        )


def export_onnx(path: str | Path, output: str | Path, *, which: str = "best", shortlist: bool = True) -> Path:
    """Export the `which` checkpoint of run `path` into directory `output`, written whole or not at all.

    An existing `output` is replaced only when it is itself an export (never another folder).
    A run's vocabulary shortlist comes along (its file and restricted step graph) unless `shortlist` is False.
    """
    import attnmt

    trained = load_trained(path, which)
    check_exportable(trained)
    model, config = cast(Seq2Seq, trained.model.cpu().eval()), trained.config  # a recurrent one, checked above
    output = Path(output)
    check_output(output)
    src = torch.randint(4, model.encoder.embedding.num_embeddings, (EXAMPLE_BATCH, EXAMPLE_SOURCE))
    lengths = torch.tensor([EXAMPLE_SOURCE, 3, EXAMPLE_SOURCE - 1, 1, 4])
    prev = torch.randint(4, model.decoder.embedding.num_embeddings, (EXAMPLE_BATCH,))
    encoder = UnpackedEncoder(model).eval()
    with torch.no_grad():
        memory, mask, projected_keys, final_hidden = encoder(src, lengths)
        first_state = model.decoder.init_state(final_hidden)
    present = tuple(name for name in DecoderState._fields if getattr(first_state, name) is not None)
    state = tuple(getattr(first_state, name) for name in present)
    batch_axis = {"hidden": 1, "cell": 1, "feed": 0}
    names = _graph_io(present)
    with atomic_folder(output) as staging:
        _export_graph(encoder, (src, lengths), staging / "encoder.onnx", names["encoder"], (_axes(0, 1), _axes(0)))
        _export_graph(_Init(model), (final_hidden,), staging / "init.onnx", names["init"], (_axes(1),))
        keys_axes = _axes(0, 1) if projected_keys.dim() > 2 else _axes(0)  # none: one fixed context (B, H_enc)
        state_axes = tuple(_axes(batch_axis[name]) for name in present)
        _export_graph(
            _Step(model, present),
            (prev, memory, projected_keys, mask, *state),
            staging / "step.onnx",
            names["step"],
            (_axes(0), _axes(0, 1), keys_axes, _axes(0, 1), state_axes),
        )
        graphs = {name: names[name] for name in GRAPHS}
        if shortlist and (trained.run_dir / SHORTLIST_FILE).is_file():
            vocabulary = torch.arange(0, model.decoder.embedding.num_embeddings, 3)  # any sorted ids, V' its own size
            _export_graph(
                _ShortlistStep(model, present),
                (prev, vocabulary, memory, projected_keys, mask, *state),
                staging / f"{SHORTLIST_STEP}.onnx",
                names[SHORTLIST_STEP],
                (_axes(0), _axes(0), _axes(0, 1), keys_axes, _axes(0, 1), state_axes),
            )
            graphs[SHORTLIST_STEP] = names[SHORTLIST_STEP]
        for file in _run_files(trained.run_dir, shortlist):
            with naming_file(staging / file.name):
                shutil.copyfile(file, staging / file.name)
        manifest = {
            "format": FORMAT,
            "attnmt": attnmt.__version__,
            "torch": torch.__version__,
            "opset": OPSET,
            "checkpoint": trained.checkpoint.name,
            "languages": {"source": config.data.src_lang, "target": config.data.tgt_lang},
            "model": config.model.model_dump(mode="json"),
            "vocabulary": {
                "source": model.encoder.embedding.num_embeddings,
                "target": model.decoder.embedding.num_embeddings,
            },
            "state": list(present),
            "graphs": graphs,
            "quantization": "none",
        }
        write_manifest(staging, manifest)
    return output


def write_manifest(directory: Path, manifest: dict) -> None:
    """Write `manifest` into `directory` with the sha256 of every other file there."""
    files = {file.name: _sha256(file) for file in sorted(directory.iterdir()) if file.name != MANIFEST}
    with naming_file(directory / MANIFEST):
        (directory / MANIFEST).write_text(json.dumps(manifest | {"files": files}, indent=2) + "\n", encoding="utf-8")


def replace_export(staging: Path, output: Path) -> None:
    """Move the finished export folder `staging` to `output`, synced to the disk; an old export
    there goes only once the new one is in place."""
    replace_folder(staging, output)

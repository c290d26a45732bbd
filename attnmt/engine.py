"""The step interface (`search.StepModel`) over an ONNX export's onnxruntime sessions.

`OnnxModel(directory)` runs the three graphs `attnmt export` writes; greedy and beam search
drive it exactly as they drive `Seq2Seq`. Between calls the search keeps its bookkeeping in
torch tensors: arrays cross the boundary without copies (`torch.from_numpy`, `.numpy()`), and
the encoder output and decoder state are the same `EncoderOutput` and `DecoderState` the torch
model uses, so reordering beams (`index_select`) is shared code too.

onnxruntime is an optional dependency (`pip install 'attnmt[onnx]'`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from attnmt.export import GRAPHS, SHORTLIST_STEP, Export, read_export
from attnmt.models.decoder import DecoderState, EncoderOutput
from attnmt.utils import UserError


def _session(path: Path, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for a damaged graph
        raise UserError(f"{path}: onnxruntime cannot load it ({str(exc).splitlines()[0]})") from None


def _arrays(tensors) -> list[np.ndarray]:
    return [tensor.contiguous().numpy() for tensor in tensors]


class OnnxModel:
    """An export run by onnxruntime on the CPU with `threads` threads (default: torch's count)."""

    def __init__(self, directory: str | Path, *, threads: int | None = None):
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise UserError("the onnxruntime engine needs onnxruntime: pip install 'attnmt[onnx]'") from None
        self.export: Export = read_export(directory)
        threads = threads or torch.get_num_threads()
        graphs = [name for name in (*GRAPHS, SHORTLIST_STEP) if name in self.export.manifest["graphs"]]
        self.sessions = {name: _session(self.export.graph(name), threads) for name in graphs}
        self.state_names = self.export.state_names

    def _run(self, name: str, inputs: list[np.ndarray]) -> list[torch.Tensor]:
        session = self.sessions[name]
        feed = {spec.name: array for spec, array in zip(session.get_inputs(), inputs, strict=True)}
        return [torch.from_numpy(array) for array in session.run(None, feed)]

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> EncoderOutput:
        """src (B, S) long, src_lengths (B,) long -> EncoderOutput."""
        memory, mask, projected_keys, final_hidden = self._run("encoder", _arrays((src.cpu(), src_lengths.cpu())))
        return EncoderOutput(memory, mask, projected_keys, final_hidden)

    def _state(self, parts: list[torch.Tensor]) -> DecoderState:
        named = dict(zip(self.state_names, parts, strict=True))
        return DecoderState(named["hidden"], named.get("cell"), named.get("feed"))

    def init_state(self, encoder_output: EncoderOutput) -> DecoderState:
        return self._state(self._run("init", _arrays([encoder_output.final_hidden])))

    def next_log_probs(
        self,
        prev_tokens: torch.Tensor,
        state: DecoderState,
        encoder_output: EncoderOutput,
        vocabulary: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """prev_tokens (B,) long -> (log-probabilities (B, V) float32, new state, attention (B, S));
        with `vocabulary` (V',) target ids, the distribution (B, V') over those only.

        The export's restricted step graph computes those rows of the output layer only. An export
        without one (made before its run had a shortlist) computes every row, and the restricted
        distribution is renormalized from them (log_softmax of a subset of logits equals that
        subset of the log-probabilities minus its logsumexp): the same output, without the saving.
        """
        source = (encoder_output.memory, encoder_output.projected_keys, encoder_output.mask)
        state_parts = [getattr(state, name) for name in self.state_names]
        if vocabulary is not None and SHORTLIST_STEP in self.sessions:
            inputs = _arrays((prev_tokens, vocabulary.cpu(), *source, *state_parts))
            log_probs, attention, *new_state = self._run(SHORTLIST_STEP, inputs)
            return log_probs, self._state(new_state), attention
        log_probs, attention, *new_state = self._run("step", _arrays((prev_tokens, *source, *state_parts)))
        if vocabulary is not None:
            log_probs = torch.log_softmax(log_probs.index_select(1, vocabulary), dim=-1)
        return log_probs, self._state(new_state), attention

"""int8 dynamic quantization, for the torch model and for an ONNX export.

Dynamic quantization stores weights as int8 (one scale per tensor) and quantizes each layer's
input on the fly, so it needs no calibration data. What it applies to:

- torch (`quantize_model`): every `nn.Linear` (bridge, attention projections, pre-output and
  output layers) and the encoder's RNN. The decoder's RNN stays float32: the decoder step reads
  its weights directly (a fused recurrence, and the embedding's share of the input gates looked
  up as a table), which a quantized module does not provide. It runs on the CPU only.
- onnxruntime (`quantize_export`): every MatMul, Gemm and GRU/LSTM weight of the three graphs,
  by onnxruntime's own quantizer.

Quantization can cost BLEU; `attnmt export --quantize int8` measures the loss on the
validation split and keeps float32 when it exceeds `BLEU_BOUND`.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from attnmt.utils import UserError

if TYPE_CHECKING:
    from torch import nn

# torch and the export format are imported where they are used: the command line reads the
# choices below without loading torch.

CHOICES = ("none", "int8")
BLEU_BOUND = 0.3  # the most BLEU an int8 model may lose against float32 and still be kept


def quantize_model(model: nn.Module) -> nn.Module:
    """A copy of `model` (a `Seq2Seq` on the CPU) with int8 dynamic quantization of its linear
    layers and its encoder's RNN; the same step interface."""
    import torch
    from torch import nn
    from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

    if any(parameter.device.type != "cpu" for parameter in model.parameters()):
        raise UserError("int8 runs on the CPU; choose the cpu device", field="device")
    spec = {nn.Linear: default_dynamic_qconfig, "encoder.rnn": default_dynamic_qconfig}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch announces its quantized tensors' future deprecation
        return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=False)


def quantize_export(source: str | Path, output: str | Path, *, portable: bool = False) -> Path:
    """Write an int8 copy of the float32 export `source` into the new folder `output`.

    `portable` makes the int8 graphs the web export needs, the same on every CPU and in the
    browser's WebAssembly: it first folds what the graphs compute from their weights alone
    (onnxruntime's pre-processing for quantization: the decoder step slices its input weights in
    the graph, and a slice of a weight is no weight to the quantizer, so without folding those
    stay float32), and it quantizes weights to 7 bits (onnxruntime's `reduce_range`): x86 CPUs
    with AVX2 but no VNNI multiply uint8 activations by int8 weights in pairs summed into int16,
    which saturates for full-range weights, while WebAssembly computes the exact products. The
    plain export does neither: its speed and BLEU were measured without.
    """
    from attnmt.export import MANIFEST, read_export, write_manifest

    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise UserError("int8 of an export needs onnxruntime: pip install 'attnmt[onnx]'", field="quantize") from None
    export = read_export(source)
    if export.manifest.get("quantization", "none") != "none":
        raise UserError(f"{source}: already quantized ({export.manifest['quantization']})")
    output = Path(output)
    shutil.copytree(export.directory, output)
    quantizer_log = logging.getLogger()  # the quantizer advises pre-processing on the root logger
    level = quantizer_log.level
    quantizer_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            for name in export.manifest["graphs"]:
                path = output / f"{name}.onnx"
                if portable:
                    from onnxruntime.quantization.shape_inference import quant_pre_process

                    quant_pre_process(path, path, skip_symbolic_shape=True)
                quantize_dynamic(path, path, weight_type=QuantType.QInt8, reduce_range=portable)
    finally:
        quantizer_log.setLevel(level)
    manifest = json.loads((output / MANIFEST).read_text(encoding="utf-8"))
    write_manifest(output, manifest | {"quantization": "int8"})
    return output

"""An int8 export kept only when it translates about as well as float32: `export_int8_or_float32`
makes both exports, scores each greedily on the run's validation split and keeps int8 when it
loses at most `quantize.BLEU_BOUND` BLEU; `export_int8` says so as an error when it does not.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from attnmt.evaluation import evaluate, split_examples
from attnmt.export import check_output, export_onnx, replace_export
from attnmt.loading import ModelSpec, load
from attnmt.quantize import BLEU_BOUND, quantize_export
from attnmt.utils import UserError


@dataclass(frozen=True)
class Int8Check:
    """Greedy valid-split BLEU of a run's float32 and int8 exports."""

    float32_bleu: float
    int8_bleu: float
    sentences: int

    @property
    def loss(self) -> float:
        return self.float32_bleu - self.int8_bleu

    @property
    def kept(self) -> bool:
        """Whether int8 is within the bound, so that the int8 export is the one written."""
        return self.loss <= BLEU_BOUND

    def __str__(self) -> str:
        return (
            f"valid BLEU (greedy, {self.sentences:,} sentences): "
            f"float32 {self.float32_bleu:.2f}, int8 {self.int8_bleu:.2f}"
        )


def export_int8(spec: ModelSpec, output: str | Path) -> Int8Check:
    """Export `spec`'s run (its first path) quantized to int8 into `output`, kept only when int8
    loses at most BLEU_BOUND BLEU against float32 on the valid split (greedy search). Otherwise
    the float32 export is written to `output` instead and a UserError says so."""
    check = export_int8_or_float32(spec, output)
    if not check.kept:
        raise UserError(
            f"int8 loses {check.loss:.2f} BLEU, more than {BLEU_BOUND}: wrote the float32 export to "
            f"{output} instead ({check})",
            field="quantize",
        )
    return check


def export_int8_or_float32(
    spec: ModelSpec, output: str | Path, *, shortlist: bool = True, portable: bool = False
) -> Int8Check:
    """Export `spec`'s run (its first path) into `output`: int8 when it loses at most BLEU_BOUND
    BLEU against float32 on the valid split (greedy search), float32 otherwise (`Int8Check.kept`
    says which). Both exports are made in a staging folder beside `output`, so `output` is only
    ever a whole export. `shortlist=False` leaves a run's vocabulary shortlist out;
    `portable` is `quantize_export`'s."""
    output = Path(output)
    check_output(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{output.name}.", dir=output.parent) as folder:
        float32 = export_onnx(spec.paths[0], Path(folder) / "float32", which=spec.checkpoint, shortlist=shortlist)
        int8 = quantize_export(float32, Path(folder) / "int8", portable=portable)
        exports = [ModelSpec((str(directory),), device="cpu", data_dir=spec.data_dir) for directory in (float32, int8)]
        translators = [load(export) for export in exports]
        examples = split_examples(translators[0].config.data, "valid")
        greedy = translators[0].search_options(beam_size=1)
        float32_bleu, int8_bleu = (evaluate(translator, examples, greedy).bleu.score for translator in translators)
        check = Int8Check(float32_bleu, int8_bleu, len(examples))
        replace_export(int8 if check.kept else float32, output)
    return check

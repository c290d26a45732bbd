"""`attnmt export RUN --format web`: a static folder that translates in the browser, with no server.

The folder (opened from any static file host, e.g. `python -m http.server -d DIR`):

    index.html, page.js      the page: translation, n-best list, attention heatmap, search replay
    search.js                greedy and beam search over the step graph (the twin of `attnmt.search`)
    tokenizers.js            the run's tokenizers (the twin of `attnmt.tokenize`)
    views.js, style.css      the drawing and style shared with `attnmt serve`'s explorer (`attnmt.views`)
    model/                   an ONNX export (`attnmt export`): int8 where it keeps its BLEU
    model.json               what the page needs to know of the run (format FORMAT, below)
    ort/                     onnxruntime-web's script and WebAssembly module (`runtime`)

model/ is itself a complete export, so `attnmt translate DIR/model --engine onnxruntime` runs
the same graphs in Python. A vocabulary shortlist is left out: the page decodes over the whole
target vocabulary (one sentence at a time, where a shortlist saves least).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from attnmt import views
from attnmt.checkpoint import load_trained
from attnmt.codec import TextCodec
from attnmt.evaluation import split_examples
from attnmt.export import check_exportable, export_onnx, read_export
from attnmt.int8_export import Int8Check, export_int8_or_float32
from attnmt.loading import ModelSpec
from attnmt.shortlist import FILENAME as SHORTLIST_FILE
from attnmt.translate import MAX_SOURCE_TOKENS
from attnmt.utils import UserError, atomic_folder, naming_file
from attnmt.web import runtime
from attnmt.web.tokenizers import web_tokenizer

FORMAT = "attnmt-web"
VERSION = 1
DESCRIPTION = "model.json"
MODEL_FOLDER = "model"
RUNTIME_FOLDER = "ort"
PAGE_FILES = ("index.html", "page.js", "search.js", "tokenizers.js")  # attnmt/web/static
EXAMPLES = 30  # test sources offered as examples in the page


@dataclass(frozen=True)
class WebExport:
    """What `export_web` wrote: the folder, its size in bytes, the int8 check (None: float32 asked),
    and whether the run's vocabulary shortlist was left out."""

    folder: Path
    size: int
    int8: Int8Check | None
    shortlist_left_out: bool


def is_web_export(path: Path) -> bool:
    """Whether `path` holds an earlier web export (its description names FORMAT)."""
    try:
        return json.loads((path / DESCRIPTION).read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _check_output(output: Path) -> None:
    """A web export may replace an earlier web export, never another folder or a file."""
    if output.exists() and not output.is_dir():
        raise UserError(f"{output}: exists and is not a folder; choose a new folder", field="output")
    if output.is_dir() and any(output.iterdir()) and not is_web_export(output):
        raise UserError(f"{output}: exists and is not an earlier web export; choose a new folder", field="output")


def _examples(data, limit: int = EXAMPLES) -> list[str]:
    """Up to `limit` sources of the run's test split, shortest first; none when it cannot be read."""
    try:
        sources = [example.src for example in split_examples(data, "test")]
    except UserError:
        return []
    return sorted(dict.fromkeys(sources), key=len)[:limit]


def _copy_page(staging: Path) -> None:
    for static, names in ((resources.files("attnmt.web") / "static", PAGE_FILES), (views.STATIC, views.FILES)):
        for name in names:
            with naming_file(staging / name):
                (staging / name).write_bytes((static / name).read_bytes())


def _folder_size(folder: Path) -> int:
    return sum(file.stat().st_size for file in folder.rglob("*") if file.is_file())


def export_web(
    run_dir: str | Path, output: str | Path, *, which: str = "best", int8: bool = True, data_dir: str | None = None
) -> WebExport:
    """Write the web page of run `run_dir`'s `which` checkpoint into the folder `output`, whole or not at all.

    With `int8`, the graphs are int8 when that loses at most `quantize.BLEU_BOUND` BLEU on the
    valid split (read from `data_dir` or where the corpus is found), float32 otherwise.
    onnxruntime-web's files come from the cache, downloaded on first use (`runtime`). An
    existing `output` is replaced only when it is an earlier web export.
    """
    output = Path(output)
    _check_output(output)
    trained = load_trained(run_dir, which)
    check_exportable(trained)
    config = trained.config
    if config.decode.stopping != "k_finished":  # the page's search (search.js) has attnmt's rule only
        raise UserError(
            f"{trained.run_dir}: decode.stopping is {config.decode.stopping}, but the web page's beam search "
            "stops once K hypotheses have ended (k_finished); export a run with that setting",
            field="decode.stopping",
        )
    if config.decode.min_length:  # nor a minimum length
        raise UserError(
            f"{trained.run_dir}: decode.min_length is {config.decode.min_length}, but the web page's search has "
            "no minimum length; export a run with decode.min_length 0",
            field="decode.min_length",
        )
    codec = TextCodec.load(trained.run_dir, config.data)
    tokenizers = {"source": web_tokenizer(codec.src_tokenizer), "target": web_tokenizer(codec.tgt_tokenizer)}
    runtime.runtime_folder()  # fetched before the long part, so that a missing engine fails first
    check = None
    with atomic_folder(output) as staging:
        model = staging / MODEL_FOLDER
        if int8:
            spec = ModelSpec((str(run_dir),), checkpoint=which, data_dir=data_dir)  # a run or one checkpoint folder
            check = export_int8_or_float32(spec, model, shortlist=False, portable=True)
        else:
            export_onnx(run_dir, model, which=which, shortlist=False)
        manifest = read_export(model).manifest
        _copy_page(staging)
        runtime.copy_runtime(staging / RUNTIME_FOLDER)
        description = {
            "format": FORMAT,
            "version": VERSION,
            "attnmt": manifest["attnmt"],
            "runtime": {"package": "onnxruntime-web", "version": runtime.VERSION, "folder": RUNTIME_FOLDER},
            "languages": manifest["languages"],
            "model": {
                "folder": MODEL_FOLDER,
                "checkpoint": manifest["checkpoint"],
                "architecture": manifest["model"],
                "state": manifest["state"],
                "quantization": manifest["quantization"],
            },
            "tokenizers": tokenizers,
            "decode": {
                "beam_size": config.decode.beam_size,
                "length_penalty": config.decode.length_penalty,
                "max_length_a": config.decode.max_length_a,
                "max_length_b": config.decode.max_length_b,
                "max_length": None,
            },
            "max_source_tokens": MAX_SOURCE_TOKENS,
            "examples": _examples(config.with_data_dir(data_dir).data),
        }
        with naming_file(staging / DESCRIPTION):
            (staging / DESCRIPTION).write_text(json.dumps(description, ensure_ascii=False) + "\n", encoding="utf-8")
    shortlist_left_out = (trained.run_dir / SHORTLIST_FILE).is_file()
    return WebExport(output, _folder_size(output), check, shortlist_left_out)

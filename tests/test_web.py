"""`attnmt export --format web`: the folder it writes, its refusals, and the page in a real browser.

The browser tests open the exported folder from a plain static file server (no cross-origin
isolation, as `python -m http.server` serves it) in headless Chromium (Debian's package) driven
by Playwright, on tiny reverse-task runs with the word, BPE and unigram tokenizers, and compare
the page's translations with the Python search over the same graphs (`--engine onnxruntime`).
They are skipped, with a line saying how to enable them, where Chromium or Playwright is
missing, and fail there under CI. The export fetches onnxruntime-web from npm's registry once
into the cache.
"""

import json
import os
import re
import shutil

import pytest
import torch

from attnmt import views
from attnmt.config import load_config
from attnmt.export import read_export
from attnmt.loading import ModelSpec, load
from attnmt.search.options import length_penalty
from attnmt.search.teacher import teacher_forced
from attnmt.vocab import EOS
from attnmt.web.export import DESCRIPTION, FORMAT, PAGE_FILES, export_web
from attnmt.web.runtime import FILES as RUNTIME_FILES
from benchmarks.chromium import chromium, open_browser
from tests.browser_helpers import replay_the_search
from tests.cli_helpers import run_error, run_ok
from tests.run_helpers import REVERSE_RUN
from tools.browser import serving_folder

try:
    import playwright.sync_api as playwright
except ImportError:  # pragma: no cover - dev dependencies are installed by `make test`
    playwright = None

HAS_BROWSER = chromium() is not None and playwright is not None
needs_browser = pytest.mark.skipif(
    not HAS_BROWSER and not os.environ.get("CI"),
    reason="needs Chromium (apt-get install chromium, or ATTNMT_CHROMIUM=/path/to/chrome) and playwright (pip)",
)
TOKENIZERS = {  # the reverse task's letters, as words or as SentencePiece pieces
    "word": [],
    "bpe": ["data.tokenizer=sentencepiece", "data.spm_model_type=bpe", "data.spm_vocab_size=40"],
    "unigram": ["data.tokenizer=sentencepiece", "data.spm_model_type=unigram", "data.spm_vocab_size=40"],
}
SENTENCES = 40  # test sentences compared per run and search


@pytest.fixture(scope="session", params=list(TOKENIZERS))
def web_run(request, tmp_path_factory):
    """A tiny reverse-task run with one tokenizer and its float32 web export: (run, site). The
    word tokenizer's is the session's reverse run; the others train 150 steps (~10 s)."""
    from attnmt.train import fit

    folder = tmp_path_factory.mktemp(f"web-{request.param}")
    if request.param == "word":
        run_dir = request.getfixturevalue("reverse_run")
    else:
        run_dir = folder / "run"
        overrides = [*REVERSE_RUN, "train.max_steps=150", *TOKENIZERS[request.param], f"train.run_dir={run_dir}"]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("ATTNMT_CACHE", str(folder / "cache"))
            fit(load_config(None, overrides), log=lambda *args, **kwargs: None)
    return run_dir, export_web(run_dir, folder / "site", int8=False).folder


def test_the_folder_holds_the_page_the_graphs_and_the_engine(web_run):
    _, site = web_run
    for name in (*PAGE_FILES, *views.FILES, DESCRIPTION, *(f"ort/{file}" for file in RUNTIME_FILES)):
        assert (site / name).is_file(), name
    description = json.loads((site / DESCRIPTION).read_text(encoding="utf-8"))
    export = read_export(site / description["model"]["folder"])  # a complete, checked ONNX export
    assert description["format"] == FORMAT and description["model"]["state"] == export.manifest["state"]
    assert description["model"]["quantization"] == "none" and description["max_source_tokens"] > 0
    assert description["tokenizers"]["source"] and description["examples"]
    page = (site / "index.html").read_text(encoding="utf-8") + (site / "page.js").read_text(encoding="utf-8")
    assert not re.search(r"https?://", page)  # nothing is fetched from outside the folder


def test_the_command_replaces_an_earlier_web_export_whole(web_run, capsys, tmp_path):
    run_dir, site = web_run
    if load_config(run_dir / "config.yaml").data.tokenizer != "word":
        pytest.skip("the command is the same for every tokenizer: checked once")
    again = shutil.copytree(site, tmp_path / "site")
    (again / "stale.txt").write_text("from the export before")
    out = run_ok(capsys, "export", str(run_dir), "--format", "web", "--output", str(again), "--quantize", "none")
    assert "python -m http.server -d" in out and "--engine onnxruntime" in out
    assert not (again / "stale.txt").exists() and (again / DESCRIPTION).is_file()


def test_folding_constants_before_int8_leaves_no_float32_matrix_in_the_step(web_run, tmp_path):
    """The decoder step slices its input weights in the graph; folded first, those are int8 too."""
    import onnx

    from attnmt.quantize import quantize_export

    _, site = web_run

    def float32_matrices(export):
        graph = onnx.load(str(export / "step.onnx")).graph
        return [w.name for w in graph.initializer if w.data_type == onnx.TensorProto.FLOAT and len(w.dims) == 2]

    assert float32_matrices(quantize_export(site / "model", tmp_path / "plain"))  # what folding is for
    folded = quantize_export(site / "model", tmp_path / "folded", portable=True)
    assert float32_matrices(folded) == []
    translator = load(ModelSpec(str(folded), engine="onnxruntime", threads=1))
    assert translator.translate(["a b c"])[0].tokens  # the folded graphs still run


def test_a_checkpoint_folder_exports_that_checkpoint(reverse_run, tmp_path):
    from attnmt.checkpoint import read_index

    index = read_index(reverse_run)
    older = next(name for name in index.kept if name != index.best)
    site = export_web(reverse_run / "checkpoints" / older, tmp_path / "site", int8=False).folder
    assert json.loads((site / DESCRIPTION).read_text(encoding="utf-8"))["model"]["checkpoint"] == older


def test_another_folder_is_never_overwritten(reverse_run, capsys, tmp_path):
    taken = tmp_path / "notes"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep me")
    line = run_error(capsys, "export", str(reverse_run), "--format", "web", "--output", str(taken))
    assert str(taken) in line and "not an earlier web export" in line
    assert (taken / "mine.txt").read_text() == "keep me" and len(list(taken.iterdir())) == 1


def test_without_the_engine_files_nothing_is_written(reverse_run, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNMT_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9")  # nothing listens there
    output = tmp_path / "site"
    line = run_error(capsys, "export", str(reverse_run), "--format", "web", "--output", str(output))
    assert "onnxruntime-web" in line and "ort-wasm-simd-threaded.wasm" in line
    assert not output.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".site")]


def _python_score(model, src_ids: list[int], out_ids: list[int], alpha: float) -> float:
    """The search score (log-probability / length penalty) Python gives an output."""
    src = torch.tensor([src_ids])
    targets = torch.tensor([[*out_ids, EOS]])
    log_probs = teacher_forced(model, src, torch.tensor([len(src_ids)]), targets).log_probs
    return float(log_probs.sum() / length_penalty(torch.tensor(len(out_ids) + 1), alpha))


@needs_browser
@pytest.mark.parametrize("beam", [1, 5])
def test_the_page_translates_as_python_does_over_the_same_graphs(web_run, beam):
    _, site = web_run
    translator = load(ModelSpec(str(site / "model"), engine="onnxruntime", threads=1))
    sources = [example.src for example in _test_examples(translator)][:SENTENCES]
    options = translator.search_options(beam_size=beam, n_best=1)
    expected = translator.translate(sources, options)
    with serving_folder(site) as url, open_browser() as browser:
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url)
        page.evaluate("attnmt.ready")
        found = page.evaluate(
            "async ([sentences, beam]) => { const out = []; for (const s of sentences) "
            "{ const r = await attnmt.translate(s, beam); out.push({text: r.hypotheses[0].text, "
            "ids: r.hypotheses[0].ids, tokens: r.source_tokens}); } return out; }",
            [sources, beam],
        )
        assert not errors, errors
    codec = translator.codec
    for source, python, browser_result in zip(sources, expected, found, strict=True):
        assert browser_result["tokens"] == python.source_tokens, source
        if browser_result["text"] == python.text:
            continue
        # Only a near-tie may go the other way: the page's output scores as Python's best does
        src_ids = codec.src_vocab.encode(python.source_tokens)
        ids = [i for i in browser_result["ids"] if i != EOS]
        page_score = _python_score(translator.model, src_ids, ids, options.length_penalty)
        assert page_score == pytest.approx(python.score, abs=1e-4), (source, python.text, browser_result["text"])


def _test_examples(translator):
    from attnmt.evaluation import split_examples

    return split_examples(translator.config.data, "test")


@needs_browser
def test_the_page_shows_attention_replays_the_search_and_says_what_went_wrong(web_run, tmp_path):
    run_dir, site = web_run
    if load_config(run_dir / "config.yaml").data.tokenizer != "word":
        pytest.skip("the page's controls are the same for every tokenizer: checked once")
    expect = playwright.expect
    with serving_folder(site) as url, open_browser() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url)
        expect(page.locator("#translate-button")).to_be_enabled(timeout=60_000)

        page.click("#translate-button")  # nothing typed
        expect(page.locator("#status")).to_have_text(re.compile("Type a sentence"))
        page.fill("#source", "a b c d e")
        page.click("#translate-button")
        expect(page.locator("#heatmap rect.cell").first).to_be_visible()
        outputs = page.locator("#heatmap text.out-token")
        sources = page.locator("#heatmap text.src-token")
        assert sources.all_text_contents() == ["a", "b", "c", "d", "e"]
        assert outputs.all_text_contents()[-1] == "</s>"
        assert " ".join(outputs.all_text_contents()[:-1]) == page.inner_text("#translation")
        assert page.locator("#heatmap rect.cell").count() == outputs.count() * sources.count()
        assert page.locator("#nbest tr").count() >= 1

        total = replay_the_search(page, expect)
        page.click("#step-forward")
        expect(page.locator("#step-label")).to_have_text(f"step 2 of {total}")
        page.click("button[data-tab=translate]")

        page.fill("#source", " ".join(["a"] * 300))  # over the 250 tokens a sentence may have
        page.click("#translate-button")
        expect(page.locator("#status")).to_have_text(re.compile("only its first 250 are translated"))
        page.fill("#source", "a Ω b")  # a character the model never saw
        page.click("#translate-button")
        expect(page.locator("#status")).to_have_text(re.compile("Unknown to the model.*Ω"))
        page.screenshot(path=tmp_path / "page.png", full_page=True)
        assert not errors, errors

        bare = browser.new_page()
        bare.add_init_script("delete window.WebAssembly")
        bare.goto(url)
        expect(bare.locator("#status")).to_have_text(re.compile("WebAssembly"))


def test_a_run_copied_without_its_tokenizer_model_is_refused(web_run, capsys, tmp_path):
    run_dir, _ = web_run
    if not (run_dir / "src.spm.model").is_file():
        pytest.skip("only SentencePiece runs have a tokenizer model file")
    damaged = shutil.copytree(run_dir, tmp_path / "run", ignore=shutil.ignore_patterns("tensorboard"))
    (damaged / "src.spm.model").write_bytes(b"not a model")
    line = run_error(capsys, "export", str(damaged), "--format", "web", "--output", str(tmp_path / "site"))
    assert "src.spm.model" in line
    assert not (tmp_path / "site").exists()

"""What `attnmt serve` loads, through its API: an ONNX export on onnxruntime, an int8 model (torch's
dynamic quantization, or an export quantized on the fly), and an ensemble of runs as one model.

Each model is loaded from the command's own arguments (`cli.serve.models`), as `attnmt serve`
loads it, and answers through FastAPI's test client exactly what the library's `loading.load` of
the same `ModelSpec` translates: the API adds no loading of its own. The last tests hold the API's
face of a user error: the request field, never the config key or the command-line flag.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from attnmt.cli import build_parser
from attnmt.export import export_onnx
from attnmt.loading import ModelSpec, load
from attnmt.search.options import SearchOptions
from attnmt.serve.catalog import api_field
from attnmt.utils import UserError
from tests.serve_helpers import serving

SENTENCES = ["a b c", "d e f g h", "h g", "", "b a c d e f"]


def answered(client: TestClient, **settings) -> list[list[str]]:
    """Every sentence's hypotheses, best first, as /v1/translate answers them."""
    response = client.post("/v1/translate", json={"sentences": SENTENCES, **settings})
    assert response.status_code == 200, response.text
    return [[h["text"] for h in sentence["hypotheses"]] for sentence in response.json()["translations"]]


def library(spec: ModelSpec, beam_size: int, n_best: int) -> list[list[str]]:
    """The same, from the library."""
    translator = load(spec)
    translations = translator.translate(SENTENCES, translator.search_options(beam_size=beam_size, n_best=n_best))
    return [[t.text for t in (best, *best.alternatives)] for best in translations]


@pytest.fixture(scope="module")
def export_dir(reverse_run, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    return export_onnx(reverse_run, tmp_path_factory.mktemp("served") / "reverse-onnx")


def test_an_onnx_export_is_served_on_onnxruntime_as_the_run_translates(reverse_run, export_dir):
    from attnmt.engine import OnnxModel

    catalog, client = serving(str(export_dir))
    with client:
        [model] = client.get("/v1/models").json()["models"]
        assert model["name"] == export_dir.name
        assert isinstance(catalog.get(None).translator.model, OnnxModel)
        assert model["architecture"]["parameters"] == load(ModelSpec(reverse_run, device="cpu")).parameters > 0
        got = answered(client, beam_size=3, n_best=2)
        assert got == library(ModelSpec(export_dir), 3, 2) == library(ModelSpec(reverse_run, device="cpu"), 3, 2)
        explained = client.post("/v1/explain", json={"sentence": "a b c", "beam_size": 2})
        assert explained.status_code == 200 and explained.json()["steps"]


def test_an_int8_model_is_served_by_torch_or_by_an_export_made_on_the_fly(reverse_run):
    pytest.importorskip("onnxruntime")
    from torch.ao.nn.quantized import dynamic

    from attnmt.engine import OnnxModel

    catalog, client = serving(str(reverse_run), "--quantize", "int8")
    with client:
        assert isinstance(catalog.get(None).translator.model.encoder.rnn, dynamic.GRU)  # int8 weights
        assert answered(client, beam_size=2, n_best=2) == library(ModelSpec(reverse_run, quantize="int8"), 2, 2)
    catalog, client = serving(str(reverse_run), "--quantize", "int8", "--engine", "onnxruntime")
    with client:
        served = catalog.get(None).translator
        assert isinstance(served.model, OnnxModel) and served.model.export.manifest["quantization"] == "int8"
        assert served.checkpoint.parent == reverse_run / "checkpoints"  # named after the run, not the temporary export
        int8 = ModelSpec(reverse_run, quantize="int8", engine="onnxruntime")
        assert answered(client, beam_size=2) == library(int8, 2, 1)


def test_an_ensemble_is_served_as_one_model_that_decodes_as_the_library_ensemble(reverse_run, dot_reverse_run):
    catalog, client = serving(str(reverse_run), str(dot_reverse_run), "--ensemble", "--device", "cpu")
    with client:
        [model] = client.get("/v1/models").json()["models"]
        assert model["name"] == f"{reverse_run.name}+{dot_reverse_run.name}" == catalog.default
        members = [load(ModelSpec(run, device="cpu")) for run in (reverse_run, dot_reverse_run)]
        assert model["architecture"]["parameters"] == sum(member.parameters for member in members)
        ensemble = ModelSpec((reverse_run, dot_reverse_run), device="cpu")
        got = answered(client, beam_size=3, n_best=2)
        assert got == library(ensemble, 3, 2) and got != library(ModelSpec(dot_reverse_run, device="cpu"), 3, 2)


def test_serve_loads_on_the_device_translate_loads_on():
    parser = build_parser()
    served = parser.parse_args(["serve", "RUN"])
    translated = parser.parse_args(["translate", "RUN", "a"])
    assert served.device == translated.device == "auto"
    assert (served.checkpoint, served.engine, served.quantize) == (translated.checkpoint, "auto", "none")


def test_an_impossible_search_setting_is_named_by_its_request_field(reverse_run):
    """The API's face of a UserError: `n_best` and `beam_size`, not `decode.n_best` or `--n-best`."""
    with pytest.raises(UserError) as raised:
        SearchOptions(beam_size=2, n_best=3)
    assert raised.value.field == "decode.n_best" and api_field(raised.value) == "n_best"
    assert api_field(UserError("a file is missing")) is None
    _, client = serving(str(reverse_run), "--device", "cpu")
    with client:
        for settings, field in (({"beam_size": 2, "n_best": 3}, "n_best"), ({"beam_size": 0}, "beam_size")):
            response = client.post("/v1/translate", json={"sentences": ["a b"], **settings})
            assert response.status_code == 422 and response.json()["field"] == field
            assert response.json()["error"].startswith(f"{field}: ") and "decode." not in response.json()["error"]

"""What `attnmt serve` loads, through its API: an ONNX export on onnxruntime, an int8 model (torch's
dynamic quantization, or an export quantized on the fly), an ensemble of runs as one model, and a
transformer, whose every layer and head /v1/heads shows (a 422 naming `heads` for any other model).

Each model is loaded from the command's own arguments (`cli.serve.models`), as `attnmt serve`
loads it, and answers through FastAPI's test client exactly what the library's `loading.load` of
the same `ModelSpec` translates: the API adds no loading of its own. The last tests hold the API's
face of a user error: the request field, never the config key or the command-line flag.
"""

from __future__ import annotations

import pytest
import torch
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
        assert model["heads"] is False
        members = [load(ModelSpec(run, device="cpu")) for run in (reverse_run, dot_reverse_run)]
        assert model["architecture"]["parameters"] == sum(member.parameters for member in members)
        ensemble = ModelSpec((reverse_run, dot_reverse_run), device="cpu")
        got = answered(client, beam_size=3, n_best=2)
        assert got == library(ensemble, 3, 2) and got != library(ModelSpec(dot_reverse_run, device="cpu"), 3, 2)
        refused = client.post("/v1/heads", json={"sentence": "a b c"})  # each member has its own attention
        assert refused.status_code == 422 and refused.json()["field"] == "heads", refused.text


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


# --- a transformer's every layer and head (/v1/heads) ---------------------------------------------

ROUNDED = 5e-5  # the API writes attention with 4 decimals: each value is within this of the model's


@pytest.fixture(scope="module")
def transformer_client(transformer_run, reverse_run):
    """The transformer run (the default) and an RNN run, served as `attnmt serve` serves them."""
    _, client = serving(str(transformer_run), str(reverse_run), "--device", "cpu")
    with client:
        yield client


def heads_of(client: TestClient, **body) -> dict:
    response = client.post("/v1/heads", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def check_maps(heads: dict, layers: tuple[int, int], count: int) -> None:
    """Each map's shape ([layer][head][row][column], `layers` = (encoder, decoder)), its rows summing
    to 1, and the decoder's self-attention blind to the inputs still to come."""
    sources, outputs, inputs = (len(heads[name]) for name in ("source_tokens", "outputs", "inputs"))
    assert outputs == inputs
    cross, encoder, decoder = (torch.tensor(heads[name]) for name in ("cross", "encoder", "decoder"))
    assert cross.shape == (layers[1], count, outputs, sources)
    assert encoder.shape == (layers[0], count, sources, sources)
    assert decoder.shape == (layers[1], count, outputs, inputs)
    for attention in (cross, encoder, decoder):
        sums = attention.sum(dim=-1)
        tolerance = attention.shape[-1] * ROUNDED + 1e-5
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=tolerance, rtol=0)
    assert decoder.triu(diagonal=1).abs().max() <= ROUNDED  # an output step sees the inputs fed so far


def test_heads_are_every_layer_and_head_of_the_translation_translate_gives(transformer_client):
    models = {model["name"]: model for model in transformer_client.get("/v1/models").json()["models"]}
    architecture = models["transformer"]["architecture"]
    assert architecture["family"] == "transformer" and models["run"]["architecture"]["family"] == "rnn"
    assert models["transformer"]["heads"] and not models["run"]["heads"]  # what /v1/heads shows
    layers, count = (architecture["encoder_layers"], architecture["decoder_layers"]), architecture["heads"]
    for sentence, steering in (("a b c d e", {}), ("b c d e f g", {"prefix": "g f"})):
        request = {"sentences": [sentence], "beam_size": 3, "return_attention": True}
        if steering:
            request["prefixes"] = [steering["prefix"]]
        response = transformer_client.post("/v1/translate", json=request)
        assert response.status_code == 200, response.text
        translated = response.json()["translations"][0]
        best = translated["hypotheses"][0]
        heads = heads_of(transformer_client, sentence=sentence, beam_size=3, **steering)
        assert heads["model"] == "transformer" and heads["text"] == best["text"]
        assert heads["source_tokens"] == translated["source_tokens"]
        assert heads["outputs"] == [*best["tokens"], "</s>"] and heads["inputs"] == ["<s>", *best["tokens"]]
        check_maps(heads, layers, count)
        assert 0 <= heads["alignment_layer"] < layers[1]
        mean = torch.tensor(heads["cross"][heads["alignment_layer"]]).mean(dim=0)
        # the same map, both written with 4 decimals: each within ROUNDED of the model's, so of each other
        torch.testing.assert_close(mean, torch.tensor(best["attention"]), atol=2 * ROUNDED + 1e-5, rtol=0)
    assert heads["outputs"][:2] == ["g", "f"]  # the steered translation's heads


def test_heads_of_a_given_target_are_those_of_reading_it(transformer_client):
    """With `target`, the translation shown is the one given, read as /v1/score reads it."""
    heads = heads_of(transformer_client, sentence="a b c d", target="d c a b")
    assert heads["text"] == "d c a b" and heads["outputs"] == ["d", "c", "a", "b", "</s>"]
    scored = transformer_client.post(
        "/v1/score", json={"sentences": ["a b c d"], "targets": ["d c a b"], "return_attention": True}
    ).json()["scored"][0]
    mean = torch.tensor(heads["cross"][heads["alignment_layer"]]).mean(dim=0)
    torch.testing.assert_close(mean, torch.tensor(scored["attention"]), atol=2 * ROUNDED + 1e-5, rtol=0)
    translated = heads_of(transformer_client, sentence="a b c d")
    encoder, again = torch.tensor(heads["encoder"]), torch.tensor(translated["encoder"])
    torch.testing.assert_close(encoder, again, atol=2 * ROUNDED, rtol=0)  # the source's, whatever the output


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sentence": "a b c", "model": "run"}, "heads"),  # an RNN: one attention map a step, no heads
        ({"sentence": ""}, "sentence"),
        ({"sentence": "   "}, "sentence"),
        ({"sentence": "a " * 600}, "sentence"),  # over the server's 1,000 characters
        ({"sentence": "a b", "target": "b " * 600}, "target"),
        ({"sentence": "a b", "target": "b a", "beam_size": 2}, "beam_size"),  # a given target is not searched for
        ({"sentence": "a b", "target": "b a", "prefix": "b"}, "prefix"),
        ({"sentence": "a b", "prefix": "b", "required_phrases": [""]}, "required_phrases"),
        ({"sentence": ["a b"]}, "sentence"),
    ],
)
def test_heads_refusals_name_the_field(transformer_client, body, field):
    response = transformer_client.post("/v1/heads", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field and "\n" not in response.json()["error"]
    if field == "heads":
        assert "transformer" in response.json()["error"]

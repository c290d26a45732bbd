"""`attnmt serve`'s JSON API through FastAPI's test client: every endpoint and limit, malformed
bodies, batch invariance, concurrent clients, and the command's bad input."""

import itertools
import json
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from attnmt.cli import main
from attnmt.loading import ModelSpec, load
from attnmt.serve.app import create_app
from attnmt.serve.catalog import Catalog
from attnmt.serve.routes import router
from attnmt.serve.schemas import ErrorBody, Limits, TranslateResponse
from attnmt.serve.server import bind

SENTENCES = ["a b c", "d e f g h", "h g", "x", "b a c d e f", "q r s t"]
LIMITS = Limits(max_sentences=8, max_chars=40, max_beam=4, max_length=30, max_body_bytes=4000, batch_wait_ms=20)


@pytest.fixture(scope="module")
def catalog(reverse_run, dot_reverse_run):
    return Catalog.load(ModelSpec((reverse_run, dot_reverse_run), device="cpu").alone())


@pytest.fixture(scope="module")
def client(catalog):
    with TestClient(create_app(catalog, LIMITS), raise_server_exceptions=False) as test_client:
        yield test_client


def translate(client, sentences, **settings):
    response = client.post("/v1/translate", json={"sentences": sentences, **settings})
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def same_translations(first, second):
    """Equal text, tokens and attention shape; scores equal to float tolerance."""
    for a, b in zip(first, second, strict=True):
        assert [h["tokens"] for h in a["hypotheses"]] == [h["tokens"] for h in b["hypotheses"]]
        assert [h["text"] for h in a["hypotheses"]] == [h["text"] for h in b["hypotheses"]]
        for ha, hb in zip(a["hypotheses"], b["hypotheses"], strict=True):
            assert ha["score"] == pytest.approx(hb["score"], abs=1e-4)


def test_models_describe_the_runs_served(client):
    models = client.get("/v1/models").json()["models"]
    assert [m["name"] for m in models] == ["run", "dot"]
    assert [m["architecture"]["attention"] for m in models] == ["additive", "dot"]
    assert models[0]["training"]["step"] == 300 and models[1]["training"]["run_steps"] == 150
    assert models[0]["training"]["valid_metric"] == "bleu" and models[0]["training"]["valid_score"] is not None
    assert models[0]["architecture"]["parameters"] > 0
    assert models[0]["source_language"] and models[0]["decoding"]["beam_size"] >= 1
    assert client.get("/health").json() == {"status": "ok", "models": ["run", "dot"], "queued": 0}


def test_translate_equals_the_library_with_attention_rows_per_token(client, reverse_run):
    translator = load(ModelSpec(reverse_run, device="cpu"))
    expected = translator.translate(SENTENCES, translator.search_options(beam_size=3, n_best=2))
    answered = translate(client, SENTENCES, beam_size=3, n_best=2, return_attention=True)
    for want, got in zip(expected, answered, strict=True):
        assert got["source_tokens"] == want.source_tokens
        assert [h["text"] for h in got["hypotheses"]] == [want.text] + [alt.text for alt in want.alternatives]
        best = got["hypotheses"][0]
        attention = torch.tensor(best["attention"])
        assert attention.shape == (len(best["tokens"]) + 1, len(got["source_tokens"]))
        torch.testing.assert_close(attention.sum(dim=1), torch.ones(attention.shape[0]), atol=1e-3, rtol=0)
    assert "attention" not in translate(client, ["a b"])[0]["hypotheses"][0]


def test_a_sentence_gets_the_same_answer_alone_together_and_under_concurrency(client):
    for search in ({"beam_size": 1}, {"beam_size": 3, "n_best": 2}):
        alone = [translate(client, [sentence], **search)[0] for sentence in SENTENCES]
        same_translations(alone, translate(client, SENTENCES, **search))

        def one(sentence, search=search):
            return translate(client, [sentence], **search)[0]

        with ThreadPoolExecutor(8) as pool:  # arrive within the batching window: decoded together
            concurrent = list(pool.map(one, SENTENCES * 2))
        same_translations(alone * 2, concurrent)


@pytest.mark.parametrize("batching", [True, False])
def test_concurrent_requests_are_decoded_in_shared_batches(catalog, batching):
    """Six one-sentence requests sent at once are decoded in one batch, two at most, with batching;
    without it, one batch each."""
    # A long window, closed early by the batch bound once all six sentences are in: the requests
    # surely meet in it, and the test does not wait it out.
    limits = Limits(batch_wait_ms=5000, max_batch_sentences=len(SENTENCES), batching=batching)
    with TestClient(create_app(catalog, limits)) as test_client:
        barrier = threading.Barrier(len(SENTENCES))

        def send(sentence):
            barrier.wait()  # every request leaves at the same moment
            return translate(test_client, [sentence], beam_size=1)

        with ThreadPoolExecutor(len(SENTENCES)) as pool:
            list(pool.map(send, SENTENCES))
        metrics = scrape(test_client)
    assert metrics[("attnmt_batch_sentences_sum", ())] == len(SENTENCES)
    batches = metrics[("attnmt_batch_sentences_count", ())]
    if batching:
        assert batches <= 2
    else:
        assert batches == len(SENTENCES)


def test_examples_and_the_test_set_analysis(client, catalog, monkeypatch):
    examples = client.get("/v1/models/run/examples").json()
    assert examples["split"] == "test" and 0 < len(examples["sentences"]) <= 30
    analysis = client.get("/v1/models/run/analysis").json()
    rows = analysis["sentences"]
    assert [row["chrf"] for row in rows] == sorted(row["chrf"] for row in rows)  # worst first
    assert all(row["length"] == len(row["source"].split()) for row in rows)
    worst = rows[0]
    answered = translate(client, [worst["source"]])[0]["hypotheses"][0]["text"]
    assert answered == worst["output"]  # the run's decode settings, as /v1/translate uses by default
    assert 0 <= analysis["chrf"] <= 100 and analysis["beam_size"] >= 1
    translator = catalog.get("run").translator
    calls = []
    monkeypatch.setattr(translator, "translate", lambda *args, **kwargs: calls.append(args))
    assert client.get("/v1/models/run/analysis").json() == analysis and not calls  # computed once, kept


def test_explain_replays_the_search_that_gave_the_translation(client):
    sentence, beam = "a b c d e", 3
    body = client.post("/v1/explain", json={"sentence": sentence, "beam_size": beam}).json()
    steps = body["steps"]
    assert body["source_tokens"] == ["a", "b", "c", "d", "e"] and steps
    assert [c["tokens"][:-1] for c in steps[0]] == [[]] * len(steps[0])  # everything starts from BOS
    for previous, candidates in itertools.pairwise(steps):
        beams = {c["slot"]: c["tokens"] for c in previous if c["status"] == "kept"}
        assert sorted(beams) == list(range(len(beams))) and len(beams) <= beam
        for candidate in candidates:
            assert candidate["tokens"][:-1] == beams[candidate["parent"]]  # extends its parent
            assert sum(candidate["attention"]) == pytest.approx(1.0, abs=1e-3)
        log_probs = [c["log_prob"] for c in candidates]
        assert log_probs == sorted(log_probs, reverse=True) and len(candidates) <= 2 * beam
    finished = [c for candidates in steps for c in candidates if c["status"] == "finished"]
    best = body["hypotheses"][0]
    assert best["tokens"] + ["</s>"] in [c["tokens"] for c in finished]
    assert best["score"] == pytest.approx(max(c["score"] for c in finished), abs=1e-5)
    same = translate(client, [sentence], beam_size=beam, n_best=beam)[0]["hypotheses"]
    assert [h["tokens"] for h in same] == [h["tokens"] for h in body["hypotheses"]]


def test_explain_with_a_beam_of_one_is_greedy_search(client):
    body = client.post("/v1/explain", json={"sentence": "c a b", "beam_size": 1, "model": "dot"}).json()
    assert all(sum(c["status"] == "kept" for c in step) <= 1 for step in body["steps"])
    greedy = translate(client, ["c a b"], beam_size=1, model="dot")[0]["hypotheses"][0]
    assert body["hypotheses"][0]["tokens"] == greedy["tokens"]


@pytest.mark.parametrize(
    ("body", "status", "field", "limit"),
    [
        ({"sentences": ["a"] * 9}, 422, "sentences", 8),
        ({"sentences": ["a", "b " * 21]}, 422, "sentences[1]", 40),
        ({"sentences": ["a"], "beam_size": 5}, 422, "beam_size", 4),
        ({"sentences": ["a"], "max_length": 31}, 422, "max_length", 30),
        ({"sentences": ["a"], "beam_size": 2, "n_best": 3}, 422, "n_best", None),
        ({"sentences": ["a"], "beam_size": 0}, 422, "beam_size", None),
        ({"sentences": ["a"], "length_penalty": -1.0}, 422, "length_penalty", None),
        ({"sentences": ["a"], "length_penalty": 11.0}, 422, "length_penalty", None),
        ({"sentences": ["\ud800"]}, 422, "sentences[0]", None),
        ({"sentences": []}, 422, "sentences", None),
        ({"sentences": ["a"], "model": "../../etc"}, 404, "model", None),
        ({"sentences": "a b"}, 422, "sentences", None),
        ({"sentences": ["a"], "beam_size": "2"}, 422, "beam_size", None),
        ({"sentences": ["a"], "beam_size": 2.0}, 422, "beam_size", None),
        ({"sentences": ["a"], "return_attention": "yes"}, 422, "return_attention", None),
        ({"sentences": ["a"], "colour": "blue"}, 422, "colour", None),
        ({"sentences": ["a " * 3000]}, 413, None, 4000),
    ],
)
def test_each_limit_and_type_is_a_4xx_naming_the_field(client, body, status, field, limit):
    response = client.post("/v1/translate", content=json.dumps(body), headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()
    assert error["field"] == field and error["limit"] == limit and error["error"]
    assert "\n" not in error["error"]


def test_languages_a_request_names_must_be_the_models(client):
    [model] = client.get("/v1/models").json()["models"][:1]
    pair = {"source_language": model["source_language"], "target_language": model["target_language"]}
    requests = {
        "/v1/translate": {"sentences": ["a b"]},
        "/v1/score": {"sentences": ["a b"], "targets": ["b a"]},
        "/v1/explain": {"sentence": "a b"},
    }
    for path, body in requests.items():
        assert client.post(path, json=body | pair).status_code == 200, path  # the model's own pair
        for field in pair:
            response = client.post(path, json=body | pair | {field: "xx"})
            assert response.status_code == 422 and response.json()["field"] == field, (path, response.text)
            assert (
                f"translates {pair['source_language']} -> {pair['target_language']}, not 'xx'"
                in response.json()["error"]
            )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sentence": "a " * 30}, "sentence"),
        ({"sentence": ""}, "sentence"),
        ({"sentence": "a", "beam_size": 9}, "beam_size"),
    ],
)
def test_explain_limits(client, body, field):
    response = client.post("/v1/explain", json=body)
    assert response.status_code == 422 and response.json()["field"] == field


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"null", b"[]", b"42", b'"text"', b"\xff\xfe\x00{", b'{"sentences": ["a"]', b'{"sentences": [NaN]}'],
)
def test_malformed_bodies_are_a_422_in_json(client, raw):
    response = client.post("/v1/translate", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]


def test_a_streamed_body_over_the_limit_is_a_413(client):
    def chunks():
        yield b'{"sentences": ["'
        for _ in range(100):
            yield b"a " * 50
        yield b'"]}'

    response = client.post("/v1/translate", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["limit"] == 4000


def test_unknown_routes_and_methods_answer_in_json(client):
    assert client.get("/v1/nothing").json()["error"] == "Not Found"
    assert client.get("/v1/translate").status_code == 405 and client.get("/v1/translate").json()["error"]
    assert client.get("/v1/models/nope/examples").status_code == 404


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "model",
    "sentences",
    "beam_size",
    "n_best",
    "max_length",
    "length_penalty",
    "return_attention",
    "sentence",
    "target",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(["/v1/translate", "/v1/explain", "/v1/heads"]),
    body=st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=5) | JSON_VALUES,
)
def test_no_json_shape_makes_the_server_fail(client, path, body):
    response = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert response.status_code in (200, 404, 413, 422), response.text
    if response.status_code != 200:
        assert set(response.json()) == {"error", "field", "limit"}


def test_a_full_queue_and_a_slow_answer_are_a_503(catalog, monkeypatch):
    entered, release = threading.Event(), threading.Event()
    served = catalog.get("dot").translator
    original = served.translate

    def slow_translate(*args, **kwargs):
        entered.set()
        release.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(served, "translate", slow_translate)
    limits = Limits(max_queue=1, timeout_s=1.0, batching=False)
    body = {"sentences": ["a b"], "model": "dot"}
    with TestClient(create_app(catalog, limits)) as test_client, ThreadPoolExecutor(2) as pool:
        first = pool.submit(test_client.post, "/v1/translate", json=body)
        assert entered.wait(5)  # the worker holds the first request
        second = pool.submit(test_client.post, "/v1/translate", json=body)
        while not test_client.get("/health").json()["queued"]:  # the second waits in the queue
            threading.Event().wait(0.01)
        full = test_client.post("/v1/translate", json=body)
        assert full.status_code == 503 and full.json()["field"] == "server"
        for waited in (first.result(), second.result()):
            assert waited.status_code == 503 and waited.json()["field"] == "timeout_s"
        release.set()
        while test_client.get("/health").json()["queued"]:  # the given-up request leaves the queue, undecoded
            threading.Event().wait(0.01)
        after = test_client.post("/v1/translate", json=body)
        assert after.status_code == 200, after.text  # the worker went on


def scrape(client) -> dict[tuple[str, tuple], float]:
    """/metrics parsed as Prometheus's text format: (sample name, sorted labels) -> value."""
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def moved(before: dict, after: dict, name: str, **labels) -> float:
    """How much a sample grew between two scrapes (absent counts as 0)."""
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_are_prometheus_text_whose_counters_move_with_the_requests(client):
    before = scrape(client)
    translate(client, ["a b", "c d e", "f"])
    translate(client, ["g h"])
    assert client.post("/v1/translate", json={"sentences": []}).status_code == 422
    oversized = client.post(
        "/v1/translate", content=b"{" + b" " * 5000 + b"}", headers={"content-type": "application/json"}
    )
    assert oversized.status_code == 413
    assert client.get("/v1/models/run/examples").status_code == 200
    assert client.get("/v1/nothing/here").status_code == 404
    assert client.get("/static/app.js").status_code == 200
    after = scrape(client)

    assert moved(before, after, "attnmt_requests_total", path="/v1/translate", status="200") == 2
    assert moved(before, after, "attnmt_requests_total", path="/v1/translate", status="422") == 1
    assert moved(before, after, "attnmt_requests_total", path="/v1/translate", status="413") == 1
    # labelled by the route that answered, not by the path the client typed
    assert moved(before, after, "attnmt_requests_total", path="/v1/models/{name}/examples", status="200") == 1
    assert moved(before, after, "attnmt_requests_total", path="/static", status="200") == 1
    assert moved(before, after, "attnmt_requests_total", path="other", status="404") == 1
    assert moved(before, after, "attnmt_requests_total", path="/metrics", status="200") == 1  # the first scrape
    typed = ("/v1/models/run", "/v1/nothing", "/static/")
    assert not any(dict(labels).get("path", "").startswith(typed) for _, labels in after)

    assert moved(before, after, "attnmt_request_seconds_count", path="/v1/translate") == 4
    assert moved(before, after, "attnmt_request_seconds_sum", path="/v1/translate") > 0
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in after.items()
        if name == "attnmt_request_seconds_bucket" and dict(labels)["path"] == "/v1/translate"
    )
    assert [value for _, value in buckets] == sorted(value for _, value in buckets)  # cumulative
    assert buckets[-1] == (float("inf"), after[("attnmt_request_seconds_count", (("path", "/v1/translate"),))])

    # one request after the other: each decoded as its own batch
    assert moved(before, after, "attnmt_batch_sentences_count") == 2
    assert moved(before, after, "attnmt_batch_sentences_sum") == 4
    assert after[("attnmt_queue_requests", ())] == 0


def test_every_endpoint_answers_with_the_body_its_schema_model_documents(client, transformer_run):
    """Each JSON route's body, success and refusal, validates against its model (which forbids
    keys it does not declare), and /docs names that model. /v1/heads answers of a transformer."""
    transformers = Catalog.load([ModelSpec(transformer_run, device="cpu")])
    routes = {
        (route.path, method): route
        for route in router.routes
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods
    }
    answered = {
        ("/health", "GET"): client.get("/health"),
        ("/v1/models", "GET"): client.get("/v1/models"),
        ("/v1/translate", "POST"): client.post(
            "/v1/translate", json={"sentences": SENTENCES[:3], "beam_size": 3, "n_best": 2, "return_attention": True}
        ),
        ("/v1/explain", "POST"): client.post("/v1/explain", json={"sentence": "a b c", "beam_size": 2}),
        ("/v1/score", "POST"): client.post(
            "/v1/score", json={"sentences": ["a b c"], "targets": ["c b a"], "return_attention": True}
        ),
        ("/v1/models/{name}/examples", "GET"): client.get("/v1/models/dot/examples"),
        ("/v1/models/{name}/analysis", "GET"): client.get("/v1/models/dot/analysis"),
    }
    with TestClient(create_app(transformers, LIMITS), raise_server_exceptions=False) as heads_client:
        answered["/v1/heads", "POST"] = heads_client.post("/v1/heads", json={"sentence": "a b c", "beam_size": 2})
    assert set(answered) == set(routes)  # a new endpoint is checked here too
    documented = client.get("/openapi.json").json()["paths"]
    for (path, method), response in answered.items():
        model = routes[path, method].response_model
        assert response.status_code == 200, response.text
        model.model_validate_json(response.content)
        schema = documented[path][method.lower()]["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema["$ref"] == f"#/components/schemas/{model.__name__}"
    TranslateResponse.model_validate_json(client.post("/v1/translate", json={"sentences": ["a b"]}).content)
    refusals = [
        client.post("/v1/translate", json={"sentences": ["a"], "beam_size": 5}),
        client.post("/v1/explain", json={"sentence": "a", "model": "nope"}),
        client.post("/v1/score", json={"sentences": ["a"], "targets": ["a", "b"]}),
        client.get("/v1/models/nope/analysis"),
        client.post("/v1/translate", content=b"{" + b" " * 5000 + b"}", headers={"content-type": "application/json"}),
        client.post("/v1/heads", json={"sentence": "a b"}),  # an RNN run: no heads
    ]
    assert [response.status_code for response in refusals] == [422, 404, 422, 404, 413, 422]
    for response in refusals:
        ErrorBody.model_validate_json(response.content)


def test_the_page_and_its_files_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and 'src="/static/app.js"' in page.text
    assert "http" not in re.sub(r"http://www\.w3\.org/2000/svg", "", client.get("/static/app.js").text)  # no CDN
    assert client.get("/docs").status_code == 200
    assert "/v1/translate" in client.get("/openapi.json").json()["paths"]


# --- the command's bad input --------------------------------------------------------------


def test_serve_rejects_a_missing_or_untrained_run(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "missing"), "--port", "0"]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["serve", str(tmp_path / "empty"), "--port", "0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("attnmt: error: ") for line in lines)
    assert "missing" in lines[0] and "empty" in lines[1]


def test_serve_rejects_two_runs_with_one_name(reverse_run, tmp_path, capsys):
    twin = tmp_path / "other" / reverse_run.name
    twin.parent.mkdir()
    twin.symlink_to(reverse_run)
    assert main(["serve", str(reverse_run), str(twin), "--port", "0"]) == 2
    assert "both be served as 'run'" in capsys.readouterr().err


def test_serve_rejects_a_port_in_use(reverse_run, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", str(reverse_run), "--port", str(port)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"--port: cannot listen on 127.0.0.1:{port}" in error


def test_the_port_accepts_connections_from_the_moment_it_is_named():
    # The start-up line names the port before uvicorn runs: a client that connects at once must
    # wait in the backlog, not be refused.
    with bind("127.0.0.1", 0) as sock, socket.create_connection(sock.getsockname()[:2], timeout=5):
        pass


def test_serve_rejects_impossible_limits(reverse_run, capsys):
    assert main(["serve", str(reverse_run), "--max-sentences", "0"]) == 2
    assert main(["serve", str(reverse_run), "--timeout", "-1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "attnmt: error: --max-sentences: expected a positive number, got 0",
        "attnmt: error: --timeout: expected a positive number, got -1",
    ]

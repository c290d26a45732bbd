"""One set of weights through both toolkits: an attnmt model of OpenNMT-py's architecture
converted into an OpenNMT-py checkpoint scores and translates as it does in attnmt."""

import json
import subprocess

import pytest
import torch

from attnmt.checkpoint import load_trained
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.utils import UserError
from attnmt.vocab import BOS, Vocab
from benchmarks.peers import __main__ as peers_cli
from benchmarks.peers import attnmt_peer
from benchmarks.peers import opennmt as opennmt_module
from benchmarks.peers.attnmt_peer import Attnmt
from benchmarks.peers.data import prepare_data
from benchmarks.peers.report import same_weights_rows
from benchmarks.peers.same_weights import (
    SEARCHES,
    SameWeightsOptions,
    check_convertible,
    same_weights,
    to_opennmt,
    write_for_opennmt,
)
from benchmarks.peers.system import PeerError, Setup
from tests.data_helpers import SHARED_DATA, needs_multi30k
from tests.peer_helpers import TINY, installed_peer, write_tiny_task

RACE = "configs/multi30k-en-de-race.yaml"
OPENNMT_FUNCTION = ["model.attentional_tanh=false", "model.attention_bias=true"]
# Teacher-forced log-probabilities of OpenNMT-py's model, run in its own environment:
# argv: checkpoint, then a JSON list of [source tokens, target tokens] pairs.
SCORE_SCRIPT = """
import argparse, json, sys
import torch
from onmt.model_builder import load_test_model
torch.serialization.add_safe_globals([argparse.Namespace])
options = argparse.Namespace(models=[sys.argv[1]], world_size=1, gpu=-1, gpu_ranks=[], precision="fp32")
vocabs, model, _ = load_test_model(options, model_path=sys.argv[1])
scores = []
for source, target in json.loads(sys.argv[2]):
    src = torch.tensor([vocabs["src"][token] for token in source]).view(1, -1, 1)
    tgt = torch.tensor([vocabs["tgt"]["<s>"]] + [vocabs["tgt"][token] for token in target] + [0]).view(1, -1, 1)
    with torch.no_grad():
        outputs, _ = model(src, tgt, torch.tensor([len(source)]), bptt=False)  # reads tgt[:, :-1]
        scores.append(torch.log_softmax(model.generator(outputs[0]), dim=-1).tolist())
print(json.dumps(scores))
"""


def tiny_setup(data) -> Setup:
    return Setup(data_dir=data, decode_batch_sentences=4, max_output_length=20, threads=1)


def train_tiny(data, run_dir, *settings: str) -> None:
    """The race config's model at a tiny size on the tiny task, trained 60 updates: far from
    perfect, so its outputs depend on every part of the function."""
    options = [
        "data.corpus=files",
        *(
            f"data.{split}={data / name}"
            for split, name in (("train", "train"), ("valid", "valid"), ("test", "test2016"))
        ),
        "data.min_freq=1",
        "data.batch_tokens=100000",
        "data.max_batch_sentences=16",
        "model.embedding_size=16",
        "model.encoder_hidden=16",
        "model.decoder_hidden=32",
        "train.lr=0.01",
        "train.max_steps=60",
        "train.valid_every=60",
        "train.valid_bleu_sentences=8",
        "train.threads=1",
        f"train.run_dir={run_dir}",
        *settings,
    ]
    assert main(["train", RACE, *(item for option in options for item in ("--set", option))]) == 0


def test_a_model_that_computes_otherwise_is_refused_naming_the_setting(tmp_path):
    config = load_config(RACE)
    with pytest.raises(UserError, match=r"model\.attentional_tanh: True; OpenNMT-py needs False"):
        check_convertible(config.model)
    opennmt = load_config(RACE, OPENNMT_FUNCTION).model
    check_convertible(opennmt)
    for setting, value, named in [
        ("rnn", "lstm", r"model\.rnn"),
        ("attention", "general", r"model\.attention"),
        ("bridge", "tanh", r"model\.bridge"),
        ("encoder_layers", 2, r"model\.encoder_layers: 2 against model\.decoder_layers 1"),
        ("attention_size", 64, r"model\.attention_size: 64"),
    ]:
        with pytest.raises(UserError, match=named):
            check_convertible(opennmt.model_copy(update={setting: value}))
    data = write_tiny_task(tmp_path / "data")
    train_tiny(data, tmp_path / "tanh")
    with pytest.raises(UserError, match=r"model\.attentional_tanh"):
        write_for_opennmt(tmp_path / "tanh", tmp_path / "weights.pt")
    assert not (tmp_path / "weights.pt").exists()


@pytest.mark.parametrize("attention_bias", [True, False])
def test_converted_weights_score_and_translate_the_same_in_opennmt_py(attention_bias, tmp_path):
    """Per target token the same log-probabilities from both toolkits, and the same translations,
    greedy and with beam 5 where both stop at the best hypothesis's end with no penalty."""
    data = write_tiny_task(tmp_path / "data")
    setup = tiny_setup(data)
    harness, opennmt = installed_peer("opennmt-py", setup)
    attnmt = Attnmt()
    harness.systems.append(attnmt)
    harness.install()
    run_dir = tmp_path / "attnmt"
    train_tiny(data, run_dir, "model.attentional_tanh=false", f"model.attention_bias={str(attention_bias).lower()}")
    trained = load_trained(run_dir)
    converted = to_opennmt(harness, opennmt, trained.checkpoint, tmp_path / "opennmt")

    sources = (data / "test2016.en").read_text(encoding="utf-8").splitlines()
    references = (data / "test2016.de").read_text(encoding="utf-8").splitlines()
    pairs = [(source.split(), reference.split()) for source, reference in zip(sources, references, strict=True)]
    python = harness.pythons[opennmt.name].absolute()
    done = subprocess.run(
        [str(python), "-c", SCORE_SCRIPT, str(converted), json.dumps(pairs)], capture_output=True, text=True, check=True
    )
    theirs = json.loads(done.stdout)
    src_vocab, tgt_vocab = (Vocab.load(run_dir / f"{side}.vocab.json") for side in ("src", "tgt"))
    for (source, target), their_scores in zip(pairs, theirs, strict=True):
        src, tgt_in = torch.tensor([src_vocab.encode(source)]), torch.tensor([[BOS, *tgt_vocab.encode(target)]])
        with torch.no_grad():
            logits, _ = trained.model(src, torch.tensor([len(source)]), tgt_in)
        ours = torch.log_softmax(logits[0], dim=-1)  # (T + 1, V): every target token and </s>
        torch.testing.assert_close(ours, torch.tensor(their_scores), atol=1e-4, rtol=1e-4)

    for beam, our_search, their_search in [
        (1, {}, {}),
        (5, {"stopping": "best_finished", "alpha": 0.0}, {"length_penalty": "none", "alpha": 0.0}),
    ]:
        ours = harness.translate(attnmt, tmp_path / "ours", trained.checkpoint, "test2016", beam, search=our_search)
        theirs = harness.translate(opennmt, tmp_path / "theirs", converted, "test2016", beam, search=their_search)
        our_lines, their_lines = (
            next(folder.glob(f"test2016-beam{beam}*.txt")).read_text(encoding="utf-8").splitlines()
            for folder in (tmp_path / "ours", tmp_path / "theirs")
        )
        assert len(our_lines) == TINY["test2016"] and our_lines == their_lines
        assert ours["bleu_tok_lc"] == theirs["bleu_tok_lc"]


@needs_multi30k
def test_the_same_weights_mode_decodes_one_model_through_both_and_keeps_it(tmp_path, monkeypatch):
    """The harness's attnmt model of the race, tiny and barely trained, on the shared Multi30k
    tokens: converted, decoded by both toolkits with each search, every output line the same;
    a second invocation reuses the trained model."""
    monkeypatch.setenv("ATTNMT_DATA", str(SHARED_DATA))
    data = prepare_data(tmp_path / "data")
    small = Setup(
        data_dir=data, embedding_size=16, encoder_hidden=16, decoder_hidden=32, max_output_length=8, threads=1
    )
    harness, opennmt = installed_peer("opennmt-py", small)
    harness.work = tmp_path / "work"
    harness.systems, harness.pythons["attnmt"] = [Attnmt(), opennmt], Attnmt().install(tmp_path)
    for module in (attnmt_peer, opennmt_module):  # three batchings each, not six: a shorter test
        monkeypatch.setattr(module, "BATCH_SENTENCES", (128,))
        monkeypatch.setattr(module, "BATCH_TOKENS", (2000,))
    saved = []
    results = same_weights(harness, SameWeightsOptions(updates=3, seeds=(1,), repeats=2), saved.append)
    (run,) = results["runs"]
    assert saved and run["updates"] == 3 and [row["search"] for row in run["rows"]] == list(SEARCHES)
    for row in run["rows"]:
        assert row["identical_outputs"] == 1.0
        ours, theirs = row["systems"]["attnmt"], row["systems"]["opennmt-py"]
        assert ours["bleu_tok_lc"] == theirs["bleu_tok_lc"] and ours["generated_tokens"] == theirs["generated_tokens"]
        assert len(ours["sentences_per_s"]["values"]) == 2 and theirs["sentences_per_s"]["median"] > 0
        # every batching tried once before the timed turns, and the fastest one timed
        for system in (ours, theirs):
            screen = system["batching"]["screen"]
            assert list(screen) == ["64 sentences", "128 sentences", "2,000 tokens"]
            fastest = max(screen, key=lambda name: screen[name]["sentences_per_s"])
            assert system["batching"]["chosen"] == fastest
            assert system["batching"]["options"] == screen[fastest]["options"]
        assert {name: found["same_as_first"] for name, found in ours["batching"]["screen"].items()} == dict.fromkeys(
            ours["batching"]["screen"], 1.0
        )  # attnmt's batching changes its speed only
    header, lines = same_weights_rows(results)
    assert header[3] == "identical outputs" and [line[3] for line in lines] == ["100.0%", "100.0%"]
    assert lines[0][-1] == f"{run['rows'][0]['systems']['attnmt']['batching']['chosen']} / " + str(
        run["rows"][0]["systems"]["opennmt-py"]["batching"]["chosen"]
    )
    record = tmp_path / "work" / "same-weights" / "seed-1" / "attnmt" / "trained.json"
    stamp = record.stat().st_mtime_ns
    same_weights(harness, SameWeightsOptions(updates=3, seeds=(1,), repeats=1))
    assert record.stat().st_mtime_ns == stamp  # kept, not trained again
    harness.systems = [opennmt]
    with pytest.raises(PeerError, match="same-weights: needs the systems attnmt and opennmt-py"):
        same_weights(harness, SameWeightsOptions(updates=3))


def test_the_same_weights_mode_races_attnmt_and_opennmt_py_only():
    args = peers_cli.parse_args(["same-weights", "--updates", "10", "--repeats", "2"])
    assert (args.systems, args.updates, args.repeats, args.seeds) == (["attnmt", "opennmt-py"], 10, 2, (1,))
    assert peers_cli.default_results("same-weights", args.systems).name == "peers-same-weights.json"

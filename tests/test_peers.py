"""The peer benchmark's harness: what it measures, how it fails, and every system through its probe.

A stand-in system whose commands are tiny scripts exercises the harness. OpenNMT-py and JoeyNMT
run for real on a tiny task, from the environments the benchmark installs them into (under the
attnmt cache's `peers/`; CI installs them there first, see `.ci/run`); without those
environments their tests skip, except under CI, where a missing peer is a failure.
"""

import copy
import json
import math
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

from attnmt.config import DecodeConfig, ModelConfig
from attnmt.models.seq2seq import build_model
from attnmt.search.options import SearchOptions
from attnmt.utils import UserError
from benchmarks.flops import flop_rates
from benchmarks.peers import __main__ as peers_cli
from benchmarks.peers.arithmetic import arithmetic
from benchmarks.peers.attnmt_peer import RECIPE_CONFIG, RECIPE_UPDATES, Attnmt
from benchmarks.peers.data import prepare_data
from benchmarks.peers.harness import Harness, read_events, run_command, training_speed
from benchmarks.peers.joeynmt import JoeyNMT
from benchmarks.peers.opennmt import OpenNMT
from benchmarks.peers.opennmt_recipes import RECIPE, OpenNMTAdamRecipe, adam_recipe
from benchmarks.peers.quality import QualityOptions, quality, schedule_pace
from benchmarks.peers.report import (
    bootstrap_rows,
    equal_updates_rows,
    quality_curves,
    quality_rows,
    save_figure,
    stopping_rows,
)
from benchmarks.peers.speed import SpeedOptions, speed
from benchmarks.peers.stopping import StoppingOptions, stopping
from benchmarks.peers.system import PROBES, Command, PeerError, PeerSystem, Setup, run_pip
from tests.data_helpers import SHARED_DATA, needs_multi30k
from tests.peer_helpers import TINY, installed_peer, write_tiny_task

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, sys, time
mode, out = sys.argv[1], sys.argv[2]
if mode == "train":
    steps, events = int(sys.argv[3]), open(out, "w")
    events.write(json.dumps({"started": time.perf_counter()}) + "\\n")
    events.write(json.dumps({"parameters": 42}) + "\\n")
    for step in range(1, steps + 1):
        time.sleep(0.001)
        events.write(json.dumps({"step": step, "time": time.perf_counter(), "target_tokens": 10 * step}) + "\\n")
    open(sys.argv[4], "w").write("checkpoint")
else:
    source, result = sys.argv[3], sys.argv[4]
    lines = open(source).read().splitlines()
    open(out, "w").write("".join(line + "\\n" for line in lines))
    json.dump({"seconds": 0.5, "sentences": len(lines), "generated_tokens": sum(len(l.split()) for l in lines)},
              open(result, "w"))
"""


class StandIn(PeerSystem):
    """A system whose training writes events and one checkpoint, and whose translation is the reference."""

    version = "1"

    def __init__(self, name: str = "stand-in", fail_install: bool = False):
        self.name, self.fail_install = name, fail_install
        self.seeds = []  # the seed of every training run, in order

    def install(self, env_dir: Path) -> Path:
        if self.fail_install:
            raise PeerError(f"{self.name}: pip install stand-in==1 failed: ERROR: No matching distribution found")
        return Path(sys.executable)

    def arithmetic_shapes(self, setup):
        return ModelConfig(embedding_size=4, encoder_hidden=3, decoder_hidden=5, decoder="luong", attention="general")

    def prepare(self, setup, work, python):
        (work / "probe.py").write_text(SCRIPT)

    def train_command(self, setup, work, python, *, steps, max_minutes, save_every, events):
        self.seeds.append(setup.seed)
        steps = steps or 5
        checkpoint = work / f"model-{steps}.ckpt"
        return Command([str(python), "probe.py", "train", str(events), str(steps), str(checkpoint)], work)

    def checkpoints(self, work):
        return {int(path.stem.split("-")[1]): path for path in work.glob("model-*.ckpt")}

    def translate_command(
        self, setup, work, python, *, checkpoint, source, output, beam_size, result, attention_focus=None
    ):
        (work / "probe.py").write_text(SCRIPT)
        reference = source.with_suffix(f".{setup.tgt_lang}")  # "translates" into the reference itself
        return Command([str(python), "probe.py", "translate", str(output), str(reference), str(result)], work)


@pytest.fixture
def setup(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "valid", "test2016", "test2017"):
        for lang, text in (("en", "a man runs ."), ("de", "ein mann läuft .")):
            (data / f"{split}.{lang}").write_text(f"{text}\n{text} fast\n")
    return Setup(data_dir=data)


def test_training_speed_counts_the_tokens_after_the_warmup_over_their_time():
    steps = [{"step": i, "time": 10.0 + i, "target_tokens": 100 * i} for i in range(1, 6)]
    measured = training_speed(steps, warmup=2)
    # steps 3, 4, 5: 1,200 tokens, from the end of step 2 (t=12) to the end of step 5 (t=15)
    assert measured == {"steps": 3, "target_tokens": 1200, "seconds": 3.0, "tokens_per_s": 400.0}
    with pytest.raises(PeerError, match="warm-up"):
        training_speed(steps, warmup=5)
    with pytest.raises(PeerError, match=">= 1"):
        training_speed(steps, warmup=0)


def test_speed_mode_alternates_repeats_and_reports_medians(setup, tmp_path):
    harness = Harness(setup, [StandIn("a"), StandIn("b")], tmp_path / "work", say=lambda _: None)
    harness.install()
    results = speed(harness, SpeedOptions(repeats=3, warmup=2, steps=4, decode_updates=3))
    assert set(results["systems"]) == {"a", "b"}
    system = results["systems"]["a"]
    assert system["parameters"] == 42 and len(system["training_repeats"]) == 3
    assert system["training_repeats"][0]["target_tokens"] == 30 + 40 + 50 + 60
    spread = system["training"]["tokens_per_s"]
    assert spread["min"] <= spread["median"] <= spread["max"] and len(spread["values"]) == 3
    flops = system["arithmetic"]["training_flops_per_target_token"]
    assert system["training"]["gflops_per_s"]["median"] == pytest.approx(spread["median"] * flops / 1e9)
    assert set(system["decoding"]) == {"beam1", "beam5"}
    assert system["decoding"]["beam1"]["bleu_tok_lc"] == pytest.approx(100.0)
    assert system["decoding"]["beam1"]["tokens_per_s"]["median"] == pytest.approx(2 * (4 + 5) / 0.5 / 2)


def test_arithmetic_counts_each_systems_shapes_on_the_training_split(setup):
    """Forward FLOPs per target token (EOS counted) of the system's shapes over the training split,
    with the tokens a system appends to each source counted; the vocabulary is the types seen at
    least min_freq (2) times plus four specials."""
    system = StandIn()
    counted = arithmetic(system, setup)
    # train.de: "ein mann läuft ." twice (4 types kept), "fast" once
    assert counted["target_vocabulary"] == 4 + 4
    rates = flop_rates(system.arithmetic_shapes(setup), 8)
    sources, targets = [4, 5], [4 + 1, 5 + 1]
    assert counted["forward_flops_per_target_token"] == round(rates.forward(sources, targets) / sum(targets))
    assert counted["training_flops_per_target_token"] == round(3 * rates.forward(sources, targets) / sum(targets))
    system.source_extra_tokens = 1
    with_eos = arithmetic(system, setup)["forward_flops_per_target_token"]
    assert with_eos == round(rates.forward([5, 6], targets) / sum(targets))


NOT_SHAPES = {"init", "init_scale", "dropout"}  # what the test does not compare as shapes


def test_the_attnmt_system_is_opennmt_pys_model():
    """The comparison on identical work: attnmt's row has OpenNMT-py's shapes, the bridge included,
    and so its parameter count; the Bahdanau row is the cheaper model."""
    setup = Setup(data_dir=Path("unused"))
    ours, theirs = Attnmt(name="attnmt").arithmetic_shapes(setup), OpenNMT().arithmetic_shapes(setup)
    assert ours.model_dump(exclude=NOT_SHAPES) == theirs.model_dump(exclude=NOT_SHAPES)
    assert ours.init == "uniform"  # OpenNMT-py's param_init 0.1
    vocabulary = 6000
    parameters = [
        sum(p.numel() for p in build_model(shapes, 5000, vocabulary).parameters()) for shapes in (ours, theirs)
    ]
    assert parameters[0] == parameters[1], parameters
    wanted = theirs.model_dump()

    def differences(name):
        earlier = Attnmt(name=name).arithmetic_shapes(setup).model_dump()
        return {key for key, value in earlier.items() if value != wanted[key]} - NOT_SHAPES

    # the earlier races' models: OpenNMT-py's shapes, but not its function, or not its training
    assert differences("attnmt-tanh") == {"attentional_tanh", "attention_bias", "feed_dropout"}
    assert differences("attnmt-feed-before-dropout") == {"feed_dropout"}
    assert ours.feed_dropout  # in training OpenNMT-py feeds the next step the dropped attentional vector
    cheaper = Attnmt(name="attnmt-bahdanau").arithmetic_shapes(setup)
    assert flop_rates(cheaper, vocabulary).per_target_token < flop_rates(ours, vocabulary).per_target_token
    with pytest.raises(ValueError, match="unknown attnmt system"):
        Attnmt(name="attnmt-transformer")


def test_attnmt_recipe_is_the_luong_configs_model_and_schedule_on_the_shared_tokens(tmp_path):
    """The own-recipe row trains configs/multi30k-en-de-luong.yaml's model, schedule and batch size,
    read from the config, on the benchmark's word tokens; the cosine ends where the schedule is
    fitted, which the notes say."""
    shipped = yaml.safe_load(RECIPE_CONFIG.read_text(encoding="utf-8"))
    system, setup = Attnmt(name="attnmt-recipe"), Setup(data_dir=Path("unused"))
    config = system.config(setup, tmp_path, steps=None, max_minutes=50.0, save_every=250)
    assert config["model"] == shipped["model"] and ModelConfig(**config["model"]).tie_embeddings
    for key in ("lr", "lr_schedule", "warmup_steps", "min_lr", "label_smoothing"):
        assert config["train"][key] == shipped["train"][key], key
    assert config["train"]["max_steps"] == RECIPE_UPDATES and config["train"]["max_minutes"] == 50.0
    notes = system.architecture_notes
    system.fit_schedule(5321)
    assert system.config(setup, tmp_path, steps=None, max_minutes=50.0, save_every=250)["train"]["max_steps"] == 5321
    assert "5,321" in system.architecture_notes and system.architecture_notes != notes
    assert config["data"]["batch_tokens"] == shipped["data"]["batch_tokens"]
    assert config["data"]["max_batch_sentences"] is None and config["data"]["tokenizer"] == "word"
    assert system.config(setup, tmp_path, steps=7, max_minutes=None, save_every=250)["train"]["max_steps"] == 7
    # the Setup's own attnmt row keeps the Setup's optimizer
    plain = Attnmt(name="attnmt").config(setup, tmp_path, steps=None, max_minutes=50.0, save_every=250)
    assert plain["train"]["lr_schedule"] == "constant" and plain["data"]["max_batch_sentences"] == 64


def test_a_race_of_the_recipe_from_before_its_config_changed_is_not_resumed(tmp_path, monkeypatch):
    """attnmt-recipe's notes hold the settings read from the config, so a race run with another
    config (the committed race of recipes ran the GRU recipe) is refused, not continued."""
    committed = ROOT / "docs" / "results" / "peers-quality-recipes.json"
    earlier = json.loads(committed.read_text(encoding="utf-8"))
    system = Attnmt(name="attnmt-recipe")
    with pytest.raises(UserError, match="another architecture of attnmt-recipe"):
        peers_cli.finished_runs(committed, {"setup": earlier["setup"]}, QualityOptions(50.0, 250, (1,)), [system])
    gru = yaml.safe_load(RECIPE_CONFIG.read_text(encoding="utf-8"))
    gru["model"]["rnn"] = "gru"
    (tmp_path / "gru.yaml").write_text(yaml.safe_dump(gru), encoding="utf-8")
    monkeypatch.setattr("benchmarks.peers.attnmt_peer.RECIPE_CONFIG", tmp_path / "gru.yaml")
    assert Attnmt(name="attnmt-recipe").architecture_notes != system.architecture_notes


def test_a_race_of_own_recipes_has_its_own_results_file_and_is_never_mixed(capsys):
    assert peers_cli.default_results("quality", ["attnmt", "opennmt-py"]).name == "peers-quality-identical.json"
    assert peers_cli.default_results("quality", peers_cli.RECIPES).name == "peers-quality-recipes.json"
    assert peers_cli.parse_args(["quality"]).systems == ["attnmt", "attnmt-bahdanau", "opennmt-py", "joeynmt"]
    with pytest.raises(SystemExit) as exited:
        peers_cli.parse_args(["quality", "--systems", "attnmt,opennmt-py-recipe"])
    assert exited.value.code == 2 and "not both" in capsys.readouterr().err


def test_a_system_that_cannot_install_is_one_line_and_the_others_are_still_measured(setup, tmp_path):
    harness = Harness(setup, [StandIn("a"), StandIn("broken", fail_install=True)], tmp_path / "w", say=lambda _: None)
    harness.install()
    results = speed(harness, SpeedOptions(repeats=1, warmup=1, steps=2, decode_updates=2))
    assert set(results["systems"]) == {"a"}
    assert harness.errors == {"broken": "broken: pip install stand-in==1 failed: ERROR: No matching distribution found"}


@pytest.fixture
def quick_pace(monkeypatch):
    """The race's pace probe on a tiny model: the tests check that it is recorded, not how fast."""
    from attnmt.pace import ProbeModel, pace_probe
    from benchmarks.peers import quality as quality_mode

    tiny = ProbeModel(embedding_size=8, encoder_hidden=8, decoder_hidden=16, vocabulary=20, sentences=2)
    monkeypatch.setattr(quality_mode, "pace_probe", lambda: pace_probe(updates=1, warmup=0, reference=tiny))


def test_quality_mode_races_every_seed_and_keeps_finished_runs(setup, tmp_path, quick_pace):
    system = StandIn("a")
    harness = Harness(setup, [system], tmp_path / "w", say=lambda _: None)
    harness.install()
    options = QualityOptions(minutes=0.1, save_every=1, seeds=(1, 2))
    saved = []
    first = quality(harness, options, on_run=lambda race: saved.append(copy.deepcopy(race)))
    entry = first["systems"]["a"]
    assert [run["seed"] for run in entry["runs"]] == [1, 2] and system.seeds == [1, 2]
    run = entry["runs"][0]
    assert run["updates"] == 5 and [point["step"] for point in run["curve"]] == [5]
    assert run["best"]["valid_bleu_tok_lc"] == pytest.approx(100.0)
    assert set(run["test2016"]) == {"beam1", "beam5"} and "git_commit" in run["provenance"]
    # a race spans invocations: each run says when it started and the code and load at both ends
    assert run["started"] and run["provenance_at_start"]["git_commit"] == run["provenance"]["git_commit"]
    assert "load_average" in run["provenance_at_start"] and "dirty_paths" in run["provenance"]
    # and the machine's pace in the race's threads, taken before it trained
    assert run["pace"]["threads"] == setup.threads and run["pace"]["seconds_per_update"] > 0
    assert entry["summary"]["seeds"] == [1, 2] and entry["summary"]["test2016"]["beam5"]["median"] == pytest.approx(100)
    # the results after each run, so that a file written there survives an interruption
    assert [[r["seed"] for r in race["systems"]["a"]["runs"]] for race in saved] == [[1], [1, 2]]

    done = tmp_path / "w" / "quality" / "a" / "seed-1" / "result.json"
    stamp = done.stat().st_mtime_ns
    assert quality(harness, options) == first  # resumed from the work folder: not trained again
    assert done.stat().st_mtime_ns == stamp and system.seeds == [1, 2]

    shutil.rmtree(tmp_path / "w" / "quality")  # a new session: only the committed results remain
    third = quality(harness, QualityOptions(minutes=0.1, save_every=1, seeds=(1, 2, 3)), first["systems"])
    assert [run["seed"] for run in third["systems"]["a"]["runs"]] == [1, 2, 3] and system.seeds == [1, 2, 3]
    assert third["systems"]["a"]["runs"][:2] == entry["runs"]

    figure = quality_curves(third)  # validation BLEU against minutes, one line per system and seed
    assert len(figure.axes[0].lines) == 3
    line = figure.axes[0].lines[0]
    assert list(line.get_xdata()) == [point["minutes"] for point in run["curve"]]
    assert save_figure(figure, tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")
    header, rows = quality_rows(third)
    assert header[3] == "seeds" and rows[0][3] == "1, 2, 3" and rows[0][-1] == "100.00 (100.00-100.00)"

    system.architecture_notes = "another model under the same name"
    quality(harness, QualityOptions(minutes=0.1, save_every=1, seeds=(3,)))
    assert system.seeds == [1, 2, 3, 3]  # the folder's run is of another architecture: trained again


def test_the_curves_at_equal_updates_average_the_second_half_of_the_checkpoints_every_run_reached():
    def run(seed, updates, scores):
        return {"seed": seed, "updates": updates, "curve": [{"step": s, "valid_bleu_tok_lc": b} for s, b in scores]}

    race = {
        "systems": {
            "fast": {"version": "1", "runs": [run(1, 1100, [(250, 9), (500, 10), (750, 14), (1000, 20), (1100, 30)])]},
            "slow": {"version": "2", "runs": [run(1, 800, [(250, 1), (500, 12), (750, 13), (800, 7)])]},
        }
    }
    header, rows = equal_updates_rows(race)
    # every run has 250, 500 and 750; the second half of those: 500 and 750
    assert header[2] == "mean valid BLEU, updates 500-750"
    assert rows == [
        ["fast 1", "1", "12.00", "10.00-14.00", "350", "25.00"],
        ["slow 2", "1", "12.50", "12.00-13.00", "50", "7.00"],
    ]


def test_a_race_whose_seeds_ran_at_other_commits_names_each_commit_where_its_runs_are_shown():
    def run(seed, commit):
        curve = [{"step": 250, "valid_bleu_tok_lc": 10.0, "minutes": 1.0}]
        return {"seed": seed, "updates": 250, "curve": curve, "provenance": {"git_commit": commit + "0" * 33}}

    summary = {"median": 1.0, "min": 1.0, "max": 1.0}
    searches = {"beam1": summary, "beam5": summary}
    system = {"parameters": 1e6, "arithmetic": {"forward_flops_per_target_token": 1e6}}
    system |= {"summary": {"seeds": [1, 2], "updates": summary, "best_valid_bleu_tok_lc": summary}}
    system["summary"] |= {"test2016": searches}
    race = {
        "systems": {
            "attnmt": system | {"version": "0.1.0+aaaaaaa", "runs": [run(1, "aaaaaaa"), run(2, "bbbbbbb")]},
            "same": system | {"version": "0.1.0+ccccccc-dirty", "runs": [run(1, "ccccccc"), run(2, "ccccccc")]},
            "peer": system | {"version": "3.5.1", "runs": [run(1, "aaaaaaa"), run(2, "bbbbbbb")]},
        }
    }
    assert [row[0] for row in quality_rows(race)[1]] == [
        "attnmt 0.1.0+aaaaaaa/bbbbbbb",
        "same 0.1.0+ccccccc-dirty",
        "peer 3.5.1",
    ]
    assert [row[0] for row in equal_updates_rows(race)[1][:2]] == ["attnmt 0.1.0+aaaaaaa", "attnmt 0.1.0+bbbbbbb"]
    labels = [line.get_label() for line in quality_curves(race).axes[0].lines]
    assert (
        labels[:2] == ["attnmt 0.1.0+aaaaaaa, seed 1", "attnmt 0.1.0+bbbbbbb, seed 2"]
        and labels[-1] == "peer 3.5.1, seed 2"
    )


class Ranker(StandIn):
    """A stand-in whose search takes length penalties: under `avg`, or `wu` below alpha
    `long_from`, its outputs lose their last word (short); otherwise they are the reference."""

    long_from = 1.5

    def tuning_search(self, alpha):
        return {"length_penalty": "wu", "alpha": alpha}

    def stopping_searches(self, alpha):
        return {
            "best_finished, no penalty": {"length_penalty": "none", "alpha": 0.0},
            "best_finished, avg": {"length_penalty": "avg", "alpha": 0.0},
            "best_finished, wu tuned": self.tuning_search(alpha),
        }

    def translate_command(self, setup, work, python, *, length_penalty="none", alpha=0.0, **kwargs):
        command = super().translate_command(setup, work, python, **kwargs)
        if length_penalty == "avg" or (length_penalty == "wu" and alpha < self.long_from):
            reference = Path(command.argv[4])
            lines = reference.read_text(encoding="utf-8").splitlines()
            short = work / f"short-{reference.name}"
            short.write_text("".join(" ".join(line.split()[:-1]) + "\n" for line in lines), encoding="utf-8")
            command.argv[4] = str(short)
        return command


def test_quality_mode_tunes_the_beam_on_valid_and_compares_the_seeds_by_bootstrap(setup, tmp_path, quick_pace):
    first, second = Ranker("r"), Ranker("s")
    second.long_from = 99.0  # every length penalty it is tuned over leaves its outputs short
    harness = Harness(setup, [first, second], tmp_path / "w", say=lambda _: None)
    harness.install()
    race = quality(harness, QualityOptions(minutes=0.1, save_every=1, seeds=(1,), alphas=(0.0, 2.0)))
    run, other = race["systems"]["r"]["runs"][0], race["systems"]["s"]["runs"][0]
    assert [row["alpha"] for row in run["tuning"]] == [0.0, 2.0]  # decoded on valid
    assert run["tuning"][0]["bleu_tok_lc"] < run["tuning"][1]["bleu_tok_lc"] == pytest.approx(100)
    for split in ("test2016", "test2017"):
        decodes = run[split]
        assert set(decodes) == {"beam1", "beam5", "beam5_tuned"} and decodes["beam5_tuned"]["alpha"] == 2.0
        assert decodes["beam5_tuned"]["bleu_tok_lc"] == pytest.approx(100)
        assert {"chrf", "length_ratio", "brevity_penalty", "sentences_per_s"} <= set(decodes["beam5"])
        # greedy and tuned keep their sentences' statistics for the bootstrap; the race's own beam not
        assert len(decodes["beam1"]["sentence_stats"]) == 2 and "sentence_stats" not in decodes["beam5"]
    assert other["test2016"]["beam5_tuned"]["alpha"] == 0.0 and other["test2016"]["beam5_tuned"]["length_ratio"] < 1
    found = {(row["split"], tuple(row["searches"])): row for row in race["comparisons"]}
    pairs = (("beam1", "beam1"), ("beam5_tuned", "beam5_tuned"))
    assert set(found) == {(split, pair) for split in ("test2016", "test2017") for pair in pairs}
    greedy, tuned = found["test2016", pairs[0]], found["test2016", pairs[1]]
    assert greedy["delta"] == 0.0 and greedy["first_better_share"] == 0.0
    assert tuned["systems"] == ["r", "s"] and tuned["seed"] == 1 and tuned["first_better_share"] == 1.0
    assert tuned["bleu"] == [pytest.approx(100), pytest.approx(other["test2016"]["beam5_tuned"]["bleu_tok_lc"])]
    assert tuned["delta"] == pytest.approx(tuned["bleu"][0] - tuned["bleu"][1]) and tuned["delta"] > 0
    header, rows = quality_rows(race)
    assert header[-3:] == ["test2016 beam 5, tuned", "test2017 greedy", "test2017 beam 5, tuned"]
    assert rows[0][-1] == "100.00 (100.00-100.00)" and rows[1][-1] != rows[0][-1]
    header, rows = bootstrap_rows(race)
    assert header[-2:] == ["difference (95% interval)", "first higher in"] and len(rows) == 4
    assert rows[1][2] == "r beam5_tuned / s beam5_tuned" and rows[1][-1] == "100.0% of 1,000 samples"


def test_stopping_mode_decodes_each_ranking_and_tunes_wu_on_valid(setup, tmp_path):
    ranker, plain = Ranker("r"), StandIn("plain")
    messages = []
    harness = Harness(setup, [ranker, plain], tmp_path / "w", say=messages.append)
    harness.install()
    options = StoppingOptions(updates=4, save_every=2, seeds=(3,), alphas=(0.0, 1.0, 2.0, 3.0))
    saved = []
    results = stopping(harness, options, on_run=lambda partial: saved.append(copy.deepcopy(partial)))
    # a system that ranks one way only is left out in one line; the other is measured
    assert (
        set(results["systems"]) == {"r"}
        and "plain" in harness.errors
        and "takes no search options" in harness.errors["plain"]
    )
    (run,) = results["systems"]["r"]["runs"]
    assert run["seed"] == 3 and ranker.seeds == [3] and run["updates"] == 4 and run["parameters"] == 42
    assert [point["step"] for point in run["curve"]] == [4] and run["best"]["step"] == 4
    assert run["provenance_at_start"]["git_commit"] == run["provenance"]["git_commit"]
    # wu is tuned on valid only: the first alpha with the best BLEU
    assert [row["alpha"] for row in run["tuning"]] == [0.0, 1.0, 2.0, 3.0]
    assert {row["split"] for row in run["tuning"]} == {"valid"}
    rows = {(row["search"], row["split"]): row for row in run["rows"]}
    assert {split for _, split in rows} == {"valid", "test2016"} and len(rows) == 8
    tuned = rows["best_finished, wu tuned", "test2016"]
    assert tuned["length_penalty"] == "wu" and tuned["alpha"] == 2.0 and tuned["beam_size"] == 5
    # the scores follow the outputs: the reference (ratio 1, BP 1) or the reference less a word
    untouched = rows["best_finished, no penalty", "test2016"]
    assert (
        untouched["bleu_tok_lc"] == pytest.approx(100)
        and untouched["length_ratio"] == untouched["brevity_penalty"] == 1
    )
    short = rows["best_finished, avg", "valid"]
    assert short["length_ratio"] == pytest.approx(7 / 9) and short["brevity_penalty"] == pytest.approx(
        math.exp(1 - 9 / 7)
    )
    assert rows["greedy", "valid"]["beam_size"] == 1 and 0 < short["chrf"] < 100
    assert saved[-1]["systems"] == results["systems"]
    header, lines = stopping_rows({"systems": results["systems"]})
    assert header[2] == "search" and lines[-1][:3] == ["r", "3", "best_finished, wu tuned (alpha 2)"]

    # a rerun reuses the trained model and only decodes again
    rerun = Harness(setup, [ranker], tmp_path / "w", say=messages.append)
    rerun.install()
    again = stopping(rerun, options)
    assert ranker.seeds == [3] and again["systems"]["r"]["runs"][0]["rows"] == run["rows"]


def test_a_results_file_of_another_race_is_refused_in_one_line(setup, tmp_path):
    results = {"setup": setup.describe()}
    options = QualityOptions(minutes=50.0, save_every=250)
    path = tmp_path / "race.json"
    assert peers_cli.finished_runs(path, results, options) == {}  # no file yet: an empty race
    path.write_text(
        json.dumps(
            {
                "mode": "quality",
                "setup": setup.describe(),
                "options": {"minutes": 30.0, "save_every": 250},
                "systems": {},
            }
        )
    )
    with pytest.raises(UserError, match=r"race.json: holds a race with another minutes; pass --json"):
        peers_cli.finished_runs(path, results, options)
    race = {"mode": "quality", "setup": setup.describe(), "options": {"minutes": 50.0, "save_every": 250}}
    path.write_text(json.dumps({**race, "systems": {"attnmt": {"architecture_notes": "before", "runs": []}}}))
    before, new = StandIn("attnmt"), StandIn("joeynmt")
    before.architecture_notes, new.architecture_notes = "before", "new"
    assert peers_cli.finished_runs(path, results, options, [before, new]) == {
        "attnmt": {"architecture_notes": "before", "runs": []}
    }
    before.architecture_notes = "after"
    with pytest.raises(UserError, match=r"race.json: holds a race with another architecture of attnmt; pass --json"):
        peers_cli.finished_runs(path, results, options, [before])
    path.write_text("not json")
    with pytest.raises(UserError, match=r"race.json: not a results file of this benchmark"):
        peers_cli.finished_runs(path, results, options)


def test_a_failing_command_is_a_peer_error_quoting_its_log(tmp_path):
    command = Command([sys.executable, "-c", "import sys; print('loading'); sys.exit('config: bad key x')"], tmp_path)
    with pytest.raises(PeerError, match=r"^sys-x: training failed \(exit 1; log .*\): config: bad key x$"):
        run_command("sys-x", "training", command, tmp_path / "train.log")


def test_pip_failure_is_one_line_naming_the_system(tmp_path):
    with pytest.raises(PeerError, match=r"^joeynmt: pip install .* failed: .+") as raised:
        run_pip("joeynmt", Path(sys.executable), ["--no-index", str(tmp_path / "missing-1.0-py3-none-any.whl")])
    assert "\n" not in str(raised.value)


def test_unknown_system_names_list_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as exited:
        peers_cli.parse_args(["speed", "--systems", "attnmt,fairseq"])
    assert exited.value.code == 2
    assert (
        "unknown system fairseq; valid names: attnmt, attnmt-bahdanau, attnmt-tanh, attnmt-feed-before-dropout, "
        "opennmt-py, joeynmt, "
        "attnmt-recipe, opennmt-py-recipe" in capsys.readouterr().err
    )


def test_attnmt_searches_of_the_stopping_mode_reach_its_probe(tmp_path, monkeypatch):
    """Each named search of `stopping_searches` becomes the probe's SearchOptions; without
    search options the probe keeps the run's own decode settings."""
    monkeypatch.syspath_prepend(str(PROBES))
    import attnmt_probe

    system, setup, decode = Attnmt(), Setup(data_dir=tmp_path), DecodeConfig(length_penalty=0.6)

    def probed(beam_size: int, **search) -> SearchOptions:
        files = {name: tmp_path / name for name in ("checkpoint", "source", "output", "result")}
        command = system.translate_command(
            setup, tmp_path, Path(sys.executable), beam_size=beam_size, **files, **search
        )
        return attnmt_probe.search_options(decode, attnmt_probe.parser().parse_args(command.argv[2:]))

    searches = system.stopping_searches(alpha=0.4)
    assert searches["k_finished, tuned"] == system.tuning_search(0.4) == {"stopping": "k_finished", "alpha": 0.4}
    for search in searches.values():
        options = probed(5, **search)
        assert (options.stopping, options.length_penalty) == (search["stopping"], search["alpha"])
        # the peers' max_length counts the tokens before </s>; attnmt's limit counts </s> as well
        assert options.beam_size == 5 and (options.max_length_a, options.max_length_b) == (
            0.0,
            setup.max_output_length + 1,
        )
    own = probed(1)
    assert (own.beam_size, own.stopping, own.length_penalty) == (1, decode.stopping, 0.6)


@needs_multi30k
def test_attnmt_trains_and_translates_through_its_probe(tmp_path, monkeypatch):
    """Events count exactly the tokens attnmt's trainer counts; checkpoints at every save; a
    translation of every test line, in order."""
    monkeypatch.setenv("ATTNMT_DATA", str(SHARED_DATA))
    data = prepare_data(tmp_path / "data")
    assert len((data / "test2016.en").read_text().splitlines()) == 1000
    (data / "test2017.de").unlink()  # prepared before test2017 was a split: written again
    assert len((prepare_data(data) / "test2017.de").read_text().splitlines()) == 1000
    small = Setup(data_dir=data, embedding_size=16, encoder_hidden=16, decoder_hidden=32, threads=1)
    system, work = Attnmt(), tmp_path / "attnmt"
    harness = Harness(small, [system], tmp_path, say=lambda _: None)
    harness.install()
    finished, events = harness.train(system, work, steps=3, max_minutes=None, save_every=2)
    assert events.parameters > 0 and [step["step"] for step in events.steps] == [1, 2, 3]
    assert finished.peak_rss_mib > 0 and sorted(system.checkpoints(work)) == [2, 3]
    meta = json.loads((system.checkpoints(work)[3] / "meta.json").read_text())
    assert sum(step["target_tokens"] for step in events.steps) == meta["tokens"]
    measured = harness.translate(system, work / "out", system.checkpoints(work)[3], "test2016", 1, focus=True)
    assert measured["sentences"] == 1000 and measured["tokens_per_s"] > 0
    focus = measured["attention_focus"]  # a row per output token and one for EOS, every sentence
    assert focus["sentences"] == 1000 and focus["steps"] == measured["generated_tokens"] + 1000
    assert 0 <= focus["mean_weight_first"] <= 1 and 0 < focus["uniform_weight"] <= 1
    assert read_events(work / "events.jsonl").steps == events.steps


# --- OpenNMT-py and JoeyNMT through their probes, on a tiny task -------------------------------

TINY_STEPS, TINY_SAVE_EVERY = 150, 50


@dataclass(frozen=True)
class PeerFacts:
    """Where a peer reports its training loss and keeps its weights, for checking it from outside."""

    system: type
    loss: str  # a regular expression of its log whose group 1 is a training loss, in log order
    weights: tuple[str, ...]  # the checkpoint's entries holding the model's state dicts


PEERS = {
    "opennmt-py": PeerFacts(
        OpenNMT, r"Step \d+/ *\d+; acc: [ \d.]+; ppl: [ \d.]+; xent: ([\d.]+);", ("model", "generator")
    ),
    "joeynmt": PeerFacts(JoeyNMT, r"Epoch +\d+, total training loss: ([\d.]+),", ("model_state",)),
}


@pytest.mark.parametrize("name", list(PEERS))
def test_a_peer_trains_and_translates_through_its_probe(name, tmp_path):
    """The probe records the parameters, then per step the target tokens the data holds (non-pad,
    EOS included); the peer learns; the checkpoints are written; a translation has one line per
    source, and its result counts the tokens in those lines."""
    data = write_tiny_task(tmp_path / "data")
    setup = Setup(
        data_dir=data,
        embedding_size=16,
        encoder_hidden=16,
        decoder_hidden=32,
        dropout=0.0,
        batch_sentences=16,
        lr=0.01,  # ten times the benchmark's: the tiny model learns the task within 150 steps
        decode_batch_sentences=4,
        max_output_length=20,
        threads=1,
    )
    harness, system = installed_peer(name, setup)
    work = tmp_path / name
    _, events = harness.train(system, work, steps=TINY_STEPS, max_minutes=None, save_every=TINY_SAVE_EVERY)

    records = [json.loads(line) for line in (work / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    assert list(records[0]) == ["started"] and list(records[1]) == ["parameters"]
    assert [step["step"] for step in events.steps] == list(range(1, TINY_STEPS + 1))
    assert all(list(step) == ["step", "time", "target_tokens"] for step in events.steps)
    # Every epoch is 6 whole batches of 16 in some order: 6 steps in a row hold each target once.
    target_lengths = [len(line.split()) + 1 for line in (data / "train.de").read_text(encoding="utf-8").splitlines()]
    batches = TINY["train"] // setup.batch_sentences
    tokens = [step["target_tokens"] for step in events.steps]
    epochs = [sum(tokens[start : start + batches]) for start in range(0, TINY_STEPS, batches)]
    assert epochs == [sum(target_lengths)] * (TINY_STEPS // batches)
    shortest, longest = setup.batch_sentences * min(target_lengths), setup.batch_sentences * max(target_lengths)
    assert all(shortest <= count <= longest for count in tokens)

    losses = [float(loss) for loss in re.findall(PEERS[name].loss, (work / "train.log").read_text(encoding="utf-8"))]
    assert len(losses) >= 2 and losses[-1] < losses[0], losses  # it learns: the probe measured a working setup
    checkpoints = system.checkpoints(work)
    assert sorted(checkpoints) == list(range(TINY_SAVE_EVERY, TINY_STEPS + 1, TINY_SAVE_EVERY))
    saved = torch.load(checkpoints[TINY_STEPS], map_location="cpu", weights_only=False)  # written by the test
    assert events.parameters == sum(tensor.numel() for key in PEERS[name].weights for tensor in saved[key].values())

    measured = harness.translate(system, work / "out", checkpoints[TINY_STEPS], "test2016", 1)
    output = (work / "out" / "test2016-beam1.txt").read_text(encoding="utf-8").splitlines()
    assert len(output) == measured["sentences"] == TINY["test2016"]
    # The harness counts generated tokens as the words of the output, without EOS, for every system.
    assert measured["generated_tokens"] == sum(len(line.split()) for line in output) > 0
    focused = harness.translate(system, work / "focus", checkpoints[TINY_STEPS], "test2016", 1, focus=True)
    if system.measures_attention:  # over the source and the </s> JoeyNMT appends, </s> steps included
        focus = focused["attention_focus"]
        assert focus["sentences"] == TINY["test2016"] and focus["steps"] >= focused["generated_tokens"]
        assert 0 <= focus["mean_weight_first"] <= 1 and 0 < focus["uniform_weight"] <= 1
    else:
        assert "attention_focus" not in focused

    # The same model as a row of the speed/quality benchmark (`benchmarks.pareto --peer`): the
    # scores of its first pass, then the timings of the decoding alone, taking turns.
    from benchmarks import pareto

    row = pareto.PeerRow(f"{name} greedy", harness, system, checkpoints[TINY_STEPS], 1, 123, work / "pareto")
    (result,) = pareto.measure([], None, 2, peers=[row])
    figures = result["splits"][pareto.PEER_SPLIT]
    assert result["peer"] == name and result["parameters"] == 123 and result["beam"] == 1
    assert figures["tokenized_bleu"] == measured["bleu_tok_lc"] and 0 <= figures["bleu"] <= 100 + 1e-9
    assert figures["sentences"] == TINY["test2016"] and len(figures["sentences_per_s"]["values"]) == 2
    assert figures["generated_tokens"] == measured["generated_tokens"]


# OpenNMT-py's own defaults that the recipe writes under another name or changes on purpose
RECIPE_DEFAULT_NAMES = {"hidden_size": "enc_hid_size", "word_vec_size": "src_word_vec_size"}
RECIPE_CHANGES = {"share_decoder_embeddings": True}
DEFAULTS_SCRIPT = """
import json
from onmt.opts import train_opts
from onmt.utils.parse import ArgumentParser
parser = ArgumentParser()
train_opts(parser)
print(json.dumps({action.dest: action.default for action in parser._actions if action.dest != "help"}))
"""


@pytest.mark.parametrize("name", ["opennmt-py-recipe", "opennmt-py-adam-recipe"])
def test_opennmt_recipes_are_its_documented_model_with_shared_decoder_embeddings(name, tmp_path):
    """Both recipes train OpenNMT-py's documented default model: their options are the installed
    release's defaults, but for shared decoder embeddings and, in the Adam recipe, its optimizer
    and schedule (each of them an option of the release); the model has the parameter count the
    arithmetic's shapes give."""
    setup = Setup(data_dir=write_tiny_task(tmp_path / "data"), threads=1)
    harness, system = installed_peer(name, setup)
    done = subprocess.run(
        [str(harness.pythons[system.name].absolute()), "-c", DEFAULTS_SCRIPT], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    defaults = json.loads(done.stdout.splitlines()[-1])
    options = system.train_options(setup, tmp_path / "options")
    adam = adam_recipe(system.schedule_updates) if name == "opennmt-py-adam-recipe" else {}
    changes = {**RECIPE_CHANGES, **adam}
    for key in {*RECIPE, *changes}:
        assert RECIPE_DEFAULT_NAMES.get(key, key) in defaults, f"{key}: not an option of the installed release"
        expected = changes[key] if key in changes else defaults[RECIPE_DEFAULT_NAMES.get(key, key)]
        assert options[key] == expected, (key, options[key], expected)
    assert (
        defaults["dec_hid_size"] == defaults["enc_hid_size"]
        and defaults["tgt_word_vec_size"] == RECIPE["word_vec_size"]
    )

    work = tmp_path / "recipe"
    _, events = harness.train(system, work, steps=2, max_minutes=None, save_every=2)
    train_yaml = (work / "train.yaml").read_text(encoding="utf-8")
    assert f'optim: "{options["optim"]}"' in train_yaml and "share_decoder_embeddings: true" in train_yaml
    # every type of the tiny task is seen at least twice, so kept; four specials per side
    source_types, target_types = (
        len(set((setup.data_dir / f"train.{lang}").read_text().split())) for lang in ["en", "de"]
    )
    shapes = system.arithmetic_shapes(setup)
    expected = sum(p.numel() for p in build_model(shapes, source_types + 4, target_types + 4).parameters())
    assert events.parameters == pytest.approx(expected, rel=0.01), (events.parameters, expected)


@pytest.mark.parametrize("updates", [3000, 4321])
def test_the_adam_recipes_decay_is_fitted_to_the_race_as_attnmts_cosine_is(updates):
    """OpenNMT-py's step decay, written from its definition (the rate times decay^k, k the number
    of decay_steps periods begun since start_decay_steps - decay_steps), is at attnmt's recipe's
    peak until mid-run, at half of it from there, as a cosine is, and within a factor of two of
    attnmt's recipe's floor at the run's last update; the system's options and notes follow its fit."""
    recipe = adam_recipe(updates)

    def rate(step: int) -> float:
        begun = max(step - recipe["start_decay_steps"] + recipe["decay_steps"], 0)
        return recipe["learning_rate"] * recipe["learning_rate_decay"] ** (begun // recipe["decay_steps"])

    attnmt_recipe = yaml.safe_load(RECIPE_CONFIG.read_text(encoding="utf-8"))["train"]
    assert recipe["learning_rate"] == attnmt_recipe["lr"]
    assert rate(updates // 2 - 1) == recipe["learning_rate"]
    assert rate(updates // 2) == pytest.approx(recipe["learning_rate"] / 2)
    assert attnmt_recipe["min_lr"] / 2 <= rate(updates) <= 2 * attnmt_recipe["min_lr"]
    system = OpenNMTAdamRecipe()
    system.fit_schedule(updates)
    assert f"{updates:,} updates of a 50-minute run" in system.architecture_notes
    assert f"halved at update {updates // 2:,}" in system.architecture_notes


def test_a_schedules_pace_is_the_time_to_the_warmups_end_and_the_seconds_per_update_after_it():
    steps = [{"step": i, "time": 100.0 + 2 * i, "target_tokens": 1} for i in range(1, 11)]
    pace = schedule_pace(steps, started=90.0, warmup=4)
    # update 4 ends at t=108, 18 s after the start; updates 5..10 take 12 s
    assert pace == {"updates": 10, "warmup_updates": 4, "warmup_seconds": 18.0, "seconds_per_update": 2.0}
    with pytest.raises(PeerError, match="warm-up"):
        schedule_pace(steps, started=90.0, warmup=10)


class Scheduled(StandIn):
    """A stand-in whose schedule is laid out over a number of updates, which its notes name."""

    def __init__(self, name: str = "scheduled"):
        super().__init__(name)
        self.fit_schedule(7)

    def fit_schedule(self, updates):
        super().fit_schedule(updates)
        self.architecture_notes = f"decays over {updates} updates"


def test_a_race_fits_a_schedule_to_its_minutes_once_and_keeps_the_fit_when_resumed(
    setup, tmp_path, monkeypatch, quick_pace
):
    """The race measures a scheduled system's pace once, lays its schedule out over the updates
    its minutes hold at that pace, records the measurement, and trains every seed with it; a
    race resumed from its results file takes the recorded fit instead of measuring again."""
    monkeypatch.setattr("benchmarks.peers.quality.SCHEDULE_PROBE_UPDATES", 30)
    monkeypatch.setattr("benchmarks.peers.quality.SCHEDULE_PROBE_WARMUP", 2)
    system = Scheduled()
    harness = Harness(setup, [system, StandIn("plain")], tmp_path / "w", say=lambda _: None)
    harness.install()
    options = QualityOptions(minutes=0.5, save_every=1, seeds=(1, 2))
    race = quality(harness, options)
    fit = race["systems"]["scheduled"]["schedule"]
    probe = fit["probe"]
    expected = 2 + int((30 - probe["warmup_seconds"]) / probe["seconds_per_update"])
    assert fit["updates"] == expected and probe["updates"] == 30 and "git_commit" in probe["provenance"]
    assert system.schedule_updates == expected and system.seeds == [1, 1, 2]  # the probe, then the seeds
    assert race["systems"]["scheduled"]["architecture_notes"] == f"decays over {expected} updates"
    assert "schedule" not in race["systems"]["plain"]
    assert not (tmp_path / "w" / "quality" / "scheduled" / "schedule-probe").exists()

    results = tmp_path / "race.json"
    results.write_text(json.dumps({"mode": "quality", "setup": {}, **race}), encoding="utf-8")
    shutil.rmtree(tmp_path / "w" / "quality")  # a new session: only the results file remains
    again = Scheduled()
    assert again.schedule_updates == 7
    finished = peers_cli.finished_runs(results, {"setup": {}}, options, [again])
    assert again.schedule_updates == expected  # so that its notes are the race's
    harness = Harness(setup, [again], tmp_path / "w", say=lambda _: None)
    harness.install()
    longer = quality(harness, QualityOptions(minutes=0.5, save_every=1, seeds=(1, 2, 3)), finished)
    assert again.seeds == [3] and longer["systems"]["scheduled"]["schedule"] == fit

    race["systems"]["scheduled"]["schedule"] = {"updates": "many"}  # a hand-edited file: one line, not a traceback
    results.write_text(json.dumps({"mode": "quality", "setup": {}, **race}), encoding="utf-8")
    with pytest.raises(UserError, match=r"race.json: systems.scheduled.schedule.updates: expected a positive count"):
        peers_cli.finished_runs(results, {"setup": {}}, options, [Scheduled()])


BAD_COUNTS = [
    ["speed", "--repeats", "0"],
    ["speed", "--warmup", "0"],
    ["quality", "--save-every", "x"],
    ["stopping", "--updates", "0"],
]


@pytest.mark.parametrize("argv", BAD_COUNTS)
def test_counts_below_one_are_a_usage_error_not_a_traceback(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        peers_cli.parse_args(argv)
    assert exited.value.code == 2 and "expected" in capsys.readouterr().err

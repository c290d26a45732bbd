"""The peer benchmark's harness: what it measures, how it fails, and attnmt through its probe.

The peers themselves (OpenNMT-py, JoeyNMT) need their own environments from the network, so
they are not run here; a stand-in system whose commands are tiny scripts exercises the harness.
"""

import json
import sys
from pathlib import Path

import pytest

from benchmarks.peers import __main__ as peers_cli
from benchmarks.peers.attnmt_peer import Attnmt
from benchmarks.peers.data import prepare_data
from benchmarks.peers.harness import Harness, read_events, run_command, training_speed
from benchmarks.peers.modes import QualityOptions, SpeedOptions, quality, speed
from benchmarks.peers.report import quality_curves, save_figure
from benchmarks.peers.system import Command, PeerError, PeerSystem, Setup, run_pip
from tests.test_corpora import SHARED_DATA, needs_multi30k

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

    def install(self, env_dir: Path) -> Path:
        if self.fail_install:
            raise PeerError(f"{self.name}: pip install stand-in==1 failed: ERROR: No matching distribution found")
        return Path(sys.executable)

    def prepare(self, setup, work, python):
        (work / "probe.py").write_text(SCRIPT)

    def train_command(self, setup, work, python, *, steps, max_minutes, save_every, events):
        steps = steps or 5
        checkpoint = work / f"model-{steps}.ckpt"
        return Command([str(python), "probe.py", "train", str(events), str(steps), str(checkpoint)], work)

    def checkpoints(self, work):
        return {int(path.stem.split("-")[1]): path for path in work.glob("model-*.ckpt")}

    def translate_command(self, setup, work, python, *, checkpoint, source, output, beam_size, result):
        (work / "probe.py").write_text(SCRIPT)
        reference = source.with_suffix(f".{setup.tgt_lang}")  # "translates" into the reference itself
        return Command([str(python), "probe.py", "translate", str(output), str(reference), str(result)], work)


@pytest.fixture
def setup(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "valid", "test2016"):
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
    assert set(system["decoding"]) == {"beam1", "beam5"}
    assert system["decoding"]["beam1"]["bleu_tok_lc"] == pytest.approx(100.0)
    assert system["decoding"]["beam1"]["tokens_per_s"]["median"] == pytest.approx(2 * (4 + 5) / 0.5 / 2)


def test_a_system_that_cannot_install_is_one_line_and_the_others_are_still_measured(setup, tmp_path):
    harness = Harness(setup, [StandIn("a"), StandIn("broken", fail_install=True)], tmp_path / "w", say=lambda _: None)
    harness.install()
    results = speed(harness, SpeedOptions(repeats=1, warmup=1, steps=2, decode_updates=2))
    assert set(results["systems"]) == {"a"}
    assert harness.errors == {"broken": "broken: pip install stand-in==1 failed: ERROR: No matching distribution found"}


def test_quality_mode_keeps_a_finished_system_and_scores_its_checkpoints(setup, tmp_path):
    harness = Harness(setup, [StandIn("a")], tmp_path / "w", say=lambda _: None)
    harness.install()
    first = quality(harness, QualityOptions(minutes=0.1, save_every=1))
    result = first["systems"]["a"]
    assert result["updates"] == 5 and [point["step"] for point in result["curve"]] == [5]
    assert result["best"]["valid_bleu_tok_lc"] == pytest.approx(100.0)
    assert set(result["test2016"]) == {"beam1", "beam5"}
    done = tmp_path / "w" / "quality" / "a" / "result.json"
    stamp = done.stat().st_mtime_ns
    assert quality(harness, QualityOptions(minutes=0.1, save_every=1)) == first  # resumed: not trained again
    assert done.stat().st_mtime_ns == stamp
    figure = quality_curves(first)  # validation BLEU against minutes, one line per system
    [line] = figure.axes[0].lines
    assert list(line.get_xdata()) == [point["minutes"] for point in result["curve"]]
    assert list(line.get_ydata()) == [point["valid_bleu_tok_lc"] for point in result["curve"]]
    assert save_figure(figure, tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")


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
    assert "unknown system fairseq; valid names: attnmt, opennmt-py, joeynmt" in capsys.readouterr().err


@needs_multi30k
def test_attnmt_trains_and_translates_through_its_probe(tmp_path, monkeypatch):
    """Events count exactly the tokens attnmt's trainer counts; checkpoints at every save; a
    translation of every test line, in order."""
    monkeypatch.setenv("ATTNMT_DATA", str(SHARED_DATA))
    data = prepare_data(tmp_path / "data")
    assert len((data / "test2016.en").read_text().splitlines()) == 1000
    small = Setup(data_dir=data, embedding_size=16, encoder_hidden=16, decoder_hidden=32, threads=1)
    system, work = Attnmt(), tmp_path / "attnmt"
    harness = Harness(small, [system], tmp_path, say=lambda _: None)
    harness.install()
    finished, events = harness.train(system, work, steps=3, max_minutes=None, save_every=2)
    assert events.parameters > 0 and [step["step"] for step in events.steps] == [1, 2, 3]
    assert finished.peak_rss_mib > 0 and sorted(system.checkpoints(work)) == [2, 3]
    meta = json.loads((system.checkpoints(work)[3] / "meta.json").read_text())
    assert sum(step["target_tokens"] for step in events.steps) == meta["tokens"]
    measured = harness.translate(system, work / "out", system.checkpoints(work)[3], "test2016", 1)
    assert measured["sentences"] == 1000 and measured["tokens_per_s"] > 0
    assert read_events(work / "events.jsonl").steps == events.steps


BAD_COUNTS = [["speed", "--repeats", "0"], ["speed", "--warmup", "0"], ["quality", "--save-every", "x"]]


@pytest.mark.parametrize("argv", BAD_COUNTS)
def test_counts_below_one_are_a_usage_error_not_a_traceback(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        peers_cli.parse_args(argv)
    assert exited.value.code == 2 and "expected" in capsys.readouterr().err

"""Training: exact resume, repeatable runs, DDP equals one process, clean stops."""

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from safetensors.torch import load_file

from attnmt import train as train_module
from attnmt.checkpoint import load_trainer_state, read_index, resolve_checkpoint
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data.shares import share_of
from attnmt.train import TrainingDiverged, fit
from attnmt.utils import Interrupted, UserError

TINY = [
    "data.corpus=reverse",
    "data.synthetic_size=600",
    "data.synthetic_max_len=8",
    "data.valid_size=40",
    "data.test_size=40",
    "data.batch_tokens=300",
    "model.embedding_size=16",
    "model.encoder_hidden=16",
    "model.decoder_hidden=32",
    "train.lr=0.003",
    "train.log_every=1",
    "train.valid_bleu_sentences=20",
    "train.threads=1",
]


def tiny_config(run_dir: Path, *overrides: str):
    return load_config(None, [*TINY, f"train.run_dir={run_dir}", *overrides])


def train_losses(run_dir: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["train_loss"] for r in records if "train_loss" in r}


def quiet(*_args, **_kwargs) -> None:
    pass


# dropout and teacher forcing < 1 both draw random numbers: resuming must restore the RNG too
RANDOMNESS = ("model.dropout=0.3", "train.teacher_forcing=0.5", "train.valid_every=10")


def test_resume_gives_the_same_loss_curve_bit_for_bit(tmp_path):
    fit(tiny_config(tmp_path / "whole", "train.max_steps=30", *RANDOMNESS), log=quiet)
    fit(tiny_config(tmp_path / "split", "train.max_steps=20", *RANDOMNESS), log=quiet)
    fit(tiny_config(tmp_path / "split", "train.max_steps=30", *RANDOMNESS), resume=True, log=quiet)
    whole, split = train_losses(tmp_path / "whole"), train_losses(tmp_path / "split")
    assert sorted(whole) == sorted(split) == list(range(1, 31))
    assert whole == split  # exact float equality, not approximately


def test_a_transformer_run_resumes_with_the_same_loss_curve_bit_for_bit(tmp_path):
    data = [item for item in TINY if not item.startswith("model.")]
    family = ["model.family=transformer", "model.d_model=16", "model.heads=2", "model.feed_forward=32"]
    randomness = ["model.dropout=0.3", "model.attention_dropout=0.2", "model.word_dropout=0.1", "train.valid_every=10"]
    shape = [*data, *family, "model.encoder_layers=2", "model.decoder_layers=2", *randomness]
    for name, steps, resume in (("whole", 30, False), ("split", 20, False), ("split", 30, True)):
        config = load_config(None, [*shape, f"train.run_dir={tmp_path / name}", f"train.max_steps={steps}"])
        fit(config, resume=resume, log=quiet)
    assert train_losses(tmp_path / "whole") == train_losses(tmp_path / "split")  # exact float equality


def test_resume_after_a_signal_between_validations_gives_the_same_loss_curve_bit_for_bit(tmp_path):
    """Stopped by SIGTERM at step 13, neither a validation nor a save boundary."""

    def signal_at_step_13(line: str) -> None:
        if line.startswith("step ") and int(line.split()[1]) == 13:
            os.kill(os.getpid(), signal.SIGTERM)

    fit(tiny_config(tmp_path / "whole", "train.max_steps=30", *RANDOMNESS), log=quiet)
    with pytest.raises(Interrupted, match="interrupted at step 13"):
        fit(tiny_config(tmp_path / "split", "train.max_steps=30", *RANDOMNESS), log=signal_at_step_13)
    fit(tiny_config(tmp_path / "split", "train.max_steps=30", *RANDOMNESS), resume=True, log=quiet)
    assert train_losses(tmp_path / "whole") == train_losses(tmp_path / "split")


def test_same_seed_same_run_other_seed_other_run(tmp_path):
    fit(tiny_config(tmp_path / "a", "train.max_steps=8", *RANDOMNESS), log=quiet)
    fit(tiny_config(tmp_path / "b", "train.max_steps=8", *RANDOMNESS), log=quiet)
    fit(tiny_config(tmp_path / "c", "train.max_steps=8", "train.seed=2", *RANDOMNESS), log=quiet)
    assert train_losses(tmp_path / "a") == train_losses(tmp_path / "b")
    assert train_losses(tmp_path / "a") != train_losses(tmp_path / "c")


def test_existing_run_is_not_overwritten(tmp_path):
    fit(tiny_config(tmp_path / "run", "train.max_steps=2"), log=quiet)
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    with pytest.raises(UserError, match="already holds checkpoints"):
        fit(tiny_config(tmp_path / "run", "train.max_steps=2"), log=quiet)
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before


def test_nan_loss_stops_naming_the_step_after_saving_the_last_good_state(tmp_path, monkeypatch):
    real_loss = train_module.token_loss
    calls = {"n": 0}

    def loss_that_explodes(*arguments):
        calls["n"] += 1
        value = real_loss(*arguments)
        return value * float("nan") if calls["n"] == 4 else value

    monkeypatch.setattr(train_module, "token_loss", loss_that_explodes)
    with pytest.raises(TrainingDiverged, match="step 4: the loss is nan"):
        fit(tiny_config(tmp_path / "run", "train.max_steps=10"), log=quiet)
    last = resolve_checkpoint(tmp_path / "run", "last")
    assert load_trainer_state(last)["progress"]["step"] == 3
    weights = load_file(str(last / "model.safetensors"))
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), "OMP_NUM_THREADS": "1"}


def test_two_process_ddp_matches_one_process(tmp_path):
    deterministic = ["model.dropout=0.0", "train.max_steps=6", "train.valid_every=100", "train.clip_grad_norm=null"]
    fit(tiny_config(tmp_path / "single", *deterministic), log=quiet)
    overrides = [*TINY, f"train.run_dir={tmp_path / 'ddp'}", *deterministic]
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}",
        "-m", "attnmt", "train", *[arg for o in overrides for arg in ("--set", o)],
    ]  # fmt: skip
    result = subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    single = load_file(str(resolve_checkpoint(tmp_path / "single", "last") / "model.safetensors"))
    ddp = load_file(str(resolve_checkpoint(tmp_path / "ddp", "last") / "model.safetensors"))
    assert single.keys() == ddp.keys()
    for name in single:
        assert torch.allclose(single[name], ddp[name], atol=2e-5, rtol=1e-4), name


def test_processes_share_each_pair_of_a_batch_once_and_one_left_without_a_pair_pads_at_weight_zero():
    batch = [7, 8, 9, 10, 11]
    shares = [share_of(batch, rank, world_size=3) for rank in range(3)]
    assert shares == [([7, 10], 1.0), ([8, 11], 1.0), ([9], 1.0)]
    assert sorted(pair for share, _ in shares for pair in share) == batch
    assert [share_of([7], rank, world_size=2) for rank in range(2)] == [([7], 1.0), ([7], 0.0)]


def launch_node(port: int, overrides: list[str], *extra: str) -> subprocess.Popen:
    """One "node" of a two-node run: a torchrun launcher with one process, meeting the other
    through c10d rendezvous on the loopback address (as two machines would on a network)."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
        "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=attnmt-two-nodes",
        "--max_restarts=0", "-m", "attnmt", "train", *extra, *[arg for o in overrides for arg in ("--set", o)],
    ]  # fmt: skip
    return subprocess.Popen(
        command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def launch_two_nodes(port: int, overrides: list[str], *extra: str) -> list[subprocess.Popen]:
    """The first launcher hosts the rendezvous store (its port listens) before the second
    starts, so which node is killed below (the second) never holds the store."""
    first = launch_node(port, overrides, *extra)
    deadline = time.time() + 120
    while time.time() < deadline and first.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            break
        time.sleep(0.2)
    return [first, launch_node(port, overrides, *extra)]


def test_two_nodes_match_one_process_and_a_killed_node_stops_the_other_and_the_run_resumes(tmp_path):
    deterministic = ["model.dropout=0.0", "train.max_steps=6", "train.valid_every=100", "train.clip_grad_norm=null"]
    fit(tiny_config(tmp_path / "single", *deterministic), log=quiet)
    overrides = [*TINY, f"train.run_dir={tmp_path / 'nodes'}", *deterministic]
    port = free_port()
    nodes = launch_two_nodes(port, overrides)
    for node in nodes:
        _, stderr = node.communicate(timeout=240)
        assert node.returncode == 0, stderr[-3000:]
    single = load_file(str(resolve_checkpoint(tmp_path / "single", "last") / "model.safetensors"))
    both = load_file(str(resolve_checkpoint(tmp_path / "nodes", "last") / "model.safetensors"))
    for name in single:
        assert torch.allclose(single[name], both[name], atol=2e-5, rtol=1e-4), name

    # A long run: once it has a checkpoint, one node is killed (launcher and worker at once, as
    # a machine that goes down); the other must stop by itself, and the run resumes.
    run_dir = tmp_path / "killed"
    long_run = [*TINY, f"train.run_dir={run_dir}", "train.max_steps=100000", "train.valid_every=3"]
    port = free_port()
    nodes = launch_two_nodes(port, long_run)
    deadline = time.time() + 180
    while time.time() < deadline and read_index(run_dir).last is None:
        time.sleep(0.2)
    assert read_index(run_dir).last is not None, "no checkpoint was written"
    # torchrun starts its worker in a session of its own: kill the launcher and every descendant
    launcher = psutil.Process(nodes[1].pid)
    for process in [launcher, *launcher.children(recursive=True)]:
        process.kill()
    started = time.time()
    _, stderr = nodes[0].communicate(timeout=90)
    assert time.time() - started < 60, "the surviving node ran on for over a minute"
    assert nodes[0].returncode != 0
    nodes[1].communicate(timeout=10)
    step = load_trainer_state(resolve_checkpoint(run_dir, "last"))["progress"]["step"]
    port = free_port()
    resumed = [*long_run[:-2], f"train.max_steps={step + 4}", "train.valid_every=3"]
    nodes = launch_two_nodes(port, resumed, "--resume", str(run_dir))
    for node in nodes:
        _, stderr = node.communicate(timeout=240)
        assert node.returncode == 0, stderr[-3000:]
    assert load_trainer_state(resolve_checkpoint(run_dir, "last"))["progress"]["step"] == step + 4


def test_sigterm_writes_a_resumable_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    overrides = [*TINY, f"train.run_dir={run_dir}", "train.max_steps=100000", "train.valid_every=100000"]
    command = [sys.executable, "-m", "attnmt", "train", *[arg for o in overrides for arg in ("--set", o)]]
    process = subprocess.Popen(command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = run_dir / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 5):
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "resumable checkpoint" in stderr and "Traceback" not in stderr
    step = load_trainer_state(resolve_checkpoint(run_dir, "last"))["progress"]["step"]
    assert step >= 5 and read_index(run_dir).best is None
    summary = fit(tiny_config(run_dir, f"train.max_steps={step + 3}"), resume=True, log=quiet)
    assert summary["steps"] == step + 3


def tsv_config(folder: Path, run_dir: Path, *overrides: str):
    data = ["data.corpus=tsv", f"data.train={folder / 'train.tsv'}", f"data.valid={folder / 'valid.tsv'}"]
    data.append(f"data.test={folder / 'valid.tsv'}")
    return load_config(None, [*TINY[3:], *data, f"train.run_dir={run_dir}", "train.max_steps=3", *overrides])


def test_a_200000_token_line_is_dropped_with_a_warning_and_training_takes_seconds(tmp_path, corpus_with_a_huge_line):
    folder = corpus_with_a_huge_line
    lines = []
    started = time.perf_counter()
    summary = fit(tsv_config(folder, tmp_path / "run"), log=lines.append)
    assert summary["steps"] == 3 and time.perf_counter() - started < 60
    assert "warning: 1 training pairs dropped by the length filters (1 by data.max_src_tokens)" in lines


def test_without_length_limits_a_pair_over_the_batch_budget_is_left_out_with_a_warning(
    tmp_path, corpus_with_a_huge_line
):
    folder = corpus_with_a_huge_line
    unlimited = ["data.max_src_tokens=null", "data.max_tgt_tokens=null", "data.max_length_ratio=null"]
    lines = []
    summary = fit(tsv_config(folder, tmp_path / "run", *unlimited), log=lines.append)
    assert summary["steps"] == 3
    assert any("1 training pairs are longer on their own than data.batch_tokens (300 padded" in line for line in lines)


def test_the_training_log_keeps_one_line_per_event_outside_a_terminal(tmp_path, capsys):
    settings = [*TINY, f"train.run_dir={tmp_path / 'run [1]'}", "train.max_steps=2", "train.valid_every=2"]
    assert main(["train", *[a for o in settings for a in ("--set", o)]]) == 0
    lines = capsys.readouterr().out.splitlines()
    validation = [line for line in lines if line.startswith("validation at step 2:")]
    assert len(validation) == 1 and validation[0].endswith("(best)") and len(validation[0]) > 80
    assert not any(line.strip() == "(best)" for line in lines)


def test_tensorboard_event_files_hold_the_logged_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = tmp_path / "run"
    fit(tiny_config(run_dir, "train.max_steps=4", "train.valid_every=2"), log=quiet)
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert {"train_loss", "lr", "tokens_per_s", "valid_loss", "valid_bleu"} <= set(events.Tags()["scalars"])
    logged = train_losses(run_dir)
    read_back = {event.step: event.value for event in events.Scalars("train_loss")}
    assert read_back.keys() == logged.keys() == {1, 2, 3, 4}
    assert all(math.isclose(read_back[step], logged[step], rel_tol=1e-6) for step in logged)  # stored as float32
    assert [event.step for event in events.Scalars("valid_loss")] == [2, 4]


# `attnmt train` whose fifth step never ends (after steps 2 and 4 saved checkpoints).
STALLING_TRAIN = """
import sys, time
from pathlib import Path
from attnmt import train
from attnmt.cli import main

real_step = train.Trainer.train_step

def stalling_step(self, indices, batch=None):
    if self.progress.step == 4:
        Path(sys.argv[1]).write_text("stalled")
        while True:
            time.sleep(0.05)
    return real_step(self, indices, batch)

train.Trainer.train_step = stalling_step
sys.exit(main(sys.argv[2:]))
"""


def start_stalling_run(tmp_path: Path, *overrides: str) -> tuple[subprocess.Popen, Path]:
    run_dir, marker = tmp_path / "run", tmp_path / "stalled"
    settings = [*TINY, f"train.run_dir={run_dir}", "train.max_steps=100", "train.valid_every=2", *overrides]
    command = [sys.executable, "-c", STALLING_TRAIN, str(marker), "train", *[a for o in settings for a in ("--set", o)]]
    process = subprocess.Popen(command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not marker.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert marker.exists(), process.communicate()[1][-2000:]
    return process, run_dir


@contextlib.contextmanager
def ended(process: subprocess.Popen):
    """Kill the process if the block fails before it ended: a stalled child never outlives its test."""
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def assert_resumable_from_step_4(run_dir: Path) -> None:
    last = resolve_checkpoint(run_dir, "last")
    assert load_trainer_state(last)["progress"]["step"] == 4
    assert fit(tiny_config(run_dir, "train.max_steps=6", "train.valid_every=2"), resume=True, log=quiet)["steps"] == 6


def test_a_second_signal_ends_a_step_that_never_ends_at_once_and_keeps_the_last_checkpoint(tmp_path):
    process, run_dir = start_stalling_run(tmp_path)
    with ended(process):
        process.send_signal(signal.SIGTERM)
        time.sleep(1.5)
        assert process.poll() is None  # the first signal waits for the end of the step
        started = time.time()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130 and time.time() - started < 10, stderr
    assert "a second signal: stopping training at once" in stderr and "Traceback" not in stderr
    assert_resumable_from_step_4(run_dir)


def test_one_signal_and_a_step_that_outlasts_the_grace_period_end_the_run(tmp_path):
    process, run_dir = start_stalling_run(tmp_path, "train.stop_grace_seconds=2")
    with ended(process):
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "no step ended within 2 s of the signal" in stderr and "Traceback" not in stderr
    assert_resumable_from_step_4(run_dir)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precision_trains_and_resumes_bit_for_bit(tmp_path, precision):
    settings = (f"train.precision={precision}", *RANDOMNESS)
    fit(tiny_config(tmp_path / "whole", "train.max_steps=12", *settings), log=quiet)
    fit(tiny_config(tmp_path / "split", "train.max_steps=7", *settings), log=quiet)
    fit(tiny_config(tmp_path / "split", "train.max_steps=12", *settings), resume=True, log=quiet)
    whole = train_losses(tmp_path / "whole")
    assert whole == train_losses(tmp_path / "split") and len(whole) == 12
    assert all(math.isfinite(loss) for loss in whole.values())
    assert whole[12] < whole[1]


def test_fp16_scales_the_loss_and_skips_steps_whose_gradients_overflow(tmp_path):
    config = tiny_config(tmp_path / "run", "train.max_steps=4", "train.precision=fp16", "model.dropout=0.0")
    trainer = train_module.Trainer(config, resume=False, log=quiet)
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**100)  # every fp16 gradient overflows
    before = {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}
    trainer.run()
    assert trainer.skipped_steps() == 4
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, before[name]), name  # a skipped step changes no weight
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["skipped_steps"] for r in records if "train_loss" in r] == [1, 2, 3, 4]
    assert records[-2]["loss_scale"] == 2.0**96

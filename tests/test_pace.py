"""The pace probe: what it times is recorded with the time, and it leaves the caller's random stream alone."""

import pytest
import torch

from attnmt.models.seq2seq import build_model
from attnmt.pace import REFERENCE, ProbeModel, pace_probe

TINY = ProbeModel(embedding_size=8, encoder_hidden=8, decoder_hidden=16, vocabulary=50, sentences=4)


def test_the_probe_reports_the_median_of_its_timed_updates_with_what_it_timed():
    probe = pace_probe(updates=3, warmup=1, reference=TINY)
    assert 0 < probe["min"] <= probe["seconds_per_update"] <= probe["max"]
    assert (probe["updates"], probe["warmup"], probe["threads"]) == (3, 1, torch.get_num_threads())
    assert probe["reference"]["vocabulary"] == 50 and probe["cpu"] and probe["torch"] == torch.__version__
    built = sum(p.numel() for p in build_model(TINY.model_config(), 50, 50).parameters())
    assert probe["parameters"] == built


def test_the_probe_does_not_move_the_callers_random_stream():
    """A run that probes its pace first draws the same initial weights and batches as one that does not."""
    torch.manual_seed(7)
    expected = torch.rand(5)
    torch.manual_seed(7)
    pace_probe(updates=1, warmup=0, reference=TINY)
    assert torch.equal(torch.rand(5), expected)


def test_the_reference_is_the_races_model_size():
    """The reference's shapes are the identical-model race's: about 13M parameters at 8,000 types a side."""
    model = build_model(REFERENCE.model_config(), 8000, 8000)
    assert 12e6 < sum(p.numel() for p in model.parameters()) < 14e6


@pytest.mark.parametrize(("updates", "warmup"), [(0, 1), (1, -1)])
def test_a_probe_without_timed_updates_is_refused(updates, warmup):
    with pytest.raises(ValueError, match="at least one timed update"):
        pace_probe(updates=updates, warmup=warmup, reference=TINY)


def test_a_probe_written_beside_a_run_is_reported_by_its_evaluations(copied_run, monkeypatch):
    """`python -m attnmt.pace --json RUN/pace.json` before training: `training_summary`, which every
    evaluation.json carries per run, reports it; a run without one says None."""
    import json

    from attnmt import pace
    from attnmt.checkpoint import resolve_checkpoint, training_summary

    checkpoint = resolve_checkpoint(copied_run)
    assert training_summary(checkpoint)["pace"] is None
    monkeypatch.setattr(pace, "REFERENCE", TINY)
    assert pace.main(["--threads", "1", "--json", str(copied_run / "pace.json")]) == 0
    written = json.loads((copied_run / "pace.json").read_text(encoding="utf-8"))
    assert written["threads"] == 1 and written["reference"]["vocabulary"] == 50
    assert training_summary(checkpoint)["pace"] == written
    assert pace.main(["--json", str(copied_run / "pace.json" / "under-a-file.json")]) == 2  # one line, exit 2

"""attnmt.continued: a new run that starts from a trained one (`attnmt train CONFIG --from RUN`).

Held against the starting checkpoint itself: the continued model's weights before its first
update are the start's, row for row (the grown rows at the mean of the trained ones), its
vocabularies are the start's (extended at the end), and a resumed continued run repeats the
uninterrupted one's losses exactly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from attnmt.checkpoint import read_meta, read_weights, resolve_checkpoint, training_summary
from attnmt.config import load_config
from attnmt.train import Trainer, fit
from attnmt.utils import UserError
from attnmt.vocab import Vocab
from tests.cli_helpers import run_error, run_ok
from tests.data_helpers import CorpusLookups
from tests.run_helpers import MODELS
from tests.serve_helpers import serving

pytestmark = pytest.mark.usefixtures("isolated")

TINY = [
    "data.corpus=reverse",
    "data.synthetic_size=400",
    "data.synthetic_max_len=6",
    "data.valid_size=20",
    "data.test_size=20",
    "data.batch_tokens=300",
    "model.embedding_size=16",
    "model.encoder_hidden=16",
    "model.decoder_hidden=32",
    "train.log_every=1",
    "train.valid_every=6",
    "train.valid_bleu_sentences=10",
    "train.threads=1",
    "train.device=cpu",
]
SENTENCEPIECE = ["data.tokenizer=sentencepiece", "data.spm_vocab_size=40"]


def quiet(*_args, **_kwargs) -> None:
    pass


def train_start(run_dir: Path, *overrides: str) -> Path:
    settings = [*TINY, *overrides, "train.lr=0.004", "train.max_steps=6", f"train.run_dir={run_dir}"]
    fit(load_config(None, settings), log=quiet)
    return run_dir


def continued_config(run_dir: Path, start: Path, *overrides: str):
    return load_config(None, [*TINY, *overrides, f"train.init_from={start}", f"train.run_dir={run_dir}"])


def new_words_corpus(folder: Path) -> list[str]:
    """A `files` corpus of reversed letters in which "qq" and "vv" (unknown to the reverse task's
    words) occur in every training pair; the overrides that read it."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", 60), ("valid", 6), ("test", 6)):
        sources = [f"a b qq {'c d' if i % 2 else 'e'} vv" for i in range(count)]
        (folder / f"{split}.en").write_text("".join(f"{s}\n" for s in sources))
        (folder / f"{split}.fr").write_text("".join(f"{' '.join(reversed(s.split()))}\n" for s in sources))
    return ["data.corpus=files", *(f"data.{split}={folder / split}" for split in ("train", "valid", "test"))]


def train_losses(run_dir: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["train_loss"] for r in records if "train_loss" in r}


@pytest.mark.parametrize("kind", ["bahdanau-additive", "bahdanau-general-tied", "luong-general-2-layers-lstm"])
def test_a_continued_run_begins_with_the_weights_and_vocabularies_it_started_from(tmp_path, kind):
    start = train_start(tmp_path / "start", *MODELS[kind])
    trainer = Trainer(continued_config(tmp_path / "next", start, "data.corpus=copy", *MODELS[kind]), resume=False)
    weights = read_weights(resolve_checkpoint(start))
    state = trainer.model.state_dict()
    assert all(torch.equal(state[key], tensor) for key, tensor in weights.items())
    for side in ("src", "tgt"):
        assert Vocab.load(tmp_path / "next" / f"{side}.vocab.json") == Vocab.load(start / f"{side}.vocab.json")
    trainer.display.close()


def test_continued_training_takes_its_own_schedule_and_records_where_it_began(tmp_path):
    start = train_start(tmp_path / "start")
    fit(continued_config(tmp_path / "next", start, "data.corpus=copy", "train.max_steps=6"), log=quiet)
    saved = load_config(tmp_path / "next" / "config.yaml")
    assert saved.train.init_from == str(start)
    assert saved.train.lr == pytest.approx(0.002) and saved.train.warmup_steps == 100
    assert saved.train.lr_schedule == "cosine" and saved.train.min_lr == pytest.approx(0.0002)
    began = resolve_checkpoint(start)
    record = read_meta(resolve_checkpoint(tmp_path / "next"))["started_from"]
    assert record["run"] == str(start) and record["checkpoint"] == began.name
    assert record["step"] == read_meta(began)["step"] == 6
    assert len(record["weights_sha256"]) == 64
    # a rate the config gives is kept
    fit(continued_config(tmp_path / "own", start, "data.corpus=copy", "train.max_steps=2", "train.lr=0.01"), log=quiet)
    assert load_config(tmp_path / "own" / "config.yaml").train.lr == 0.01


def test_extend_vocab_appends_the_new_words_with_rows_at_the_mean_and_resumes_exactly(tmp_path):
    start = train_start(tmp_path / "start", "model.tie_embeddings=true")
    corpus = new_words_corpus(tmp_path / "corpus")
    settings = [*corpus, "model.tie_embeddings=true", "train.extend_vocab=true", "model.dropout=0.3"]
    trainer = Trainer(continued_config(tmp_path / "grown", start, *settings), resume=False)
    trainer.display.close()
    weights = read_weights(resolve_checkpoint(start))
    for side, key in (("src", "encoder.embedding.weight"), ("tgt", "decoder.embedding.weight")):
        old, new = (Vocab.load(run / f"{side}.vocab.json") for run in (start, tmp_path / "grown"))
        assert new.tokens[: len(old)] == old.tokens and set(new.tokens[len(old) :]) == {"qq", "vv"}
        grown = trainer.model.state_dict()[key]
        assert torch.equal(grown[: len(old)], weights[key])
        assert torch.allclose(grown[len(old) :], weights[key].mean(dim=0).expand(2, -1))
    bias = trainer.model.state_dict()["decoder.output.bias"]
    assert torch.allclose(bias[-2:], weights["decoder.output.bias"].mean().expand(2))
    fit(continued_config(tmp_path / "whole", start, *settings, "train.max_steps=8"), log=quiet)
    fit(continued_config(tmp_path / "split", start, *settings, "train.max_steps=4"), log=quiet)
    resumed = load_config(tmp_path / "split" / "config.yaml", ["train.max_steps=8"])
    fit(resumed, resume=True, log=quiet)
    whole, split = train_losses(tmp_path / "whole"), train_losses(tmp_path / "split")
    assert sorted(whole) == list(range(1, 9)) and whole == split  # exact, not approximately


def test_without_extend_vocab_new_words_are_unknown_and_the_vocabulary_is_the_start(tmp_path):
    start = train_start(tmp_path / "start")
    fit(
        continued_config(tmp_path / "next", start, *new_words_corpus(tmp_path / "corpus"), "train.max_steps=2"),
        log=quiet,
    )
    assert Vocab.load(tmp_path / "next" / "tgt.vocab.json") == Vocab.load(start / "tgt.vocab.json")


def test_a_sentencepiece_run_keeps_its_piece_models_and_says_so(tmp_path):
    start = train_start(tmp_path / "start", *SENTENCEPIECE)
    lines = []
    settings = [*SENTENCEPIECE, "data.corpus=copy", "train.extend_vocab=true", "train.max_steps=2"]
    fit(continued_config(tmp_path / "next", start, *settings), log=lines.append)
    assert any("SentencePiece pieces spell any text" in line for line in lines)
    for name in ("src.spm.model", "tgt.spm.model", "src.vocab.json"):
        assert (tmp_path / "next" / name).read_bytes() == (start / name).read_bytes()


def test_freezing_the_encoder_keeps_its_weights_while_the_decoder_learns(tmp_path):
    start = train_start(tmp_path / "start")
    fit(
        continued_config(tmp_path / "next", start, "data.corpus=copy", "train.max_steps=4", "train.freeze=[encoder]"),
        log=quiet,
    )
    before, after = (read_weights(resolve_checkpoint(run, "last")) for run in (start, tmp_path / "next"))
    assert all(torch.equal(after[key], before[key]) for key in before if key.startswith("encoder."))
    assert not torch.equal(after["decoder.output.weight"], before["decoder.output.weight"])


def test_the_command_line_continues_and_refuses_what_cannot_continue(tmp_path, capsys):
    start = train_start(tmp_path / "start")
    settings = [arg for override in [*TINY, "train.max_steps=2"] for arg in ("--set", override)]
    run_ok(
        capsys,
        "train",
        *settings,
        "--set",
        f"train.run_dir={tmp_path / 'next'}",
        "--from",
        str(start),
        "--freeze",
        "embeddings",
    )
    assert load_config(tmp_path / "next" / "config.yaml").train.freeze == ["embeddings"]
    record = read_meta(resolve_checkpoint(tmp_path / "next"))["started_from"]
    assert training_summary(resolve_checkpoint(tmp_path / "next"))["started_from"] == record  # evaluation.json's
    _, client = serving(str(tmp_path / "next"))
    assert client.get("/v1/models").json()["models"][0]["training"]["started_from"] == record  # the explorer's
    other = ["--set", f"train.run_dir={tmp_path / 'other'}"]
    (tmp_path / "empty").mkdir()
    assert "not a run directory" in run_error(capsys, "train", *settings, *other, "--from", str(tmp_path / "empty"))
    line = run_error(capsys, "train", *settings, *other, "--set", "model.rnn=lstm", "--from", str(start))
    assert "model.rnn is 'lstm' but" in line and "trained with 'gru'" in line
    line = run_error(
        capsys, "train", *settings, *other, *("--set", "data.tokenizer=sentencepiece"), "--from", str(start)
    )
    assert "data.tokenizer is 'sentencepiece'" in line
    assert "init_from" in run_error(capsys, "train", *settings, *other, "--extend-vocab")
    assert "--resume" in run_error(capsys, "train", "--resume", str(tmp_path / "next"), "--from", str(start))
    assert not (tmp_path / "other").exists()


def test_mixing_draws_its_share_of_batches_from_the_starting_data_and_resumes_exactly(tmp_path):
    start = train_start(tmp_path / "start")
    settings = [*new_words_corpus(tmp_path / "corpus"), "data.mix_previous=0.5", "data.batch_tokens=60"]
    trainer = Trainer(continued_config(tmp_path / "mixed", start, *settings), resume=False)
    trainer.display.close()
    new_pairs = 60
    batches = trainer.sampler.epoch_batches(0)
    old = [batch for batch in batches if min(batch) >= new_pairs]
    assert len(old) == len(batches) - len(old) and all(max(b) < new_pairs for b in batches if min(b) < new_pairs)
    target = trainer.bundle.tgt_vocab
    old_text = [target.decode(list(trainer.bundle.train.tgt_ids[i])) for i in old[0]]
    new_text = [target.decode(list(trainer.bundle.train.tgt_ids[i])) for i in range(new_pairs)]
    assert all("qq" not in words for words in old_text), "old batches hold the starting run's corpus"
    assert all("<unk>" in words for words in new_text), "encoded with the starting vocabularies"
    record = json.loads((tmp_path / "mixed" / "started_from.json").read_text())
    assert record["mixed_data"]["corpus"] == "reverse"
    fit(continued_config(tmp_path / "whole", start, *settings, "train.max_steps=8"), log=quiet)
    fit(continued_config(tmp_path / "split", start, *settings, "train.max_steps=4"), log=quiet)
    resumed = load_config(tmp_path / "split" / "config.yaml", ["train.max_steps=8"])
    fit(resumed, resume=True, log=quiet)
    whole, split = train_losses(tmp_path / "whole"), train_losses(tmp_path / "split")
    assert sorted(whole) == list(range(1, 9)) and whole == split  # exact, the old data's batches included


def test_a_continued_run_locates_each_corpus_it_reads_once(tmp_path, monkeypatch):
    """Its own corpus, encoded with the starting vocabularies, and the starting run's, mixed in:
    each located once (every prefix looked up once), and each prepared from what was located."""
    start = train_start(tmp_path / "start")
    settings = [*new_words_corpus(tmp_path / "corpus"), "data.mix_previous=0.5", "data.batch_tokens=60"]
    lookups = CorpusLookups(monkeypatch)
    Trainer(continued_config(tmp_path / "mixed", start, *settings), resume=False).display.close()
    assert [cfg.corpus for cfg, _ in lookups.located] == ["files", "reverse"]
    assert len(lookups.found) == len(set(lookups.found)) == 3  # data.train, data.valid, data.test
    assert lookups.keyed == [files for _, files in lookups.located]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (["data.mix_previous=0.3"], "data.mix_previous mixes in a starting run's data: set train.init_from"),
        (
            ["data.mix_previous=0.3", "train.init_from=x", *SENTENCEPIECE, "data.subword_sampling=0.1"],
            "data.mix_previous and data.subword_sampling cannot be combined",
        ),
        (["data.mix_previous=1.0", "train.init_from=x"], "data.mix_previous"),
    ],
)
def test_mixing_needs_a_start_and_a_share_below_one(settings, expected):
    with pytest.raises(UserError, match=re.escape(expected)):
        load_config(None, [*TINY, *settings])

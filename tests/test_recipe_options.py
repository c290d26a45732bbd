"""Recipe options, each checked against its definition: the loss without </s> smoothing and its
normalizations, word dropout, locked dropout, the fed vector after dropout, three-way tied
embeddings and subword sampling."""

import json
import math

import pytest
import torch

from attnmt.config import Config, ModelConfig, load_config
from attnmt.config_files import ConfigError
from attnmt.data.batching import build_data, collate
from attnmt.loading import ModelSpec, load
from attnmt.loss import loss_denominator, token_loss
from attnmt.metrics import bleu
from attnmt.models.dropout import LockedDropout, WordDropout
from attnmt.models.seq2seq import build_model
from attnmt.subwords import Resegmenter
from attnmt.train import Trainer, fit
from attnmt.vocab import EOS, PAD, UNK

# A reversal task small enough for a few training steps in a second.
SMALL = ["data.corpus=reverse", "data.synthetic_size=200", "data.valid_size=20", "data.test_size=20", "train.threads=1"]
SIZES = ["model.embedding_size=16", "model.encoder_hidden=16", "model.decoder_hidden=16"]


def tiny_config(run_dir, *overrides: str):
    return load_config(None, [*SMALL, *SIZES, "train.valid_bleu_sentences=20", f"train.run_dir={run_dir}", *overrides])


def quiet(*_args, **_kwargs) -> None:
    pass


def reference_loss(logits: torch.Tensor, targets: torch.Tensor, epsilon: float, smooth_eos: bool) -> float:
    """-sum_t sum_c q_t(c) log p_t(c), q written out class by class from its definition."""
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    vocab, total = logits.shape[-1], 0.0
    for row, target in zip(log_probs.reshape(-1, vocab), targets.reshape(-1).tolist(), strict=True):
        if target == PAD:
            continue
        q = [0.0] * vocab
        if smooth_eos:
            q = [epsilon / vocab] * vocab
            q[target] += 1.0 - epsilon
        elif target == EOS:
            q[EOS] = 1.0
        else:
            q = [0.0 if c == EOS else epsilon / (vocab - 1) for c in range(vocab)]
            q[target] += 1.0 - epsilon
        total -= sum(weight * float(row[c]) for c, weight in enumerate(q))
    return total


@pytest.mark.parametrize("smooth_eos", [True, False])
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_token_loss_is_the_cross_entropy_with_its_smoothed_targets(smooth_eos, epsilon):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 9)
    targets = torch.tensor([[4, 5, EOS, PAD, PAD], [6, 7, 8, 4, EOS], [EOS, PAD, PAD, PAD, PAD]])
    loss = token_loss(logits, targets, epsilon, smooth_eos)
    assert float(loss) == pytest.approx(reference_loss(logits, targets, epsilon, smooth_eos), rel=1e-5)


def test_without_eos_smoothing_the_eos_target_is_one_hot_and_eos_gets_no_mass():
    logits = torch.zeros(1, 2, 6)
    logits[0, 0, EOS] = 50.0  # sure of </s> where the target is </s>
    logits[0, 1, 4] = 50.0  # sure of the word where the target is a word
    targets = torch.tensor([[EOS, 4]])
    # a one-hot </s> target costs nothing when the model is sure of it; smoothing it would cost
    assert float(token_loss(logits[:, :1], targets[:, :1], 0.1, smooth_eos=False)) < 1e-12
    assert float(token_loss(logits[:, :1], targets[:, :1], 0.1, smooth_eos=True)) > 1.0
    # moving a word position's logit mass onto </s> changes nothing of its smoothing term
    shifted = logits.clone()
    shifted[0, 1, EOS] = 50.0
    assert float(token_loss(shifted[:, 1:], targets[:, 1:], 0.0, smooth_eos=False)) == pytest.approx(math.log(2))


def test_loss_denominators_count_what_they_say():
    batch = collate([0, 1], [[5, 6], [7]], [[4, 5, 6], [7]])
    lengths = torch.tensor([3, 1]).numpy()
    assert loss_denominator(lengths, "tokens") == int((batch.tgt_out != PAD).sum()) == 6
    words = (batch.tgt_out != PAD) & (batch.tgt_out != EOS)
    assert loss_denominator(lengths, "tokens_without_eos") == int(words.sum()) == 4
    assert loss_denominator(lengths, "sentences") == 2


def test_word_dropout_zeroes_whole_tokens_and_keeps_the_expectation():
    torch.manual_seed(0)
    dropout = WordDropout(0.25).train()
    embedded = torch.rand(200, 50, 8) + 0.5
    dropped = dropout(embedded)
    zeroed = dropped.eq(0).all(dim=-1)  # (B, T): a token is dropped whole or not at all
    kept = ~zeroed
    torch.testing.assert_close(dropped[kept], embedded[kept] / 0.75)
    assert dropped.eq(0).sum() == zeroed.sum() * 8
    assert abs(float(zeroed.float().mean()) - 0.25) < 0.01  # 10,000 tokens: 5 standard deviations
    assert torch.equal(dropout.eval()(embedded), embedded)


def test_no_word_dropout_draws_no_random_numbers():
    state = torch.get_rng_state()
    WordDropout(0.0).train()(torch.ones(2, 3, 4))
    assert torch.equal(torch.get_rng_state(), state)


def luong(**settings):
    torch.manual_seed(0)
    config = ModelConfig(
        embedding_size=6, encoder_hidden=5, decoder_hidden=7, decoder="luong", dropout=0.5, init_scale=0.5, **settings
    )
    return build_model(config, 11, 13)


@pytest.mark.parametrize("feed_dropout", [True, False])
def test_the_fed_vector_is_the_one_the_output_layer_reads_only_with_feed_dropout(feed_dropout):
    model = luong(feed_dropout=feed_dropout).train()
    src, lengths = torch.tensor([[4, 5, 6], [7, 8, 0]]), torch.tensor([3, 2])
    source = model.encode(src, lengths)
    torch.manual_seed(1)
    log_probs, state, _ = model.next_log_probs(torch.tensor([2, 2]), model.init_state(source), source)
    fed = state.feed  # (B, H)
    assert fed.eq(0).any() == feed_dropout  # tanh outputs are never exactly 0: zeros come from dropout
    if feed_dropout:
        torch.testing.assert_close(log_probs, model.decoder.output(fed).log_softmax(-1))
    model.eval()  # in inference dropout is off: both settings feed and read the same vector
    log_probs, state, _ = model.next_log_probs(torch.tensor([2, 2]), model.init_state(source), source)
    torch.testing.assert_close(log_probs, model.decoder.output(state.feed).log_softmax(-1))


def test_feed_dropout_needs_the_luong_decoder_with_input_feeding():
    with pytest.raises(ValueError, match="feed_dropout applies to the luong decoder with input_feeding"):
        ModelConfig(decoder="bahdanau", feed_dropout=True)
    with pytest.raises(ValueError, match="feed_dropout applies"):
        ModelConfig(decoder="luong", input_feeding=False, feed_dropout=True)


def test_opennmt_pys_attention_options_need_their_decoder_and_score():
    with pytest.raises(ValueError, match="attentional_tanh: false applies to the luong decoder only"):
        ModelConfig(decoder="bahdanau", attentional_tanh=False)
    with pytest.raises(ValueError, match="attention_bias applies to additive attention only"):
        ModelConfig(attention="dot", attention_bias=True)


def test_three_way_tying_shares_one_matrix_and_survives_a_checkpoint(tmp_path):
    shared = ["data.shared_vocab=true", "model.tie_embeddings=true", "model.tie_source_embeddings=true"]
    config = tiny_config(tmp_path / "run", "train.max_steps=3", "train.valid_every=3", *shared)
    fit(config, log=quiet)
    model = load(ModelSpec(tmp_path / "run")).model
    encoder, decoder = model.encoder.embedding.weight, model.decoder.embedding.weight
    assert encoder is decoder is model.decoder.output.weight
    assert float(encoder.detach().abs().sum()) > 0


def test_source_tying_needs_one_vocabulary():
    with pytest.raises(ConfigError, match=r"tie_source_embeddings needs data\.shared_vocab"):
        load_config(None, ["model.tie_source_embeddings=true"])
    assert Config.model_validate({"data": {"shared_vocab": True}, "model": {"tie_source_embeddings": True}})
    with pytest.raises(ValueError, match="one vocabulary for both sides"):
        sizes = {"embedding_size": 4, "encoder_hidden": 4, "decoder_hidden": 4}
        build_model(ModelConfig(tie_source_embeddings=True, **sizes), 9, 10)


def test_bleu_reports_the_hypothesis_to_reference_length_ratio():
    score = bleu(["a b", "c d e"], [["a b c d"], ["c d e f g h"]])
    assert score.length_ratio == pytest.approx(5 / 10)


def test_validation_records_the_length_ratio(tmp_path):
    fit(tiny_config(tmp_path / "run", "train.max_steps=4", "train.valid_every=4"), log=quiet)

    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    ratios = [r["valid_length_ratio"] for r in records if "valid_bleu" in r]
    assert ratios and all(ratio > 0 for ratio in ratios)


SENTENCEPIECE = ["data.tokenizer=sentencepiece", "data.spm_vocab_size=40", "data.subword_sampling=0.3"]


def test_subword_sampling_resegments_the_same_text_and_repeats_a_batch_exactly(tmp_path):
    config = tiny_config(tmp_path / "run", *SENTENCEPIECE)
    bundle = build_data(config.data)
    codec, train = bundle.codec, bundle.train
    resegment = Resegmenter(codec, 0.3, seed=1)
    indices = list(range(40))
    src, tgt = resegment(indices, train.src_ids, train.tgt_ids, epoch=0, position=7)
    changed = 0
    for i in indices:
        for ids, sampled, vocab, tokenizer in (
            (train.src_ids[i], src[i], codec.src_vocab, codec.src_tokenizer),
            (train.tgt_ids[i], tgt[i], codec.tgt_vocab, codec.tgt_tokenizer),
        ):
            assert UNK not in sampled  # the vocabulary holds every piece a sampled segmentation may use
            assert tokenizer.detokenize(vocab.decode(sampled)) == tokenizer.detokenize(vocab.decode(ids))
            changed += list(sampled) != list(ids)
    assert changed > 10  # 80 sentences, merges dropped with probability 0.3
    assert (src, tgt) == resegment(indices, train.src_ids, train.tgt_ids, epoch=0, position=7)
    assert (src, tgt) != resegment(indices, train.src_ids, train.tgt_ids, epoch=0, position=8)


def test_a_run_with_subword_sampling_resumes_bit_for_bit(tmp_path, monkeypatch):
    batches = []
    resample = Resegmenter.__call__
    monkeypatch.setattr(Resegmenter, "__call__", lambda *args, **kw: batches.append(1) or resample(*args, **kw))
    steps = ["train.valid_every=5", "train.log_every=1"]
    fit(tiny_config(tmp_path / "whole", *SENTENCEPIECE, *steps, "train.max_steps=10"), log=quiet)
    fit(tiny_config(tmp_path / "split", *SENTENCEPIECE, *steps, "train.max_steps=5"), log=quiet)
    fit(tiny_config(tmp_path / "split", *SENTENCEPIECE, *steps, "train.max_steps=10"), resume=True, log=quiet)

    def losses(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [record["train_loss"] for record in map(json.loads, lines) if "train_loss" in record]

    assert len(losses(tmp_path / "whole")) == 10 and losses(tmp_path / "whole") == losses(tmp_path / "split")
    assert len(batches) >= 20  # every training batch of the three runs was resegmented


def test_the_loss_is_per_token_of_the_sampled_segmentation(tmp_path):
    trainer = Trainer(tiny_config(tmp_path / "run", *SENTENCEPIECE), resume=False, log=quiet)
    indices = trainer.sampler.epoch_batches(0)[0].tolist()
    batch = trainer.batches(indices, 0, 0)
    sampled = int((batch.tgt_out != PAD).sum())
    assert sampled != int(trainer.sampler.tgt_lengths[indices].sum()) + len(indices)  # the segmentation changed
    trainer.train_step(indices, batch)
    assert trainer.progress.tokens == sampled  # the loss's denominator and throughput count these tokens


def test_subword_sampling_needs_sentencepiece():
    with pytest.raises(ConfigError, match=r"data\.subword_sampling needs data\.tokenizer: sentencepiece"):
        load_config(None, ["data.subword_sampling=0.1"])


def test_locked_dropout_draws_one_mask_a_sentence_for_every_step():
    torch.manual_seed(0)
    dropout = LockedDropout(0.5).train()
    x = torch.rand(64, 9, 16) + 0.5
    dropped = dropout(x)
    kept = dropped != 0  # (B, T, D)
    assert torch.equal(kept, kept[:, :1].expand_as(kept))  # a feature is dropped at every step or at none
    torch.testing.assert_close(dropped[kept], x[kept] / 0.5)
    assert 0.4 < float(kept[:, 0].float().mean()) < 0.6
    assert not torch.equal(kept[0, 0], kept[1, 0])  # each sentence its own mask
    assert torch.equal(dropout.eval()(x), x)


@pytest.mark.parametrize("decoder", ["bahdanau", "luong"])
def test_a_locked_model_drops_the_same_embedding_features_at_every_step(decoder):
    torch.manual_seed(0)
    config = ModelConfig(
        embedding_size=6, encoder_hidden=5, decoder_hidden=7, decoder=decoder, dropout=0.5, locked_dropout=True
    )
    model = build_model(config, 11, 13).train()
    assert isinstance(model.encoder.dropout, LockedDropout) and isinstance(model.decoder.dropout, LockedDropout)
    seen = []
    model.decoder.dropout.register_forward_hook(lambda module, inputs, output: seen.append((inputs[0], output)))
    src, lengths = torch.tensor([[4, 5, 6], [7, 8, 9]]), torch.tensor([3, 3])
    model(src, lengths, torch.tensor([[2, 4, 5, 6], [2, 7, 8, 9]]))
    embedded, dropped = seen[0]  # the target embeddings (B, T, E), first through the decoder's dropout
    zeroed = (dropped == 0) & (embedded != 0)
    assert zeroed.any() and torch.equal(zeroed, zeroed[:, :1].expand_as(zeroed))


def test_locked_dropout_is_refused_with_what_steps_one_token_at_a_time():
    with pytest.raises(ValueError, match="feed_dropout and locked_dropout cannot be combined"):
        ModelConfig(decoder="luong", feed_dropout=True, locked_dropout=True)
    with pytest.raises(ConfigError, match=r"model\.locked_dropout needs train\.teacher_forcing: 1\.0"):
        load_config(None, ["model.locked_dropout=true", "train.teacher_forcing=0.5"])

"""Validation during training: teacher-forced loss and perplexity on the validation split, and
greedy BLEU on its first sentences (sacreBLEU's, and for a word model also on word tokens with
<unk> one token), the numbers a checkpoint is kept or training stopped by."""

from __future__ import annotations

import torch

from attnmt.config import Config
from attnmt.data.batching import DataBundle, collate
from attnmt.loss import token_loss
from attnmt.metrics import bleu, perplexity, tokenized_bleu
from attnmt.precision import autocast
from attnmt.search.decode import decode_all
from attnmt.search.options import SearchOptions, SearchOverrides
from attnmt.tokenize import WordTokenizer
from attnmt.vocab import SPECIALS, UNK


@torch.no_grad()
def validate(model, bundle: DataBundle, config: Config, device: torch.device) -> dict[str, float]:
    """Teacher-forced loss/perplexity on the whole validation split, greedy BLEU on its first
    `valid_bleu_sentences` sources (all their references)."""
    was_training = model.training
    model.eval()
    loss_sum, tokens = 0.0, 0
    sampler = bundle.sampler(config.data, shuffle=False, seed=0, split="valid")
    for indices in sampler.batches():
        batch = collate(indices, bundle.valid.src_ids, bundle.valid.tgt_ids).to(device)
        with autocast(device, config.train.precision):
            logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
        loss_sum += float(token_loss(logits, batch.tgt_out))
        tokens += batch.num_tgt_tokens
    results = {"valid_loss": loss_sum / max(1, tokens), "valid_ppl": perplexity(loss_sum, tokens)}
    examples = bundle.valid.examples[: config.train.valid_bleu_sentences]
    if examples:
        codec = bundle.codec
        greedy = SearchOptions.from_config(config.decode, SearchOverrides(beam_size=1))
        sources = [codec.encode_source(example.src) for example in examples]
        hypotheses = decode_all(
            model,
            sources,
            greedy,
            batch_size=config.decode.batch_size,
            device=device,
            fixed_shapes=config.decode.cuda_graphs and device.type == "cuda",
        )
        texts = [codec.decode_target(h[0].tokens) for h in hypotheses]
        score = bleu(texts, [e.refs for e in examples], lowercase=config.data.lowercase)
        assert score.length_ratio is not None  # None only if every reference is empty; shown below as a number
        results["valid_bleu"], results["valid_length_ratio"] = score.score, score.length_ratio
        if config.data.tokenizer == "word":
            # A word model writes <unk> for the words outside its vocabulary, which sacreBLEU's own
            # tokenization splits into three tokens, lengthening and lowering its figures; so also on
            # word tokens with <unk> one token (the tokenized BLEU `attnmt evaluate` and the peers
            # benchmark report).
            words = WordTokenizer(config.data.tgt_lang, lowercase=True, keep=[SPECIALS[UNK]])
            hypothesis_words = [words.tokenize(text) for text in texts]
            reference_words = [[words.tokenize(ref) for ref in example.refs] for example in examples]
            on_words = tokenized_bleu(hypothesis_words, reference_words)
            assert on_words.length_ratio is not None  # as above: the references are not all empty
            results["valid_tokenized_bleu"], results["valid_tokenized_length_ratio"] = (
                on_words.score,
                on_words.length_ratio,
            )
    model.train(was_training)
    return results

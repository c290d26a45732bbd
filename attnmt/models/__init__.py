"""Models: the two families of encoder-decoder and the parts they are made of.

    attention    stateless attention scorers: (query, keys, projected_keys, mask) -> (context, weights)
    dropout      word dropout and locked (variational) dropout
    rnn          the GRU / LSTM of the encoder and the decoders, over a sequence or one step by its gates
    encoder      embedding + (bidirectional, multi-layer) GRU or LSTM over packed sequences
    decoder      Bahdanau- and Luong-style decoders, the bridge that starts them, and their state
    multihead    multi-head attention and sinusoidal positions
    transformer  `Transformer`: self-attention encoder and decoder layers, the decoder's key/value cache
    seq2seq      `Seq2Seq` (encoder + decoder), `build_model` (the one reader of the model config)

Both families, `Seq2Seq` (`model.family: rnn`) and `Transformer` (`transformer`), have the
same calls. Training and validation call the model itself: `model(src (B, S), src_lengths (B,),
tgt_in (B, T))` -> logits (B, T, V) and attention (B, T, S). What every search, the scorer and
the explorer ask of a model is the step interface (`search.options.StepModel`): `encode` a
source batch once (-> the encoder output), `init_state` from it (-> the decoder state: a
recurrent decoder's hidden state, a transformer's key/value cache), and `next_log_probs` for one
step, returning the log-probabilities (B, V), the new state and the step's attention over the
source (B, S); the encoder output and the state each have `index_select(rows)`, which repeats
rows for K beams and reorders hypotheses. A transformer's step attention is the cross-attention
of one decoder layer averaged over its heads; `Transformer.attention_maps` gives every layer and
head. The ONNX export and continued training also read a model's parts (`encoder.embedding`,
`decoder.embedding`, `decoder.output`).
Import from the modules themselves: this package's own module imports nothing.
"""

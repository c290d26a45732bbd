"""Models: the recurrent encoder-decoder and the parts it is made of.

    attention  stateless attention scorers: (query, keys, projected_keys, mask) -> (context, weights)
    dropout    word dropout and locked (variational) dropout
    rnn        the GRU / LSTM of the encoder and the decoders, over a sequence or one step by its gates
    encoder    embedding + (bidirectional, multi-layer) GRU or LSTM over packed sequences
    decoder    Bahdanau- and Luong-style decoders, the bridge that starts them, and their state
    seq2seq    `Seq2Seq` (encoder + decoder), `build_model` (the one reader of the model config)

What every search, the scorer and the explorer ask of a model is the step interface
(`search.options.StepModel`): `encode` a source batch once, `init_state` from it, and
`next_log_probs` for one step, returning the new state and the step's attention over the source;
training calls the model itself, and the ONNX export and continued training read its parts.
Import from the modules themselves: this package's own module imports nothing.
"""

"""attnmt: attention-based RNN sequence-to-sequence translation in PyTorch.

The package is flat, one concept per module (sweeps are one sub-package), and imports flow
one way (tests/test_layering.py holds every module to its row of the table in docs/design.md):

    leaves      utils, attention, encoder, schedules, tables, distributed
    text        config, tokenize, vocab, synthetic, download, textfiles, metrics, plot, runlog
    data        corpora -> data -> stats
    model       decoder -> model -> search, checkpoint
    workflows   train, translate (never each other)
    sweeps      sweep/: spec, store -> report -> run
    entry       cli (the only reader of argv), __main__
"""

__version__ = "0.1.0"

"""Speed benchmarks for attnmt, against a textbook reference written the way tutorials do it.

- `speed`: `python -m benchmarks.speed` measures training throughput, useful-FLOP fraction,
  peak memory and decoding speed per model config, for attnmt and the reference, in one run.
- `naive`: the textbook seq2seq (same function and sizes as attnmt's model, slow on purpose
  only where tutorials are: a Python step loop that recomputes the attention keys).
- `decoding`: greedy and beam decoding speed of both implementations.
- `flops`: the analytic FLOP count of a model config and the machine's matmul ceiling.
- `measure`: the machine's description, peak memory and synchronised timers.
- `report`: rich and Markdown tables of the results.
- `profiling`: torch.profiler's top operators over a few training steps.

Nothing in `attnmt` imports this package.
"""

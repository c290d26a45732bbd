"""Speed benchmarks for attnmt, against textbook references and against real peers.

- `speed`: `python -m benchmarks.speed` measures training throughput, useful-FLOP fraction,
  peak memory and decoding speed per model config, for attnmt and the references, repeated
  and alternating, in one run.
- `references`: the references by name. `d2l`: d2l.ai's PyTorch code as written (separate
  W_q / W_k inside the step loop, one output layer after it); `bentrevett`: bentrevett's
  tutorial design (attention on the query repeated S times, output layers inside the loop).
  Both compute attnmt's function given its weights.
- `decoding`: greedy and beam decoding speed of every implementation.
- `peers`: `python -m benchmarks.peers` runs attnmt, OpenNMT-py and JoeyNMT on the same data,
  shapes, batches and threads (speed, and quality after the same wall-clock budget).
- `flops`: the analytic FLOP count of a model config and the machine's matmul ceiling.
- `measure`: the machine's description, peak memory, synchronised timers, repeats.
- `report`: rich and Markdown tables of the results.
- `profiling`: torch.profiler's top operators over a few training steps or a decoding.
- `ab_search`: this checkout's search against a git revision's, outputs checked identical.
- `optimizer`: fused against default Adam.
- `fsync`: what syncing a checkpoint to the disk costs.

Nothing in `attnmt` imports this package.
"""

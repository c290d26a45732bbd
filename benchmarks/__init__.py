"""Speed benchmarks for attnmt, against textbook references and against real peers: timing only.

Each benchmark is `python -m benchmarks.NAME` and writes a raw result (JSON recording its command
and machine) that the README and docs quote. The index below lists every module and sub-package,
one line each (`tests/test_tools.py` holds it to the files present):

- `speed`: training throughput, useful-FLOP fraction, peak memory and decoding speed per model
  config, for attnmt and the references, repeated and alternating, in one run.
- `speed_models`: the model configs the speed benchmarks time and the data they train on, each
  config built as an attnmt model and as every reference that can express it, with one set of weights.
- `report`: the speed benchmark's results as tables, rich on the terminal and Markdown
  (`markdown_table` is the one Markdown renderer every benchmark and `tools.quote` use).
- `references`: the textbook references by name, each computing attnmt's function given its weights.
- `d2l`: d2l.ai's PyTorch code as written (separate W_q / W_k inside the step loop, one output
  layer after it).
- `bentrevett`: bentrevett's tutorial design (attention on the query repeated S times, output
  layers inside the loop).
- `decoding`: greedy and beam decoding speed of every implementation.
- `flops`: the analytic FLOP count of a model config and the machine's matmul ceiling.
- `measure`: the machine's description, peak memory, synchronised timers, repeats, raw results.
- `peers`: attnmt, OpenNMT-py and JoeyNMT on the same data, shapes, batches and threads (speed,
  and quality after the same wall-clock budget).
- `gpu`: training and decoding on a CUDA GPU in float32 and bf16, and CUDA graphs for the step.
- `tf32`: TensorFloat-32 on a CUDA GPU: how far it moves the encoder from float32, and its speed.
- `kernels`: the decoder's one-step kernels against the alternatives they replaced.
- `engines`: decoding a trained run by every engine (torch, onnxruntime; float32, int8).
- `large_file`: translating a large file as a user does: time, and memory that stays flat.
- `serving`: load test of `attnmt serve`, concurrent clients with and without dynamic batching.
- `profiling`: torch.profiler's top operators over a few training steps or a decoding.
- `ab_search`: this checkout's search against a git revision's, outputs checked identical.
- `pareto`: decoding configurations of trained runs, BLEU against generated tokens/s, and the
  Pareto front.
- `steering`: required phrases drawn from the references, and prefixes, on a run's test split.
- `glossary`: a glossary built from a run's training pairs, on its test split: term accuracy, BLEU
  and time with and without it (quality first).
- `markup`: tags on test source spans carried to the translation, against a statistical
  aligner's placement (quality, not timing; needs eflomal).
- `alignment_heads`: a transformer's cross-attention, layer by layer and head by head, as word
  alignments against a statistical aligner's (quality, not timing; needs eflomal; the model it
  reads is trained from `benchmarks/configs/alignment-transformer.yaml`).
- `documents`: paragraphs built from a run's test split, translated in document mode, as one
  line each, and sentence by sentence (quality, not timing).
- `stopping`: each search's stopping rule and length penalty on the same weights: output length,
  brevity penalty and BLEU (quality, not timing).
- `adaptation`: a Tatoeba model continued on Multi30k (plain, with the old data mixed in, with
  its word vocabulary extended) against a model trained there from nothing, on both domains' test
  sets at 5, 10, 20 and 40 minutes of training (quality, not timing; its probe times updates).
- `adaptation_report`: the adaptation study's summary, table and plot, read from its raw result alone.
- `scale`: preparing corpora of up to millions of pairs and training on them: time, disk and
  memory, against the in-memory path.
- `optimizer`: fused against default Adam.
- `fsync`: what syncing a checkpoint to the disk costs.
- `web`: the exported web page in headless Chromium against Python over the same graphs:
  identical outputs, tokens/s, time to the first translation, the folder's size.
- `web_tokenizers`: the page's tokenizers (run in Node) against attnmt's on whole test sets.
- `chromium`: headless Chromium driven by Playwright, without a browser download.

Nothing in `attnmt` imports this package, and nothing here imports `tools`.
"""

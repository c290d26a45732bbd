"""Tools that work on results and documents, never timing anything: each is `python -m tools.NAME`.

The index below lists every module of this package, one line each (`tests/test_tools.py` holds it
to the modules present):

- `quote`: the tables and figures in the README and docs, rewritten from (or checked against)
  the committed raw results and the layering table of `tests/test_layering.py`.
- `figures`: a figure's expression (`<!-- figure: FILE EXPR {FORMAT} -->`) computed: paths into
  a raw result's JSON and arithmetic over them; `quote` and `verdicts` read raw results through it.
- `machines`: the machine a figure ran on, named in prose and checked against its raw result.
- `verdicts`: every verdict word (met, missed, ahead, level, within noise) recomputed by the
  verdict rules from its raw result, and a race's comparisons pooled over its seeds.
- `multi30k_table`: the Multi30k results table, collected from the evaluations
  `scripts/multi30k-table.sh` writes.
- `attention_focus`: where trained models attend, the share of attention on each run's first
  source position.
- `init_parts`: which part of a model's initialization decides whether its attention learns to
  align: a few updates with one part drawn differently.
- `browser`: the attention explorer in headless Chromium, for the docs' screenshots and the
  browser test.
- `distillation_runs`: the distillation study's training record (teachers, distillation,
  students), collected from the folder `scripts/distillation.sh` trains in.
- `data_stats`: `attnmt data stats` over several configs (pairs, lengths, coverage, the padding
  share of the batches), kept as one raw result with the command and machine.
- `raw_results`: which raw results may be quoted (a recorded commit, no edit of `attnmt/` or
  `benchmarks/` while the run ran, the content hash it was written with), and the older files
  exempted (`LEGACY`); `quote` refuses the others.
- `docs_site`: the documentation site's MkDocs hooks (mkdocs.yml names the file; not a command):
  the command-line and configuration references generated from the code, and the repository
  files the pages link to copied into the site.
- `screen_results`: a GPU screen's sweep trials (`scripts/screen-on-gpu.sh`) grouped into points,
  with their seeds' beam scores on the validation split, as one raw result and its table.

Tools import `attnmt` and `benchmarks` (whose reports render the tables they quote; `init_parts`
also wraps the trainer's model builder); nothing in
`attnmt` or `benchmarks` imports them. These modules were under `benchmarks/` before, so raw results
made then record `python -m benchmarks.multi30k_table` or `python -m benchmarks.attention_focus`:
the same programs, now `python -m tools.multi30k_table` and `python -m tools.attention_focus`.
"""

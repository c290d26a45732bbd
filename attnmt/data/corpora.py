"""The corpora attnmt knows by name, and the one door to every corpus.

`load_corpus(cfg)` turns a `DataConfig` into `CorpusSplits` of raw text (untokenized, original
casing), `stream_corpus` into a `CorpusStream`, `corpus_files` names the files either reads.

Built in: Tatoeba English-French and Multi30k (downloaded corpora, found or fetched and
verified by `download.locate`: `data.data_dir`, then `$ATTNMT_DATA`, then the cache) and the
synthetic tasks (generated). The user's own files and TSV are read by `parallel_files`; the
subset, split and filters every corpus passes are `splits` and `pair_filters`.
"""

from __future__ import annotations

from pathlib import Path

from attnmt.config import DataConfig
from attnmt.data import synthetic
from attnmt.data.distillation_record import check_student
from attnmt.data.download import locate
from attnmt.data.parallel_files import (
    load_user_data,
    prefix_paths,
    read_parallel,
    read_tsv,
    split_paths,
    stream_parallel,
    stream_user_data,
    streamable,
    user_files,
)
from attnmt.data.splits import CorpusSplits, CorpusStream, assemble, streamed
from attnmt.data.textfiles import read_lines
from attnmt.utils import UserError

TATOEBA_ATTRIBUTION = (
    "Sentence pairs from the Tatoeba Project (https://tatoeba.org), contributors of tatoeba.org, "
    "CC BY 2.0 FR; prepared by manythings.org/anki."
)
MULTI30K_ATTRIBUTION = (
    "Multi30K (https://github.com/multi30k/dataset), derived from Flickr30K, for non-commercial research "
    "and education; cite Elliott et al. 2016 (doi:10.18653/v1/W16-3210), for French and test_2017 "
    "Elliott et al. WMT 2017 (W17-4718), for Czech Barrault et al. WMT 2018."
)
TATOEBA_LANGUAGES = ("en", "fr")
# Languages of each Multi30k task 1 split (Czech was only translated for the first three).
MULTI30K_SPLITS = {
    "train": ("en", "de", "fr", "cs"),
    "val": ("en", "de", "fr", "cs"),
    "test_2016_flickr": ("en", "de", "fr", "cs"),
    "test_2017_flickr": ("en", "de", "fr"),
}
# The splits and languages the dataset ships tokenized references for (data/task1/tok).
MULTI30K_TOKENIZED = {split: ("en", "de", "fr") for split in ("val", "test_2016_flickr", "test_2017_flickr")}
KNOWN_CORPORA = ("tatoeba-eng-fra", "multi30k", "files", "tsv", *synthetic.TASKS)


def _check_direction(corpus: str, cfg: DataConfig, languages: tuple[str, ...]) -> None:
    if cfg.src_lang in languages and cfg.tgt_lang in languages and cfg.src_lang != cfg.tgt_lang:
        return
    known = ", ".join(f"{src}-{tgt}" for src in languages for tgt in languages if src != tgt)
    raise UserError(f"data.src_lang/tgt_lang: {corpus} has no {cfg.src_lang}-{cfg.tgt_lang} pair; known pairs: {known}")


def _replacing_train(cfg: DataConfig) -> list[tuple[str, str]] | None:
    """The pairs `data.train` gives a built-in corpus in place of its own training pairs (a
    distilled corpus, say: `attnmt distill`), or None when it gives none."""
    if cfg.train is None:
        return None
    check_student(cfg.train, cfg.src_lang, cfg.tgt_lang)
    return read_parallel(*prefix_paths(cfg.train, "train", cfg))


def _load_tatoeba(cfg: DataConfig) -> CorpusSplits:
    _check_direction("tatoeba-eng-fra", cfg, TATOEBA_LANGUAGES)
    pairs = read_tsv(locate("tatoeba-eng-fra/fra.txt.gz", cfg.data_dir))
    if cfg.src_lang == "fr":
        pairs = [(fr, en) for en, fr in pairs]
    return assemble(cfg, pairs, None, None, TATOEBA_ATTRIBUTION, replaced_by=_replacing_train(cfg))


def _check_multi30k_split(split: str, key: str, cfg: DataConfig) -> None:
    if split not in MULTI30K_SPLITS:
        raise UserError(f"data.{key}: unknown multi30k split {split!r}; known: {', '.join(MULTI30K_SPLITS)}")
    for lang in (cfg.src_lang, cfg.tgt_lang):
        if lang not in MULTI30K_SPLITS[split]:
            having = ", ".join(name for name, langs in MULTI30K_SPLITS.items() if lang in langs)
            raise UserError(f"data.{key}: multi30k split {split} has no {lang!r} text; splits with it: {having}")


def _multi30k_paths(cfg: DataConfig) -> list[tuple[Path, Path]]:
    """(source, target) files of the training (or the replacing data.train), valid and test splits."""
    _check_direction("multi30k", cfg, MULTI30K_SPLITS["train"])
    _check_multi30k_split(cfg.valid_split, "valid_split", cfg)
    _check_multi30k_split(cfg.test_split, "test_split", cfg)

    def paths(split: str) -> tuple[Path, Path]:
        return (
            locate(f"multi30k/{split}.{cfg.src_lang}.gz", cfg.data_dir),
            locate(f"multi30k/{split}.{cfg.tgt_lang}.gz", cfg.data_dir),
        )

    if cfg.train is not None:  # a replacing training corpus: a distilled one, say
        check_student(cfg.train, cfg.src_lang, cfg.tgt_lang)
        train = prefix_paths(cfg.train, "train", cfg)
    else:
        train = paths("train")
    return [train, paths(cfg.valid_split), paths(cfg.test_split)]


def tokenized_references(cfg: DataConfig, split: str) -> dict[str, str] | None:
    """The dataset's own tokenized references of the run's "valid" or "test" split: each target
    line as the corpus reads it (stripped) -> the same line lowercased, punctuation-normalized and
    Moses-tokenized (`multi30k/tok/`, found or fetched by `download.locate`), the references of
    the papers' tokenized BLEU. None for a corpus or language that has none (every corpus but
    Multi30k; its Czech).
    A raw line that occurs twice with two tokenizations keeps the first (none does in Multi30k)."""
    if cfg.corpus != "multi30k" or split not in ("valid", "test"):
        return None
    name = cfg.valid_split if split == "valid" else cfg.test_split
    _check_multi30k_split(name, f"{split}_split", cfg)
    if name not in MULTI30K_TOKENIZED or cfg.tgt_lang not in MULTI30K_TOKENIZED[name]:
        return None  # the dataset tokenized these (Czech and the training split it did not)
    raw = locate(f"multi30k/{name}.{cfg.tgt_lang}.gz", cfg.data_dir)
    return _matched(raw, locate(f"multi30k/tok/{name}.lc.norm.tok.{cfg.tgt_lang}", cfg.data_dir))


def tokenized_references_beside(reference_file: str | Path) -> dict[str, str] | None:
    """`tokenized_references` for a reference file given by path (`attnmt evaluate --ref`): a
    Multi30k raw file (multi30k/SPLIT.LANG, gzipped or not) brings the tokenized file beside it
    (multi30k/tok/SPLIT.lc.norm.tok.LANG, gzipped or not); any other file, None."""
    path = Path(reference_file)
    split, _, lang = path.name.removesuffix(".gz").rpartition(".")
    if path.parent.name != "multi30k" or split not in MULTI30K_TOKENIZED or lang not in MULTI30K_TOKENIZED[split]:
        return None
    beside = [path.parent / "tok" / f"{split}.lc.norm.tok.{lang}{suffix}" for suffix in ("", ".gz")]
    found = next((candidate for candidate in beside if candidate.is_file()), None)
    return None if found is None else _matched(path, found)


def _matched(raw_file: Path, tokenized_file: Path) -> dict[str, str]:
    raw, tokenized = read_lines(raw_file), read_lines(tokenized_file)
    if len(raw) != len(tokenized):
        raise UserError(f"{tokenized_file}: {len(tokenized)} lines, expected {len(raw)} as in {raw_file}")
    found: dict[str, str] = {}
    for line, tokens in zip(raw, tokenized, strict=True):
        found.setdefault(line.strip(), tokens.strip())
    return found


def _stream_multi30k(cfg: DataConfig) -> CorpusStream:
    train, valid, test = _multi30k_paths(cfg)
    return streamed(
        cfg,
        MULTI30K_ATTRIBUTION,
        read_parallel(*valid),
        read_parallel(*test),
        [*train, *valid, *test],
        lambda: stream_parallel(*train),
        replacing=cfg.train is not None,
    )


def _load_synthetic(cfg: DataConfig) -> CorpusSplits:
    """Generated splits; seeds 3*split_seed + {0, 1, 2} keep them distinct for every split_seed."""
    if cfg.train is not None:
        raise UserError(
            f"synthetic task {cfg.corpus} generates its training data; remove data.train", field="data.train"
        )

    def generate(n: int, offset: int) -> list[tuple[str, str]]:
        return synthetic.generate(cfg.corpus, n, max_len=cfg.synthetic_max_len, seed=3 * cfg.split_seed + offset)

    train, valid, test = generate(cfg.synthetic_size, 0), generate(cfg.valid_size, 1), generate(cfg.test_size, 2)
    splits = assemble(cfg, train, valid, test, None)
    # Short sequences recur by chance; evaluating on ones seen in training would flatter the model.
    held_out = {example.src for example in splits.valid + splits.test}
    splits.train = [(src, tgt) for src, tgt in splits.train if src not in held_out]
    return splits


def corpus_files(cfg: DataConfig) -> list[Path]:
    """Every file the configured corpus is read from, in a fixed order (none for a synthetic
    task): what a prepared dataset's key records of its input."""
    if cfg.corpus == "multi30k":
        return [path for paths in _multi30k_paths(cfg) for path in paths]
    if cfg.corpus == "tatoeba-eng-fra":
        _check_direction("tatoeba-eng-fra", cfg, TATOEBA_LANGUAGES)  # before any download
        replacing = list(prefix_paths(cfg.train, "train", cfg)) if cfg.train is not None else []
        return [locate("tatoeba-eng-fra/fra.txt.gz", cfg.data_dir), *replacing]
    if cfg.corpus in ("files", "tsv"):
        return [file for key, path in split_paths(cfg) if path is not None for file in user_files(cfg, path, key)]
    return []


def stream_corpus(cfg: DataConfig) -> CorpusStream:
    """The configured corpus as a `CorpusStream`: read lazily where its training pairs come from
    files of their own (multi30k; files and tsv with data.valid and data.test), else loaded
    (`load_corpus`: a corpus whose valid and test splits are split off by source)."""
    if cfg.corpus == "multi30k":
        return _stream_multi30k(cfg)
    if streamable(cfg):
        return stream_user_data(cfg)
    splits = load_corpus(cfg)
    return CorpusStream(
        splits.name,
        splits.attribution,
        splits.valid,
        splits.test,
        corpus_files(cfg),
        lambda: iter(splits.train),
        None,
        splits.raw_pairs,
        splits.dropped,
    )


def load_corpus(cfg: DataConfig) -> CorpusSplits:
    """Read (downloading if need be), subset, split and filter the configured corpus.

    `cfg.data_dir` (set by `--data-dir`) only concerns the built-in corpora: the paths of user
    data (`files`, `tsv`) are used as given.
    """
    if cfg.corpus == "tatoeba-eng-fra":
        return _load_tatoeba(cfg)
    if cfg.corpus == "multi30k":
        return _stream_multi30k(cfg).materialize()
    if cfg.corpus in ("files", "tsv"):
        return stream_user_data(cfg).materialize() if streamable(cfg) else load_user_data(cfg)
    if cfg.corpus in synthetic.TASKS:
        return _load_synthetic(cfg)
    raise UserError(f"data.corpus: unknown corpus {cfg.corpus!r}; known: {', '.join(KNOWN_CORPORA)}")

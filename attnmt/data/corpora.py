"""The corpora attnmt knows by name, and the one door to every corpus.

`locate_corpus(cfg)` finds every file a `DataConfig`'s corpus is read from, once for a run, as
`CorpusFiles`; the readers take that value and find nothing themselves: `stream_corpus` turns it
into a `CorpusStream`, `load_corpus` into `CorpusSplits` of raw text (untokenized, original
casing), and a prepared dataset's key records it (`prepare`). A config naming a corpus, pair,
split or file that does not exist is refused there, before anything is read.

Built in: Tatoeba English-French and Multi30k (downloaded corpora, found or fetched and
verified by `download.locate`: `data.data_dir`, then `$ATTNMT_DATA`, then the cache) and the
synthetic tasks (generated). The user's own files and TSV are found by the prefix rules and read
by `parallel_files`; the subset, split and filters every corpus passes are `splits` and
`pair_filters`.
"""

from __future__ import annotations

from pathlib import Path

from attnmt.config import DataConfig
from attnmt.data import synthetic
from attnmt.data.distillation_record import check_student
from attnmt.data.download import locate
from attnmt.data.parallel_files import (
    load_user_data,
    locate_user_data,
    prefix_paths,
    read_parallel,
    read_tsv,
    stream_parallel,
    stream_user_data,
    streamable,
)
from attnmt.data.splits import CorpusFiles, CorpusSplits, CorpusStream, assemble, streamed
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


def locate_corpus(cfg: DataConfig) -> CorpusFiles:
    """Every file the configured corpus is read from, found once for a run: a built-in corpus's
    by `download.locate` (downloaded if need be), the user's by the prefix rules
    (`parallel_files.locate_user_data`), `data.train`'s in place of a built-in corpus's training
    files; none for a synthetic task. Each corpus, pair, split or file the config names that does
    not exist is a UserError here, before any file is read."""
    if cfg.corpus == "tatoeba-eng-fra":
        _check_direction("tatoeba-eng-fra", cfg, TATOEBA_LANGUAGES)  # before any download
        return CorpusFiles(unsplit=(locate("tatoeba-eng-fra/fra.txt.gz", cfg.data_dir),), train=_replacing_train(cfg))
    if cfg.corpus == "multi30k":
        return _locate_multi30k(cfg)
    if cfg.corpus in ("files", "tsv"):
        return locate_user_data(cfg)
    if cfg.corpus in synthetic.TASKS:
        if cfg.train is not None:
            raise UserError(
                f"synthetic task {cfg.corpus} generates its training data; remove data.train", field="data.train"
            )
        return CorpusFiles()
    raise UserError(f"data.corpus: unknown corpus {cfg.corpus!r}; known: {', '.join(KNOWN_CORPORA)}")


def _replacing_train(cfg: DataConfig) -> tuple[Path, ...]:
    """The files whose pairs `data.train` gives a built-in corpus in place of its own training
    pairs (a distilled corpus, say: `attnmt distill`); none when it gives none."""
    if cfg.train is None:
        return ()
    check_student(cfg.train, cfg.src_lang, cfg.tgt_lang)
    return prefix_paths(cfg.train, "train", cfg)


def _load_tatoeba(cfg: DataConfig, files: CorpusFiles) -> CorpusSplits:
    pairs = read_tsv(files.unsplit[0])
    if cfg.src_lang == "fr":
        pairs = [(fr, en) for en, fr in pairs]
    replacing = read_parallel(*files.train) if files.train else None
    return assemble(cfg, pairs, None, None, TATOEBA_ATTRIBUTION, replaced_by=replacing)


def _check_multi30k_split(split: str, key: str, cfg: DataConfig) -> None:
    if split not in MULTI30K_SPLITS:
        raise UserError(f"data.{key}: unknown multi30k split {split!r}; known: {', '.join(MULTI30K_SPLITS)}")
    for lang in (cfg.src_lang, cfg.tgt_lang):
        if lang not in MULTI30K_SPLITS[split]:
            having = ", ".join(name for name, langs in MULTI30K_SPLITS.items() if lang in langs)
            raise UserError(f"data.{key}: multi30k split {split} has no {lang!r} text; splits with it: {having}")


def _locate_multi30k(cfg: DataConfig) -> CorpusFiles:
    """(source, target) files of the training (or the replacing data.train), valid and test splits."""
    _check_direction("multi30k", cfg, MULTI30K_SPLITS["train"])
    _check_multi30k_split(cfg.valid_split, "valid_split", cfg)
    _check_multi30k_split(cfg.test_split, "test_split", cfg)

    def paths(split: str) -> tuple[Path, Path]:
        return (
            locate(f"multi30k/{split}.{cfg.src_lang}.gz", cfg.data_dir),
            locate(f"multi30k/{split}.{cfg.tgt_lang}.gz", cfg.data_dir),
        )

    train = _replacing_train(cfg) or paths("train")  # data.train's files, else the corpus's own
    return CorpusFiles(train=train, valid=paths(cfg.valid_split), test=paths(cfg.test_split))


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


def _stream_multi30k(cfg: DataConfig, files: CorpusFiles) -> CorpusStream:
    return streamed(
        cfg,
        MULTI30K_ATTRIBUTION,
        read_parallel(*files.valid),
        read_parallel(*files.test),
        files,
        lambda: stream_parallel(*files.train),
        replacing=cfg.train is not None,
    )


def _load_synthetic(cfg: DataConfig) -> CorpusSplits:
    """Generated splits; seeds 3*split_seed + {0, 1, 2} keep them distinct for every split_seed."""

    def generate(n: int, offset: int) -> list[tuple[str, str]]:
        return synthetic.generate(cfg.corpus, n, max_len=cfg.synthetic_max_len, seed=3 * cfg.split_seed + offset)

    train, valid, test = generate(cfg.synthetic_size, 0), generate(cfg.valid_size, 1), generate(cfg.test_size, 2)
    splits = assemble(cfg, train, valid, test, None)
    # Short sequences recur by chance; evaluating on ones seen in training would flatter the model.
    held_out = {example.src for example in splits.valid + splits.test}
    splits.train = [(src, tgt) for src, tgt in splits.train if src not in held_out]
    return splits


def stream_corpus(cfg: DataConfig, files: CorpusFiles) -> CorpusStream:
    """The configured corpus, read from `files` (`locate_corpus(cfg)`), as a `CorpusStream`: read
    lazily where its training pairs come from files of their own (multi30k; files and tsv with
    data.valid and data.test), else loaded (`load_corpus`: a corpus whose valid and test splits
    are split off by source)."""
    if cfg.corpus == "multi30k":
        return _stream_multi30k(cfg, files)
    if streamable(cfg):
        return stream_user_data(cfg, files)
    splits = load_corpus(cfg, files)
    return CorpusStream(
        splits.name,
        splits.attribution,
        splits.valid,
        splits.test,
        files,
        lambda: iter(splits.train),
        None,
        splits.raw_pairs,
        splits.dropped,
    )


def load_corpus(cfg: DataConfig, files: CorpusFiles | None = None) -> CorpusSplits:
    """Read (downloading if need be), subset, split and filter the configured corpus, from
    `files` as `locate_corpus(cfg)` found them (found here when not given).

    `cfg.data_dir` (set by `--data-dir`) only concerns the built-in corpora: the paths of user
    data (`files`, `tsv`) are used as given.
    """
    files = locate_corpus(cfg) if files is None else files
    if cfg.corpus == "tatoeba-eng-fra":
        return _load_tatoeba(cfg, files)
    if cfg.corpus == "multi30k":
        return _stream_multi30k(cfg, files).materialize()
    if cfg.corpus in ("files", "tsv"):
        return stream_user_data(cfg, files).materialize() if streamable(cfg) else load_user_data(cfg, files)
    return _load_synthetic(cfg)  # locate_corpus refused any other name

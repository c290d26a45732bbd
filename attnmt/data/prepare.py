"""Encode a corpus once, memory-map it after: the prepared data training reads.

`ensure_prepared(cfg)` locates the corpus's files once (`corpora.locate_corpus`), finds the
prepared data of the config's data section and those files, or prepares it from them: the
corpus's training pairs are read as a stream (`corpora.stream_corpus`), judged by the
corpus's rules and tokenized in chunks over several worker processes, their tokens counted
and numbered provisionally; the vocabularies are built from the counts exactly as from
tokens in memory, and the provisional ids are mapped to vocabulary ids, a chunk at a time,
into flat arrays (`binarized`). A SentencePiece tokenizer trains first, on at most
data.tokenizer_sample pairs (`codec.build_tokenizers`). So preparing needs memory for one
chunk per worker and the token table, never the corpus; training then maps the arrays.

A prepared dataset is a folder under the cache, `prepared/{corpus}-{src}-{tgt}-{key}`, whose
key is a digest of every data setting that shapes the ids (batching settings excluded) and
of each input file's path, size, modification time and inode (the very files the stream then
reads): a changed file or tokenizer setting gives another key, so stale data is never reused.
The folder is written beside its final name and renamed into place once complete and synced
(`utils.atomic_folder`); a file lock lets one process prepare while the others (the ranks of a
distributed run) wait for it.

No torch: preparation workers import this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import multiprocessing
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnmt import __version__
from attnmt.codec import TextCodec, build_tokenizers, build_vocabs, extend_vocabs
from attnmt.config import DataConfig
from attnmt.data.binarized import SideWriter, TokenArrays, ids_dtype, open_side, remap
from attnmt.data.corpora import locate_corpus, stream_corpus
from attnmt.data.pair_filters import HELD_OUT, NOT_IN_SUBSET, PairRules
from attnmt.data.splits import CorpusFiles, CorpusStream, Example
from attnmt.data.textfiles import reading
from attnmt.tokenize import Tokenizer
from attnmt.utils import UserError, atomic_folder, cache_root
from attnmt.vocab import Vocab

FORMAT, VERSION = "attnmt-prepared", 1
MANIFEST, HELD_OUT_FILE = "manifest.json", "held_out.json"
# Settings that only batch (or mix) the data: the same prepared data serves every value of them.
BATCHING_SETTINGS = (
    "batch_tokens",
    "max_batch_sentences",
    "bucket_pool_batches",
    "fixed_batches",
    "data_dir",
    "mix_previous",
)
CHUNK_PAIRS = 20_000
# Below this many pairs, worker processes cost more to start than they save.
PARALLEL_FROM_PAIRS = 100_000
SIDES = ("src", "tgt")

Progress = Callable[[int], None]  # called with the number of pairs read so far


@dataclass
class Prepared:
    """A prepared dataset, opened: its training ids memory-mapped, the rest in memory."""

    folder: Path
    manifest: dict
    codec: TextCodec
    train_src: TokenArrays
    train_tgt: TokenArrays
    valid: list[Example]
    test: list[Example]

    @property
    def raw_pairs(self) -> int:
        return self.manifest["raw_pairs"]

    @property
    def dropped(self) -> dict[str, int]:
        return self.manifest["dropped"]


@dataclass(frozen=True)
class GivenCodec:
    """The tokenizers and vocabularies a dataset is encoded with instead of its own: a continued
    run's (`continued`), with the corpus's new word types appended where `extend`."""

    codec: TextCodec
    extend: bool = False

    def key(self) -> dict:
        return {"codec": self.codec.digest(), "extend": self.extend}


def data_key(cfg: DataConfig, files: CorpusFiles, given: GivenCodec | None = None) -> str:
    """The digest naming a prepared dataset: data settings (batching aside), input files (in
    `CorpusFiles.in_order`) and the codec it was given, if any."""
    settings = {name: value for name, value in cfg.model_dump().items() if name not in BATCHING_SETTINGS}
    identity = []
    for path in files.in_order:
        with reading(path):  # a missing or unreadable file: the line reading it would give
            stat = Path(path).stat()
        identity.append(
            {
                "path": str(Path(path).resolve()),
                "size": stat.st_size,
                "mtime_ns": stat.st_mtime_ns,
                "inode": stat.st_ino,
            }
        )
    key = {"format": VERSION, "settings": settings, "files": identity}
    if given is not None:  # not in the key of a dataset with its own codec, so those keep their names
        key["given"] = given.key()
    payload = json.dumps(key, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def prepared_folder(cfg: DataConfig, files: CorpusFiles, given: GivenCodec | None = None) -> Path:
    """Where the prepared data of `cfg`, read from `files` (`locate_corpus(cfg)`), is (or will be)
    under the cache."""
    key = data_key(cfg, files, given)
    return cache_root() / "prepared" / f"{cfg.corpus}-{cfg.src_lang}-{cfg.tgt_lang}-{key[:16]}"


def ensure_prepared(
    cfg: DataConfig,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
    say: Callable[[str], None] | None = None,
    given: GivenCodec | None = None,
) -> Prepared:
    """The prepared data of `cfg` (encoded with `given`, if any), prepared first if there is none
    (or `force`); its corpus's files are located here, once, for the key and the preparation."""
    files = locate_corpus(cfg)
    folder = prepared_folder(cfg, files, given)
    if folder.is_dir() and not force:
        return open_prepared(folder, cfg)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _lock(folder.with_name(f".{folder.name}.lock")):
        if force or not folder.is_dir():  # another process may have prepared it meanwhile
            if say is not None:
                say(f"preparing the data once into {folder}")
            prepare(cfg, files, folder, workers=workers, progress=progress, given=given)
    return open_prepared(folder, cfg)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_prepared(folder: Path, cfg: DataConfig) -> Prepared:
    """Open a prepared dataset, refusing one from another format version or with a damaged file."""
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"{path}: not a readable manifest ({error}); prepare the data again with --force") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise UserError(
            f"{path}: prepared by another version of attnmt (format {manifest.get('format')!r} version "
            f"{manifest.get('version')!r}, expected {FORMAT!r} version {VERSION}); prepare the data again with --force"
        )
    try:
        held_out = json.loads((folder / HELD_OUT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"{folder / HELD_OUT_FILE}: unreadable ({error}); prepare again with --force") from None
    return Prepared(
        folder=folder,
        manifest=manifest,
        codec=TextCodec.load(folder, cfg),
        train_src=open_side(folder, "train.src", manifest["train"]["src"]),
        train_tgt=open_side(folder, "train.tgt", manifest["train"]["tgt"]),
        valid=[Example(item["src"], tuple(item["refs"])) for item in held_out["valid"]],
        test=[Example(item["src"], tuple(item["refs"])) for item in held_out["test"]],
    )


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def prepare(
    cfg: DataConfig,
    files: CorpusFiles,
    folder: Path,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    given: GivenCodec | None = None,
) -> dict:
    """Prepare `cfg`'s data, read from `files` (`locate_corpus(cfg)`), into `folder` (replacing
    any); its manifest. Nothing is left under `folder`'s name unless complete: a failure (a full
    disk) leaves the previous state. With `given`, its tokenizers and vocabularies encode the
    data instead of ones built from it."""
    started = time.perf_counter()
    workers = workers or default_workers()
    stream = stream_corpus(cfg, files)
    if given is None:
        src_tok, tgt_tok = build_tokenizers(cfg, _kept_pairs(stream))
    else:
        src_tok, tgt_tok = given.codec.src_tokenizer, given.codec.tgt_tokenizer
    tokenizer_seconds = time.perf_counter() - started
    with atomic_folder(folder) as staging:
        totals = _Totals()
        provisional = {side: SideWriter(staging, f"provisional.{side}", np.dtype("<u4")) for side in SIDES}
        encoder = _ChunkEncoder(stream.rules, src_tok, tgt_tok)
        used = {"workers": 1}
        for result in _encode_all(_chunks(stream.read()), encoder, workers, progress, used):
            table = totals.add(result)
            for side in SIDES:
                provisional[side].append(table[result.ids[side]], result.lengths[side])
        records = {side: writer.close() for side, writer in provisional.items()}
        stream.check_counts(totals.raw_pairs if stream.rules else stream.raw_pairs or 0, records["src"]["sentences"])
        src_vocab, tgt_vocab = _vocabs(cfg, totals, (src_tok, tgt_tok), given)
        TextCodec(src_tok, tgt_tok, src_vocab, tgt_vocab).save(staging)
        train = {}
        for side, vocab in zip(SIDES, (src_vocab, tgt_vocab), strict=True):
            final = SideWriter(staging, f"train.{side}", ids_dtype(len(vocab)))
            remap(open_side(staging, f"provisional.{side}", records[side]), totals.vocab_ids(vocab), final)
            train[side] = final.close()
            for path in staging.glob(f"provisional.{side}.*"):
                path.unlink()
        held_out = {name: [{"src": ex.src, "refs": list(ex.refs)} for ex in split] for name, split in _held(stream)}
        (staging / HELD_OUT_FILE).write_text(json.dumps(held_out, ensure_ascii=False) + "\n", encoding="utf-8")
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "attnmt": __version__,
            "corpus": stream.name,
            "attribution": stream.attribution,
            "direction": f"{cfg.src_lang}-{cfg.tgt_lang}",
            "settings": {name: value for name, value in cfg.model_dump().items() if name not in BATCHING_SETTINGS},
            "files": [str(Path(path).resolve()) for path in stream.files.in_order],
            "raw_pairs": totals.raw_pairs if stream.rules else stream.raw_pairs,
            "dropped": totals.dropped if stream.rules else dict(stream.dropped),
            "train": train,
            "vocab": {"src": len(src_vocab), "tgt": len(tgt_vocab)},
            "workers": used["workers"],
            "seconds": round(time.perf_counter() - started, 3),
            "tokenizer_seconds": round(tokenizer_seconds, 3),  # SentencePiece's training (or its cache)
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def _vocabs(
    cfg: DataConfig, totals: _Totals, tokenizers: tuple[Tokenizer, Tokenizer], given: GivenCodec | None
) -> tuple[Vocab, Vocab]:
    """The vocabularies of the training counts, or the given ones (extended by the counts)."""
    if given is None:
        return build_vocabs(cfg, totals.counts("src"), totals.counts("tgt"), tokenizers)
    if given.extend:
        return extend_vocabs(cfg, given.codec, totals.counts("src"), totals.counts("tgt"))
    return given.codec.src_vocab, given.codec.tgt_vocab


def _held(stream: CorpusStream) -> list[tuple[str, list[Example]]]:
    return [("valid", stream.valid), ("test", stream.test)]


def _kept_pairs(stream: CorpusStream) -> Iterator[tuple[str, str]]:
    """The training pairs the rules keep, read once (for the tokenizer's training sample)."""
    for src, tgt in stream.read():
        if stream.rules is None or stream.rules.verdict(src, tgt) is None:
            yield src, tgt


def _chunks(pairs: Iterator[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    chunk: list[tuple[str, str]] = []
    for pair in pairs:
        chunk.append(pair)
        if len(chunk) == CHUNK_PAIRS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass
class _Chunk:
    """One chunk's training pairs, judged and tokenized: tokens numbered in the chunk's own
    `table` (first seen first, both sides together), with counts per side."""

    raw_pairs: int
    dropped: dict[str, int]
    table: list[str]
    ids: dict[str, np.ndarray]  # side -> (tokens,) int64 indices into table
    lengths: dict[str, np.ndarray]  # side -> (kept pairs,) int64
    counts: dict[str, np.ndarray]  # side -> (len(table),) int64


class _ChunkEncoder:
    """Judges and tokenizes chunks; the same object runs in this process or in each worker."""

    def __init__(self, rules: PairRules | None, src_tok: Tokenizer, tgt_tok: Tokenizer) -> None:
        self.rules, self.tokenizers = rules, {"src": src_tok, "tgt": tgt_tok}

    def __call__(self, pairs: list[tuple[str, str]]) -> _Chunk:
        dropped: dict[str, int] = {}
        kept = []
        for src, tgt in pairs:
            verdict = None if self.rules is None else self.rules.verdict(src, tgt)
            if verdict is None:
                kept.append((src, tgt))
            elif verdict not in (NOT_IN_SUBSET, HELD_OUT):
                dropped[verdict] = dropped.get(verdict, 0) + 1
        numbers: dict[str, int] = {}
        ids, lengths, counts = {}, {}, {}
        for column, side in enumerate(SIDES):
            tokenize, flat, sizes = self.tokenizers[side].tokenize, [], []
            for pair in kept:
                tokens = tokenize(pair[column])
                sizes.append(len(tokens))
                flat += [numbers.setdefault(token, len(numbers)) for token in tokens]
            ids[side] = np.asarray(flat, dtype=np.int64)
            lengths[side] = np.asarray(sizes, dtype=np.int64)
        for side in SIDES:
            counts[side] = np.bincount(ids[side], minlength=len(numbers))
        return _Chunk(len(pairs), dropped, list(numbers), ids, lengths, counts)


class _Totals:
    """The whole corpus's token table (provisional ids, in order of first appearance) and
    counts per side, merged chunk by chunk in the corpus's order."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.totals = {side: np.zeros(0, np.int64) for side in SIDES}
        self.raw_pairs = 0
        self.dropped: dict[str, int] = {}

    def add(self, chunk: _Chunk) -> np.ndarray:
        """Merge a chunk; its table's provisional ids ((len(chunk.table),) int64)."""
        self.raw_pairs += chunk.raw_pairs
        for setting, count in chunk.dropped.items():
            self.dropped[setting] = self.dropped.get(setting, 0) + count
        table = np.asarray([self.numbers.setdefault(token, len(self.numbers)) for token in chunk.table], np.int64)
        for side in SIDES:
            grown = np.zeros(len(self.numbers), np.int64)
            grown[: len(self.totals[side])] = self.totals[side]
            grown[table] += chunk.counts[side]
            self.totals[side] = grown
        return table

    def counts(self, side: str) -> Counter[str]:
        tokens = list(self.numbers)
        return Counter({tokens[number]: int(count) for number, count in enumerate(self.totals[side]) if count})

    def vocab_ids(self, vocab: Vocab) -> np.ndarray:
        """(provisional ids,) -> the vocabulary's id of each token (UNK where it has none)."""
        return np.asarray([vocab.token_to_id(token) for token in self.numbers], dtype=np.int64)


def _encode_all(
    chunks: Iterator[list[tuple[str, str]]],
    encoder: _ChunkEncoder,
    workers: int,
    progress: Progress | None,
    used: dict[str, int],
) -> Iterator[_Chunk]:
    """Encoded chunks in the corpus's order, over `workers` processes (a corpus too small to
    be worth them: this one; `used["workers"]` says which); at most two chunks per worker are
    in flight, so memory stays bounded whatever the corpus's size."""
    read = 0

    def report(result: _Chunk) -> _Chunk:
        nonlocal read
        read += result.raw_pairs
        if progress is not None:
            progress(read)
        return result

    # Buffer enough chunks to know whether worker processes are worth starting.
    buffered = list(itertools.islice(chunks, PARALLEL_FROM_PAIRS // CHUNK_PAIRS))
    if workers <= 1 or len(buffered) < PARALLEL_FROM_PAIRS // CHUNK_PAIRS:
        for chunk in itertools.chain(buffered, chunks):
            yield report(encoder(chunk))
        return
    used["workers"] = workers
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch's threads
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(encoder,)) as pool:
        pending = deque(pool.submit(_encode_in_worker, chunk) for chunk in buffered)
        for chunk in chunks:
            pending.append(pool.submit(_encode_in_worker, chunk))
            while len(pending) > 2 * workers:
                yield report(pending.popleft().result())
        while pending:
            yield report(pending.popleft().result())


_WORKER_ENCODER: _ChunkEncoder | None = None


def _start_worker(encoder: _ChunkEncoder) -> None:
    global _WORKER_ENCODER
    _WORKER_ENCODER = encoder


def _encode_in_worker(chunk: list[tuple[str, str]]) -> _Chunk:
    assert _WORKER_ENCODER is not None
    return _WORKER_ENCODER(chunk)

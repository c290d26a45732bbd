"""Prepared data: encoded once, memory-mapped after, equal to the in-memory path in every id and
batch; keyed so a changed input is never reused; damaged or foreign data refused in one line;
preparation in parallel, streamed, and never half-written."""

import json
import random
import threading
from pathlib import Path

import numpy as np
import pytest

from attnmt.cli import main
from attnmt.codec import sample_pairs
from attnmt.config import DataConfig, load_config
from attnmt.data import prepare as prepare_module
from attnmt.data.batching import TokenBatchSampler, build_data, prepared_data
from attnmt.data.binarized import TokenArrays
from attnmt.data.corpora import locate_corpus
from attnmt.data.parallel_files import stream_parallel
from attnmt.data.prepare import ensure_prepared, prepared_folder
from attnmt.train import fit
from attnmt.utils import UserError
from tests.data_helpers import CorpusLookups, put
from tests.fault_helpers import LIMITED, error_line, run_child

WORDS = tuple(
    [
        "the",
        "a",
        "small",
        "big",
        "red",
        "blue",
        "dog",
        "cat",
        "man",
        "woman",
        "runs",
        "sits",
        "sees",
        "on",
        "under",
        "near",
        "house",
        "tree",
        "street",
    ]
)
WORTER = tuple(
    [
        "der",
        "die",
        "ein",
        "kleiner",
        "großer",
        "roter",
        "blauer",
        "hund",
        "katze",
        "mann",
        "frau",
        "läuft",
        "sitzt",
        "sieht",
        "auf",
        "unter",
        "bei",
    ]
)


def sentence(rng: random.Random, words: tuple[str, ...], length: int) -> str:
    return " ".join(rng.choice(words) for _ in range(length)) + " ."


def write_corpus(folder: Path, pairs: int, seed: int = 0, *, outliers: bool = True) -> Path:
    """train/valid/test.{en,de}: random sentences; with `outliers`, a few training pairs that the
    length filters drop (a long source, a long target, a length ratio over the limit)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", pairs), ("valid", 30), ("test", 30)):
        lines = []
        for _ in range(count):
            n = rng.randint(1, 12)
            lines.append((sentence(rng, WORDS, n), sentence(rng, WORTER, n + rng.randint(0, 3))))
        if split == "train" and outliers:
            lines[5] = (sentence(rng, WORDS, 40), "der hund .")
            lines[9] = ("the dog .", sentence(rng, WORTER, 45))
            lines[17] = (sentence(rng, WORDS, 30), sentence(rng, WORTER, 31))
        (folder / f"{split}.en").write_text("".join(src + "\n" for src, _ in lines), encoding="utf-8")
        (folder / f"{split}.de").write_text("".join(tgt + "\n" for _, tgt in lines), encoding="utf-8")
    return folder


def files_config(folder: Path, *overrides: str):
    return load_config(
        None,
        [
            "data.corpus=files",
            f"data.train={folder / 'train'}",
            f"data.valid={folder / 'valid'}",
            f"data.test={folder / 'test'}",
            "data.src_lang=en",
            "data.tgt_lang=de",
            "data.max_src_tokens=25",
            "data.max_tgt_tokens=25",
            "data.max_length_ratio=4",
            "data.min_freq=2",
            "data.batch_tokens=120",
            "data.bucket_pool_batches=3",
            *overrides,
        ],
    )


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ATTNMT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def folder_of(cfg) -> Path:
    """Where the prepared data of the data settings `cfg` is, its corpus located as a run locates it."""
    return prepared_folder(cfg, locate_corpus(cfg))


def assert_same_data(memory, prepared, cfg) -> None:
    """Vocabularies, every id, counts, held-out splits and batches of two epochs are equal."""
    assert memory.src_vocab == prepared.src_vocab and memory.tgt_vocab == prepared.tgt_vocab
    assert isinstance(prepared.train.src_ids, TokenArrays) and isinstance(prepared.train.tgt_ids, TokenArrays)
    assert len(memory.train) == len(prepared.train)
    for side in ("src_ids", "tgt_ids"):
        assert [list(ids) for ids in getattr(memory.train, side)] == [
            ids.tolist() for ids in getattr(prepared.train, side)
        ]
    assert memory.splits.raw_pairs == prepared.splits.raw_pairs
    assert memory.splits.dropped == prepared.splits.dropped
    assert (memory.splits.valid, memory.splits.test) == (prepared.splits.valid, prepared.splits.test)
    assert (memory.valid.src_ids, memory.test.tgt_ids) == (prepared.valid.src_ids, prepared.test.tgt_ids)
    for shuffle in (True, False):
        ours, theirs = (bundle.sampler(cfg, shuffle=shuffle, seed=11) for bundle in (memory, prepared))
        for epoch in (0, 1):
            assert ours.batches(epoch) == theirs.batches(epoch)


@pytest.mark.parametrize(
    ("overrides", "workers"),
    [
        ((), 1),
        ((), 2),  # chunks tokenized in two worker processes, merged in order
        (("data.tokenizer=sentencepiece", "data.spm_vocab_size=60", "data.shared_vocab=true"), 2),
        (("data.subset=short",), 1),
    ],
    ids=["words", "words-2-workers", "sentencepiece-shared", "short-subset"],
)
def test_prepared_data_equals_the_in_memory_path(tmp_path, cache, monkeypatch, overrides, workers):
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 97)  # many chunks, and a short last one
    monkeypatch.setattr(prepare_module, "PARALLEL_FROM_PAIRS", 300)
    cfg = files_config(write_corpus(tmp_path / "corpus", 1500), *overrides).data
    memory = build_data(cfg)
    if "data.subset=short" not in overrides:  # the subset drops the outliers before the filters see them
        assert memory.splits.dropped, "the corpus should exercise the length filters"
    prepared = prepared_data(cfg, workers=workers)
    assert_same_data(memory, prepared, cfg)
    assert json.loads((folder_of(cfg) / "manifest.json").read_text())["workers"] == workers


def test_a_corpus_split_by_source_is_prepared_from_memory_with_the_same_ids(tmp_path, cache):
    """A TSV corpus without valid and test files: they are split off by source first."""
    rng = random.Random(3)
    lines = [
        f"{sentence(rng, WORDS, rng.randint(1, 8))}\t{sentence(rng, WORTER, rng.randint(1, 9))}" for _ in range(600)
    ]
    (tmp_path / "pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = load_config(
        None,
        [
            "data.corpus=tsv",
            f"data.train={tmp_path / 'pairs.tsv'}",
            "data.src_lang=en",
            "data.tgt_lang=de",
            "data.valid_size=20",
            "data.test_size=20",
            "data.batch_tokens=100",
        ],
    ).data
    assert_same_data(build_data(cfg), prepared_data(cfg, workers=1), cfg)


def reference_batches(src, tgt, budget, max_sentences, pool_batches, seed, epoch, shuffle):
    """The batch order written from its definition with Python lists: shuffle every example that
    fits the budget, cut the shuffled list into pools of about pool_batches batches (a batch
    holds budget / mean length pairs, or max_sentences where that is fewer; None: one pool),
    sort each pool by (source, target) length, cut it greedily under the budget, shuffle the
    batches."""
    padded = [max(s, t + 1) for s, t in zip(src, tgt, strict=True)]
    indices = [i for i in range(len(src)) if padded[i] <= budget]

    def cut(ordered):
        batches, current, longest = [], [], 0
        for index in ordered:
            grown = max(longest, padded[index])
            if current and (grown * (len(current) + 1) > budget or len(current) >= max_sentences):
                batches.append(current)
                current, grown = [], padded[index]
            current.append(index)
            longest = grown
        return batches + ([current] if current else [])

    def by_length(index):
        return (src[index], tgt[index])

    if not shuffle:
        return cut(sorted(indices, key=by_length))
    rng = random.Random(seed * 1_000_003 + epoch)
    rng.shuffle(indices)
    mean = max(1.0, sum(src[i] for i in indices) / max(1, len(indices)))
    if pool_batches is None:
        pool = max(1, len(indices))
    elif max_sentences < budget / mean:
        pool = pool_batches * max_sentences
    else:
        pool = max(1, int(pool_batches * budget / mean))
    batches = []
    for start in range(0, len(indices), pool):
        batches += cut(sorted(indices[start : start + pool], key=by_length))
    rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("seed", range(6))
def test_batches_from_length_arrays_follow_the_definition(seed):
    """Lengths as numpy arrays (a prepared corpus) or lists: the definition's batches, ties
    (equal lengths: many here) kept in the shuffled order."""
    rng = random.Random(seed)
    n = rng.randint(1, 3000)
    src = [rng.randint(1, 30) for _ in range(n)]
    tgt = [rng.randint(1, 30) for _ in range(n)]
    budget, max_sentences = rng.choice([64, 200, 700, 10**6]), rng.choice([None, 7, 50])
    pool = rng.choice([None, rng.randint(1, 20)])
    for lengths in ((src, tgt), (np.asarray(src, np.int64), np.asarray(tgt, np.int64))):
        for shuffle in (True, False):
            sampler = TokenBatchSampler(
                *lengths,
                batch_tokens=budget,
                max_sentences=max_sentences,
                pool_batches=pool,
                shuffle=shuffle,
                seed=seed,
            )
            for epoch in (0, 3):
                expected = reference_batches(src, tgt, budget, max_sentences or n, pool, seed, epoch, shuffle)
                assert sampler.batches(epoch) == expected


def test_a_sentence_cap_sizes_the_pools():
    """Batches cut by sentence count under a token budget no batch reaches still come from pools
    of pool_batches batches of max_sentences pairs, not from one pool of the whole corpus; a
    pool of None is the whole corpus."""
    rng = random.Random(9)
    src = [rng.randint(1, 30) for _ in range(3000)]
    tgt = [rng.randint(1, 30) for _ in range(3000)]
    for pool in (3, None):
        sampler = TokenBatchSampler(src, tgt, batch_tokens=10**6, max_sentences=8, pool_batches=pool, seed=1)
        assert sampler.batches(0) == reference_batches(src, tgt, 10**6, 8, pool, 1, 0, True)


TINY = [
    "data.corpus=reverse",
    "data.synthetic_size=400",
    "data.synthetic_max_len=8",
    "data.valid_size=30",
    "data.test_size=30",
    "data.batch_tokens=200",
    "model.embedding_size=16",
    "model.encoder_hidden=16",
    "model.decoder_hidden=32",
    "model.dropout=0.3",
    "train.log_every=1",
    "train.valid_every=5",
    "train.valid_bleu_sentences=10",
    "train.threads=1",
]


def losses(run_dir: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {record["step"]: record["train_loss"] for record in records if "train_loss" in record}


def test_training_reads_the_prepared_data_and_takes_the_steps_of_the_in_memory_path(tmp_path, cache):
    """Training without a bundle prepares the data once and maps it; its loss curve equals,
    bit for bit, a run given the in-memory data, and a resumed run continues it exactly."""
    config = load_config(None, [*TINY, f"train.run_dir={tmp_path / 'memory'}", "train.max_steps=12"])
    fit(config, bundle=build_data(config.data), log=lambda *_: None)
    said = []
    fit(load_config(None, [*TINY, f"train.run_dir={tmp_path / 'prepared'}", "train.max_steps=12"]), log=said.append)
    assert any("preparing the data once" in line for line in said)
    assert folder_of(config.data).is_dir()
    fit(load_config(None, [*TINY, f"train.run_dir={tmp_path / 'split'}", "train.max_steps=7"]), log=lambda *_: None)
    said.clear()
    resumed = load_config(None, [*TINY, f"train.run_dir={tmp_path / 'split'}", "train.max_steps=12"])
    fit(resumed, resume=True, log=said.append)
    assert not any("preparing" in line for line in said), "a resume opens the prepared data"
    expected = losses(tmp_path / "memory")
    assert sorted(expected) == list(range(1, 13))
    assert losses(tmp_path / "prepared") == expected == losses(tmp_path / "split")


def test_a_changed_corpus_is_prepared_again_and_batching_settings_share_one(tmp_path, cache):
    corpus = write_corpus(tmp_path / "corpus", 300)
    cfg = files_config(corpus).data
    first = ensure_prepared(cfg, workers=1)
    assert folder_of(files_config(corpus, "data.batch_tokens=999", "data.bucket_pool_batches=1").data) == (first.folder)
    assert folder_of(files_config(corpus, "data.min_freq=1").data) != first.folder
    with (corpus / "train.de").open("a", encoding="utf-8") as handle:
        handle.write("noch ein satz .\n")
    with (corpus / "train.en").open("a", encoding="utf-8") as handle:
        handle.write("one more sentence .\n")
    again = ensure_prepared(cfg, workers=1)
    assert again.folder != first.folder and first.folder.is_dir()
    assert len(again.train_src) == len(first.train_src) + 1


def small_corpus(kind: str, folder: Path) -> DataConfig:
    """The data settings of a small corpus of each kind a corpus is located as: user files with
    their own valid and test (streamed), a user TSV split by source (read whole), Multi30k from
    a data folder, and Tatoeba from a data folder with its training pairs replaced (data.train)."""
    corpus = write_corpus(folder / "corpus", 200)
    if kind == "files":
        return files_config(corpus).data
    lines = {lang: (corpus / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "de")}
    tsv = "".join(f"{en}\t{de}\n" for en, de in zip(lines["en"], lines["de"], strict=True))
    held_out = {"valid_size": 10, "test_size": 10}
    if kind == "tsv":
        put(folder / "pairs.tsv", tsv)
        return DataConfig(corpus="tsv", train=str(folder / "pairs.tsv"), src_lang="en", tgt_lang="de", **held_out)
    data = folder / "data"
    if kind == "multi30k":
        for split, name in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
            for lang in ("en", "de"):
                put(data / "multi30k" / f"{name}.{lang}.gz", (corpus / f"{split}.{lang}").read_text(encoding="utf-8"))
        return DataConfig(corpus="multi30k", src_lang="en", tgt_lang="de", data_dir=str(data))
    put(data / "tatoeba-eng-fra" / "fra.txt.gz", tsv)
    put(corpus / "train.fr", (corpus / "train.de").read_text(encoding="utf-8"))
    return DataConfig(train=str(corpus / "train"), data_dir=str(data), **held_out)


@pytest.mark.parametrize("kind", ["files", "tsv", "multi30k", "tatoeba-replaced"])
def test_a_run_locates_its_corpus_once_and_its_key_names_the_very_files_its_stream_reads(
    tmp_path, cache, monkeypatch, kind
):
    """`ensure_prepared` locates the corpus once, each built-in file or user prefix looked up
    once, and the prepared data's key, its manifest and the stream of its pairs all take that
    one `CorpusFiles`: no file read is missing from the key, no file keyed goes unread. Opening
    the prepared data again locates the corpus once too."""
    cfg = small_corpus(kind, tmp_path)
    lookups = CorpusLookups(monkeypatch)
    prepared = ensure_prepared(cfg, workers=1)
    assert len(lookups.located) == 1, f"located {len(lookups.located)} times"
    [(_, files)] = lookups.located
    assert len(lookups.keyed) == 1 and lookups.keyed[0] is files
    assert len(lookups.found) == len(set(lookups.found)), lookups.found
    keyed = [path.resolve() for path in files.in_order]
    assert {path.resolve() for path in lookups.read} == set(keyed)
    assert prepared.manifest["files"] == [str(path) for path in keyed]
    lookups.located.clear()
    assert ensure_prepared(cfg, workers=1).folder == prepared.folder
    assert len(lookups.located) == 1


def config_file(folder: Path, corpus: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text(
        "data:\n  corpus: files\n  src_lang: en\n  tgt_lang: de\n"
        + "".join(f"  {split}: {corpus / split}\n" for split in ("train", "valid", "test")),
        encoding="utf-8",
    )
    return path


def test_damaged_or_foreign_prepared_data_is_one_line_and_force_prepares_it_again(tmp_path, cache, capsys):
    config = str(config_file(tmp_path, write_corpus(tmp_path / "corpus", 300)))
    assert main(["data", "prepare", config]) == 0
    assert "training pairs (300 read)" in capsys.readouterr().out
    folder = folder_of(load_config(config).data)
    ids = folder / "train.src.ids"
    ids.write_bytes(ids.read_bytes()[:-2])  # cut short, as by a full disk or an interrupted copy
    assert main(["data", "stats", config]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.src.ids" in err[0] and "--force" in err[0], err
    assert main(["data", "prepare", config, "--force"]) == 0
    assert main(["data", "stats", config]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "version": 99}))
    capsys.readouterr()
    assert main(["data", "stats", config]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another version" in err[0], err


def test_parallel_files_of_different_lengths_are_found_late_with_both_counts(tmp_path):
    (tmp_path / "a.en").write_text("".join(f"line {i}\n" for i in range(1000)), encoding="utf-8")
    (tmp_path / "a.de").write_text("".join(f"zeile {i}\n" for i in range(999)), encoding="utf-8")
    pairs = stream_parallel(tmp_path / "a.en", tmp_path / "a.de")
    assert next(pairs) == ("line 0", "zeile 0")
    with pytest.raises(UserError, match=r"a\.en has 1000 lines but .*a\.de has 999"):
        list(pairs)
    with pytest.raises(UserError, match=r"a\.de has 999 lines but .*a\.en has 1000"):
        list(stream_parallel(tmp_path / "a.de", tmp_path / "a.en"))


def test_a_full_disk_while_preparing_is_one_line_and_leaves_nothing_under_its_name(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", 3000, outliers=False)
    cache = tmp_path / "cache"
    code = LIMITED + (
        f"import os\nos.environ['ATTNMT_CACHE'] = {str(cache)!r}\n"
        "from attnmt.cli import main\nsys.exit(main(sys.argv[2:]))\n"
    )
    args = ["data", "prepare", str(config_file(tmp_path, corpus)), "--workers", "1"]
    line = error_line(run_child(code, 20_000, *args))
    assert "cannot write" in line and "nothing was left under that name" in line, line
    assert [path.name for path in (cache / "prepared").iterdir() if not path.name.endswith(".lock")] == []
    assert run_child(code, 10**9, *args).returncode == 0
    assert len([path for path in (cache / "prepared").iterdir() if path.is_dir()]) == 1


def test_processes_that_need_the_same_data_at_once_prepare_it_once(tmp_path, cache, monkeypatch):
    cfg = files_config(write_corpus(tmp_path / "corpus", 300)).data
    calls, real = [], prepare_module.prepare

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(prepare_module, "prepare", counted)
    opened = []
    threads = [threading.Thread(target=lambda: opened.append(ensure_prepared(cfg, workers=1))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(opened) == 3
    assert len({item.folder for item in opened}) == 1


def test_a_tokenizer_sample_is_all_pairs_up_to_its_size_then_a_uniform_seeded_draw():
    pairs = [(str(i), str(i)) for i in range(10)]
    assert sample_pairs(iter(pairs), 10, seed=1) == pairs
    assert sample_pairs(iter(pairs), 50, seed=1) == pairs
    drawn = sample_pairs(iter(pairs), 4, seed=1)
    assert len(drawn) == 4 and set(drawn) <= set(pairs) and len(set(drawn)) == 4
    assert sample_pairs(iter(pairs), 4, seed=1) == drawn
    inclusions = np.zeros(10)
    for seed in range(2000):
        for src, _ in sample_pairs(iter(pairs), 4, seed=seed):
            inclusions[int(src)] += 1
    # each pair is in 4 of 10 samples: 800 of 2,000 expected, the binomial's sd is about 22
    assert np.all(np.abs(inclusions - 800) < 120), inclusions


def test_a_bad_worker_count_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["data", "prepare", "configs/demo.yaml", "--workers", "0"])
    assert stop.value.code == 2
    assert "--workers" in capsys.readouterr().err


def test_ranks_whose_prepared_data_differ_refuse_to_train(tmp_path, cache, monkeypatch):
    """Machines that each prepared their own copy of a corpus must hold the same ids: a rank
    whose vocabularies or pair counts differ from rank 0's stops with one line."""
    from types import SimpleNamespace

    from attnmt import distributed
    from attnmt.train import Trainer

    cfg = files_config(write_corpus(tmp_path / "corpus", 300)).data
    rank = SimpleNamespace(context=distributed.Context(rank=1, world_size=2), bundle=prepared_data(cfg, workers=1))
    shared = []
    monkeypatch.setattr(distributed, "broadcast", lambda context, values: shared or values)
    Trainer._check_ranks_agree_on_the_data(rank)  # rank 0 holds the same data: nothing to say
    shared.append("rank 0's digest of other data")
    with pytest.raises(UserError, match="rank 1: its training data differs from rank 0's"):
        Trainer._check_ranks_agree_on_the_data(rank)

"""The one copy of the data every system reads: Multi30k en->de as lowercased word tokens.

attnmt's word tokenizer writes `train`, `valid` (Multi30k `val`), `test2016`
(`test_2016_flickr`) and `test2017` (`test_2017_flickr`) for both languages, one sentence per
line, tokens joined by single spaces. Peers read these files as pre-tokenized text; attnmt reads
them through its `files` corpus with a whitespace-only view of the same tokens, so all systems
see identical tokens. The folder is written once (atomically) and reused; one that lacks a split
is written again.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from attnmt.config import DataConfig
from attnmt.data.corpora import load_corpus
from attnmt.tokenize import WordTokenizer

SPLITS = {"train": None, "valid": "val", "test2016": "test_2016_flickr", "test2017": "test_2017_flickr"}
DONE = "prepared.json"


def prepare_data(target: Path, *, src_lang: str = "en", tgt_lang: str = "de", data_dir: str | None = None) -> Path:
    """Write the tokenized splits into `target` unless they are there already; returns `target`."""
    if (target / DONE).exists() and all((target / f"{split}.{tgt_lang}").exists() for split in SPLITS):
        return target
    cfg = DataConfig(corpus="multi30k", src_lang=src_lang, tgt_lang=tgt_lang, valid_split="val", data_dir=data_dir)
    splits = load_corpus(cfg)
    tokenizers = {lang: WordTokenizer(lang, lowercase=True) for lang in (src_lang, tgt_lang)}

    def line(lang: str, text: str) -> str:
        return " ".join(tokenizers[lang].tokenize(text)) + "\n"

    pairs = {
        "train": splits.train,
        "valid": [(example.src, example.refs[0]) for example in splits.valid],
        "test2016": [(example.src, example.refs[0]) for example in splits.test],
        "test2017": [
            (example.src, example.refs[0])
            for example in load_corpus(cfg.model_copy(update={"test_split": SPLITS["test2017"]})).test
        ],
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=".prepare-", dir=target.parent))
    try:
        counts = {}
        for split, split_pairs in pairs.items():
            for side, lang in enumerate((src_lang, tgt_lang)):
                text = "".join(line(lang, pair[side]) for pair in split_pairs)
                (temporary / f"{split}.{lang}").write_text(text, encoding="utf-8")
            counts[split] = len(split_pairs)
        info = {"corpus": "multi30k", "tokens": "attnmt word tokenizer, lowercased", "sentences": counts}
        (temporary / DONE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        os.chmod(temporary, 0o755)
        if target.exists():
            shutil.rmtree(target)
        os.replace(temporary, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return target

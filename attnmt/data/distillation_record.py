"""A distilled corpus's record: which teacher and search wrote it, how far, and who may read it.

`attnmt distill` (`distill.py`) writes `{prefix}.{src_lang}` and `{prefix}.{tgt_lang}` and beside
them `{prefix}.distill.json`. The data loader (`corpora`) reads the record when `data.train`
points at such a prefix, so that a student is refused a corpus distilled for another direction,
or one whose distillation has not finished. Light: no torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from attnmt.utils import UserError

RECORD_SUFFIX = ".distill.json"
REQUIRED = ("src_lang", "tgt_lang", "sources", "lines_done", "bytes", "complete")


def record_path(prefix: str | os.PathLike) -> Path:
    return Path(f"{prefix}{RECORD_SUFFIX}")


def read_record(prefix: str | os.PathLike) -> dict | None:
    """The record of the distillation into `prefix`, or None when there is none; an unreadable
    one is a UserError."""
    path = record_path(prefix)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        missing = [key for key in REQUIRED if key not in record] if isinstance(record, dict) else list(REQUIRED)
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
    except (OSError, ValueError) as error:
        raise UserError(f"{path}: not a distillation record ({error}); remove it to start over") from None
    return record


def check_student(prefix: str | os.PathLike, src_lang: str, tgt_lang: str) -> None:
    """A student reading the corpus `prefix` must translate in its teacher's direction, and the
    distillation must be finished; a prefix without a record is not distilled and passes."""
    record = read_record(prefix)
    if record is None:
        return
    if (record["src_lang"], record["tgt_lang"]) != (src_lang, tgt_lang):
        raise UserError(
            f"{record_path(prefix)}: distilled {record['src_lang']}->{record['tgt_lang']}, but the student "
            f"translates {src_lang}->{tgt_lang}; data.src_lang and data.tgt_lang must be the teacher's",
            field="data.train",
        )
    if not record["complete"]:
        raise UserError(
            f"{prefix}: its distillation has not finished ({record['lines_done']:,} of "
            f"{record['sources']['lines']:,} lines); rerun the same `attnmt distill` command to finish it",
            field="data.train",
        )

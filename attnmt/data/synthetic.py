"""Generated translation tasks: offline data for tests, demos and sanity checks.

- `copy`: "c a t" -> "c a t"; `reverse`: "c a t" -> "t a c"; `sort`: "c a t" -> "a c t".
  Sources are 1..max_len lowercase letters, space-separated, so each letter is one word token.
- `dates`: a date written one of many ways, in English or French, -> its ISO 8601 form:
  "Friday, March 5, 2021", "le 1er mars 2021", "05/03/2021" -> "2021-03-05". The word
  tokenizer splits the target into "2021" "-" "03" "-" "05" and joins it back exactly.

The tasks are small enough that an attention model learns them in minutes on a CPU, and
their answers are known, so a test can check what a trained model does.
"""

from __future__ import annotations

import datetime
import random
import string

from attnmt.utils import UserError

TASKS = ("reverse", "copy", "sort", "dates")

_LETTERS = string.ascii_lowercase
_FIRST_DATE = datetime.date(1950, 1, 1)
_LAST_DATE = datetime.date(2049, 12, 31)

_MONTHS_EN = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS_FR = (
    "janvier", "février", "mars", "avril", "mai", "juin",
    "juillet", "août", "septembre", "octobre", "novembre", "décembre",
)  # fmt: skip
_WEEKDAYS_FR = ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche")


def generate(task: str, n: int, *, max_len: int, seed: int) -> list[tuple[str, str]]:
    """`n` (source, target) pairs of `task`; the same arguments give the same pairs.

    `max_len` bounds the letter sequences of copy/reverse/sort; dates ignore it.
    """
    if task not in TASKS:
        raise UserError(f"unknown synthetic task {task!r}; expected one of {', '.join(TASKS)}")
    if n < 0:
        raise UserError(f"synthetic data: the number of examples must be >= 0, got {n}")
    if max_len < 1:
        raise UserError(f"data.synthetic_max_len must be at least 1, got {max_len}")
    rng = random.Random(f"{task}:{seed}")  # a task-specific stream: tasks do not share draws
    if task == "dates":
        return [_date_pair(rng) for _ in range(n)]
    pairs = []
    for _ in range(n):
        letters = rng.choices(_LETTERS, k=rng.randint(1, max_len))
        if task == "reverse":
            target = letters[::-1]
        elif task == "sort":
            target = sorted(letters)
        else:
            target = letters
        pairs.append((" ".join(letters), " ".join(target)))
    return pairs


def _date_pair(rng: random.Random) -> tuple[str, str]:
    day_count = (_LAST_DATE - _FIRST_DATE).days
    date = _FIRST_DATE + datetime.timedelta(days=rng.randint(0, day_count))
    render = rng.choice(_DATE_FORMATS)
    return render(date), date.isoformat()


def _english_ordinal(day: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st, 22nd, 23rd, 31st."""
    suffix = "th" if day in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _french_day(day: int) -> str:
    """French writes the first of the month as an ordinal: "le 1er mars", but "le 2 mars"."""
    return "1er" if day == 1 else str(day)


def _month_en(date: datetime.date) -> str:
    return _MONTHS_EN[date.month - 1]


def _month_fr(date: datetime.date) -> str:
    return _MONTHS_FR[date.month - 1]


# Each format says unambiguously which number is the day: numeric dates are written either
# day-first with slashes (French/British "05/03/2021") or year-first ("2021/03/05"), never
# the US month-first order, which would make "05/03/2021" mean two different dates.
_DATE_FORMATS = (
    lambda d: f"{_month_en(d)} {d.day}, {d.year}",
    lambda d: f"{d.day} {_month_en(d)} {d.year}",
    lambda d: f"{_month_en(d)[:3]} {d.day} {d.year}",
    lambda d: f"{_WEEKDAYS_EN[d.weekday()]}, {_month_en(d)} {d.day}, {d.year}",
    lambda d: f"{_month_en(d)} {_english_ordinal(d.day)}, {d.year}",
    lambda d: f"the {_english_ordinal(d.day)} of {_month_en(d)} {d.year}",
    lambda d: f"le {_french_day(d.day)} {_month_fr(d)} {d.year}",
    lambda d: f"{_WEEKDAYS_FR[d.weekday()]} {_french_day(d.day)} {_month_fr(d)} {d.year}",
    lambda d: f"{_french_day(d.day)} {_month_fr(d)} {d.year}",
    lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",
    lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",
)

"""Synthetic tasks: deterministic, correct answers, and text the word tokenizer handles."""

import datetime
import re
import string

import pytest

from attnmt.data.synthetic import TASKS, generate
from attnmt.tokenize import WordTokenizer
from attnmt.utils import UserError

# Written here independently of attnmt.data.synthetic, to parse what it renders.
ENGLISH_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                  "October", "November", "December")  # fmt: skip
FRENCH_MONTHS = ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
                 "octobre", "novembre", "décembre")  # fmt: skip
MONTHS = {
    name: number
    for number, (english, french) in enumerate(zip(ENGLISH_MONTHS, FRENCH_MONTHS, strict=True), start=1)
    for name in (english, english[:3], french)
}
WEEKDAYS = {
    name: number
    for names in (
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
        ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    )
    for number, name in enumerate(names)
}


def parse_rendered_date(text: str) -> datetime.date:
    """Read back any format the dates task writes: numbers are day/month/year or year/month/day."""
    numeric = re.fullmatch(r"(\d\d)/(\d\d)/(\d{4})|(\d{4})/(\d\d)/(\d\d)", text)
    if numeric:
        day, month, year = numeric.group(1, 2, 3) if numeric.group(1) else numeric.group(6, 5, 4)
        return datetime.date(int(year), int(month), int(day))
    words = re.findall(r"\w+", text)
    year = next(int(word) for word in words if re.fullmatch(r"\d{4}", word))
    day = next(int(re.match(r"\d+", word).group()) for word in words if re.fullmatch(r"\d{1,2}(st|nd|rd|th|er)?", word))
    month = next(MONTHS[word] for word in words if word in MONTHS)
    date = datetime.date(year, month, day)
    weekdays = [WEEKDAYS[word.lower()] for word in words if word.lower() in WEEKDAYS]
    assert weekdays in ([], [date.weekday()]), f"wrong weekday in {text!r}"
    return date


@pytest.mark.parametrize("task", TASKS)
def test_same_seed_same_pairs_other_seed_other_pairs(task):
    pairs = generate(task, 50, max_len=8, seed=3)
    assert len(pairs) == 50
    assert generate(task, 50, max_len=8, seed=3) == pairs
    assert generate(task, 50, max_len=8, seed=4) != pairs
    assert generate(task, 0, max_len=8, seed=3) == []


@pytest.mark.parametrize("task", ["reverse", "copy", "sort"])
def test_letter_tasks_have_the_right_answers(task):
    expected = {"reverse": lambda letters: letters[::-1], "copy": list, "sort": sorted}[task]
    lengths = set()
    for source, target in generate(task, 500, max_len=6, seed=0):
        letters = source.split(" ")
        assert all(letter in string.ascii_lowercase and len(letter) == 1 for letter in letters)
        assert target.split(" ") == expected(letters)
        lengths.add(len(letters))
    assert lengths == set(range(1, 7))


def test_dates_target_is_the_iso_form_of_the_rendered_date():
    pairs = generate("dates", 2000, max_len=10, seed=0)
    for source, target in pairs:
        assert parse_rendered_date(source) == datetime.date.fromisoformat(target)
    sources = [source for source, _ in pairs]
    assert any(source.startswith("le 1er ") for source in sources)  # French ordinal for the 1st
    assert any(re.search(r"\b(2nd|3rd|11th|21st)\b", source) for source in sources)
    assert len({re.sub(r"\d+", "N", re.sub(r"[^\W\d]+", "W", source)) for source in sources}) >= 8  # many shapes


def test_dates_tokenize_into_pieces_that_detokenize_exactly():
    english, french = WordTokenizer("en"), WordTokenizer("fr")
    for source, target in generate("dates", 300, max_len=10, seed=1):
        tokens = english.tokenize(target)
        assert len(tokens) == 5 and tokens[1] == tokens[3] == "-"
        assert english.detokenize(tokens) == target
        assert french.detokenize(french.tokenize(target)) == target
        assert english.detokenize(english.tokenize(source)) == source


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="reverse, copy, sort, dates"):
        generate("translate", 10, max_len=5, seed=0)
    with pytest.raises(UserError, match="synthetic_max_len"):
        generate("copy", 10, max_len=0, seed=0)

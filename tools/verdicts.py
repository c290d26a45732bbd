"""Verdict words recomputed from raw results: a goal "met", a comparison "ahead", said only where the rules give it.

    python -m tools.verdicts README.md CHANGELOG.md docs/*.md   # each verdict and its evidence; exit 1 on a wrong one
    python -m tools.verdicts --pool docs/results/RACE.json --json docs/results/RACE-pooled.json

The rules (docs/performance.md, "Verdict rules"):
- A goal is **met** when the median of at least three seeds reaches it and the margin is at least
  the seeds' spread (max - min); **within noise** ("at the goal within noise") when the margin
  either way is smaller than the spread; **missed** when the median is short by more than the
  spread. Fewer than three seeds: no verdict word at all.
- A comparison between two systems is judged on the paired bootstrap of their BLEU difference
  pooled over seeds (`attnmt.metrics.pooled_bootstrap`): **ahead** when the 95% interval lies
  above zero, **behind** below it, **level** otherwise.

Every verdict word (met, missed, ahead, level, within noise; not "word-level" or "ahead of time")
in a checked page carries, right after it, a comment that names its evidence:

    met<!-- verdict: goal 41.0 docs/results/multi30k-table.json entries[3].bleu;entries[4].bleu;entries[5].bleu -->
    behind<!-- verdict: compare docs/results/peers-quality-identical-3-pooled.json test2016.beam5_tuned -->
    level<!-- verdict: none, a word of the change it describes -->     (a use that is no verdict)

A goal's paths are read with `tools.figures`' path syntax, one a seed, separated by `;`; a
comparison's path leads to a record with `delta`, `low` and `high` (what `--pool` writes). The
word must be the one the rules give: `met`, `missed`, `within noise`, `ahead`, `level` (a
comparison "behind" is written as that word, which is checked too). A word in italics (`*met*`)
names the word rather than using it, as the rules themselves do. History pages (first line
`<!-- history: ... -->`) record verdicts as they were made and are not checked.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from attnmt.metrics import pooled_bootstrap
from attnmt.provenance import code_state, with_content_hash
from tools.figures import ROOT, lookup, read_result
from tools.raw_results import is_history

# "behind" is checked where a verdict comment names it; elsewhere it is mostly "the reason behind"
WORDS = re.compile(
    r"(?<![\w-])(met|missed|ahead|behind(?=<!-- verdict:)|level|within noise)(?![\w-])(?! of\b)", re.IGNORECASE
)
VERDICT = re.compile(r"<!-- verdict: (.+?) -->")
COMMENT = re.compile(r"<!--.*?-->")
ITALIC = re.compile(r"(?<![*\w])\*(?!\*)[^*]+(?<!\*)\*(?![*\w])")
# "the word level", "a log level": the word's other senses, told by the word before it
OTHER_SENSES = re.compile(
    r"\b(word|sentence|character|token|log|top|file|module|package|a high|a low)\s+$", re.IGNORECASE
)


def goal_verdict(values: list[float], target: float) -> str | None:
    """The goal's word from its seeds' values: met, within noise or missed; None under three seeds."""
    if len(values) < 3:
        return None
    median, spread = statistics.median(values), max(values) - min(values)
    margin = median - target
    if abs(margin) < spread:
        return "within noise"
    return "met" if margin >= 0 else "missed"


def compare_verdict(record: dict) -> str:
    """ahead, behind or level from a pooled bootstrap record (`delta`, `low`, `high`)."""
    return "ahead" if record["low"] > 0 else "behind" if record["high"] < 0 else "level"


def judge(evidence: str) -> tuple[str | None, str]:
    """(the word the rules give, the evidence in words) for a verdict comment's text."""
    kind, _, rest = evidence.partition(" ")
    if kind == "none,":
        return "", rest
    if kind == "goal":
        target, path, expressions = rest.split(" ", 2)
        data = read_result(path)
        values = [float(lookup(data, expression.strip())) for expression in expressions.split(";")]
        word = goal_verdict(values, float(target))
        median = statistics.median(values)
        return word, f"median {median:.2f} of {len(values)} seeds (spread {max(values) - min(values):.2f}) for {target}"
    if kind == "compare":
        path, expression = rest.split(" ", 1)
        record = lookup(read_result(path), expression.strip())
        interval = f"{record['delta']:+.2f}, 95% interval {record['low']:+.2f} to {record['high']:+.2f}"
        return compare_verdict(record), f"{interval} over {record['seeds']} seeds"
    raise ValueError(f"unknown verdict kind {kind!r}: goal, compare or 'none,'")


def check(text: str, name: str) -> tuple[list[str], list[str]]:
    """(each verdict with its evidence, each problem) of one page."""
    listed, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        for match in WORDS.finditer(line):
            named = any(span.start() < match.start() < span.end() for span in ITALIC.finditer(line))
            if named or _inside_comment(line, match.start()) or OTHER_SENSES.search(line[: match.start()]):
                continue  # an italic word names the word (the rules' own text), a comment is no prose
            comment = VERDICT.match(line, match.end())
            where, word = f"{name}:{number}", match[1].lower()
            if not comment:
                problems.append(f"{where}: {word!r} carries no verdict comment")
                continue
            try:
                expected, evidence = judge(comment[1])
            except (OSError, ValueError, KeyError, TypeError) as error:  # a missing file, a path that leads nowhere
                problems.append(f"{where}: {error}")
                continue
            if expected == "":
                continue  # said not to be a verdict
            listed.append(f"{where}: {word}: {evidence}")
            if expected is None:
                problems.append(f"{where}: {word!r} from fewer than three seeds: no verdict word ({evidence})")
            elif expected != word:
                problems.append(f"{where}: {word!r}, but the rules give {expected!r} ({evidence})")
    return listed, problems


def _inside_comment(line: str, position: int) -> bool:
    return any(match.start() < position < match.end() for match in COMMENT.finditer(line))


def pooled(race: Path) -> dict:
    """Each split and search of a race file with per-sentence statistics for both systems: their
    difference pooled over seeds (first system minus second)."""
    data = json.loads(race.read_text(encoding="utf-8"))
    (first, a), (second, b) = list(data["systems"].items())[:2]
    results: dict = {"command": " ".join(["python -m tools.verdicts", *sys.argv[1:]]), "race": str(race)}
    results |= {"systems": [first, second], "code_at_start": code_state()}
    for split in ("test2016", "test2017"):
        for search, _ in a["runs"][0][split].items():
            pairs = [(x[split][search], y[split][search]) for x, y in zip(a["runs"], b["runs"], strict=True)]
            if not all("sentence_stats" in x and "sentence_stats" in y for x, y in pairs):
                continue
            difference = pooled_bootstrap([(x["sentence_stats"], y["sentence_stats"]) for x, y in pairs])
            results.setdefault(split, {})[search] = {
                "delta": difference.delta,
                "low": difference.low,
                "high": difference.high,
                "seeds": difference.seeds,
                "samples": difference.samples,
                "verdict": difference.verdict,
            }
    return with_content_hash(results | {"code_at_end": code_state()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.verdicts", description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="*", type=Path)
    parser.add_argument("--pool", type=Path, help="a race's raw result: write its pooled comparisons")
    parser.add_argument("--json", type=Path, help="where --pool writes")
    args = parser.parse_args(argv)
    if args.pool:
        try:
            text = json.dumps(pooled(args.pool), indent=2) + "\n"
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(
                f"python -m tools.verdicts: {args.pool}: not a race's raw result with two systems ({error})",
                file=sys.stderr,
            )
            return 2
        (args.json.write_text(text, encoding="utf-8") if args.json else sys.stdout.write(text))
        return 0
    failed = False
    for document in args.documents:
        try:
            text = document.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            print(f"python -m tools.verdicts: {document}: cannot read it ({error})", file=sys.stderr)
            return 2
        if is_history(text):
            continue
        inside = document.is_absolute() and document.is_relative_to(ROOT)
        listed, problems = check(text, str(document.relative_to(ROOT) if inside else document))
        for line in listed:
            print(line)
        for problem in problems:
            print(f"python -m tools.verdicts: {problem}", file=sys.stderr)
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

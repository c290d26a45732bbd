"""Verdict words follow the rules: the goals' and comparisons' words recomputed from raw results."""

import glob

import pytest

from attnmt.metrics import pooled_bootstrap
from tools.figures import ROOT
from tools.verdicts import check, compare_verdict, goal_verdict, main


@pytest.mark.parametrize(
    ("values", "word"),
    [
        ([41.5, 41.6, 41.7], "met"),  # margin 0.6, spread 0.2
        ([41.05, 40.8, 41.3], "within noise"),  # margin 0.05 < spread 0.5
        ([40.9, 40.5, 41.2], "within noise"),  # short by 0.1, inside the spread 0.7
        ([39.73, 39.76, 39.94], "missed"),  # short by 1.24, spread 0.21
        ([42.0, 42.5], None),  # two seeds: no verdict
    ],
)
def test_a_goal_is_met_only_by_three_seeds_with_a_margin_past_their_spread(values, word):
    assert goal_verdict(values, 41.0) == word


@pytest.mark.parametrize(("low", "high", "word"), [(0.1, 1.0, "ahead"), (-0.5, 0.4, "level"), (-1.9, -0.4, "behind")])
def test_a_comparison_is_judged_by_where_its_interval_lies(low, high, word):
    assert compare_verdict({"delta": (low + high) / 2, "low": low, "high": high}) == word


def test_the_pooled_bootstrap_of_identical_systems_is_level_and_of_a_better_one_ahead():
    """Per-sentence statistics "h r m1 m2 m3 m4": a system matching every n-gram against one matching
    half of them, over two seeds, is ahead; a system against itself is level at exactly zero."""
    perfect = ["8 8 8 7 6 5"] * 50
    half = ["8 8 4 3 2 1"] * 25 + ["8 8 8 7 6 5"] * 25
    assert pooled_bootstrap([(perfect, half), (perfect, half)], samples=200).verdict == "ahead"
    same = pooled_bootstrap([(half, half)], samples=200)
    assert same.delta == 0 and same.low == same.high == 0 and same.verdict == "level"


def test_a_verdict_word_without_its_evidence_or_against_it_is_refused():
    race = "docs/results/peers-quality-identical-3-pooled.json"
    listed, problems = check(
        f"attnmt is ahead<!-- verdict: compare {race} test2016.beam5_tuned --> with tuned beams.\n"
        "the goal is met.\n"
        "it runs ahead of time, at the word level.\n",
        "page.md",
    )
    assert problems == [
        "page.md:1: 'ahead', but the rules give 'behind' (-1.17, 95% interval -1.90 to -0.38 over 2 seeds)",
        "page.md:2: 'met' carries no verdict comment",
    ]
    assert listed == ["page.md:1: ahead: -1.17, 95% interval -1.90 to -0.38 over 2 seeds"]


def test_every_verdict_in_the_readme_docs_and_changelog_follows_the_rules(capsys):
    pages = ["README.md", "CHANGELOG.md", *sorted(glob.glob("docs/**/*.md", root_dir=ROOT, recursive=True))]
    assert main([str(ROOT / page) for page in pages]) == 0, capsys.readouterr().err


def test_a_machine_name_follows_its_raw_result_and_no_page_says_the_project_machine():
    """Figures ran on several processors: each page names the one its raw result records."""
    from tools.machines import check_machines, machine_name

    assert machine_name({"machine": {"cpu": "Intel(R) Xeon(R) Processor"}}) == "Intel Xeon"
    assert (
        machine_name({"machine": {"cpu": ["Intel(R) Xeon(R) Processor", "AMD EPYC 7B13"]}}) == "Intel Xeon and AMD EPYC"
    )
    race = {"machine": {"cpu": "Intel(R) Xeon(R) Processor"}}
    check_machines("ran on Intel Xeon<!-- machine: race.json --> cores", "page.md:1", lambda path: race)
    with pytest.raises(ValueError, match=r"race\.json ran on Intel Xeon: write that name"):
        check_machines("ran on AMD EPYC<!-- machine: race.json --> cores", "page.md:1", lambda path: race)
    pages = ["README.md", *sorted(glob.glob("docs/**/*.md", root_dir=ROOT, recursive=True))]
    current = [page for page in pages if not (ROOT / page).read_text(encoding="utf-8").startswith("<!-- history:")]
    assert [page for page in current if "the project machine" in (ROOT / page).read_text(encoding="utf-8")] == []


def test_evidence_that_cannot_be_read_is_one_line_not_a_traceback(tmp_path, capsys):
    listed, problems = check("met<!-- verdict: goal 1 docs/results/none.json a;b;c -->\n", "page.md")
    assert listed == [] and len(problems) == 1 and problems[0].startswith("page.md:1: ") and "none.json" in problems[0]
    assert main(["--pool", str(ROOT / "docs/results/demo-evaluation.json")]) == 2  # not a race
    assert main([str(tmp_path / "missing.md")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 2 and "not a race's raw result" in error and "missing.md: cannot read it" in error

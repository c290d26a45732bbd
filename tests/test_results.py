"""The figures in README.md and docs/ are the ones in the committed raw results.

Every table quoted after a `<!-- results: FILE TABLE -->` marker must be exactly what the
benchmark's report renders from FILE (`tools.quote`), and every results file a document
links exists and says how it was made (command, machine).
"""

import json
import re

import pytest

from tools.quote import MARKER, RENDERERS, ROOT, render, requote

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\((?:\.\./)?((?:benchmarks|docs)/results/[\w.-]+\.json)\)")


def _markers():
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines()):
            match = MARKER.fullmatch(line.strip())
            if match:
                yield pytest.param(document, number, match[1], match[2], id=f"{document.name}:{number + 1}")


def _links():
    for document in DOCUMENTS:
        for path in sorted(set(LINK.findall(document.read_text(encoding="utf-8")))):
            yield pytest.param(document, path, id=f"{document.name}:{path}")


@pytest.mark.parametrize(("document", "line", "path", "table"), list(_markers()))
def test_a_quoted_table_is_the_one_its_results_file_renders(document, line, path, table):
    expected = render(path, table)
    quoted = document.read_text(encoding="utf-8").splitlines()[line + 1 : line + 1 + len(expected)]
    assert quoted == expected, f"{document.name}:{line + 2}: differs from {path}; run python -m tools.quote"


@pytest.mark.parametrize(("document", "path"), list(_links()))
def test_a_linked_results_file_exists_and_says_how_it_was_made(document, path):
    file = ROOT / path
    assert file.is_file(), f"{document.name} links {path}, which is not in the repository"
    results = json.loads(file.read_text(encoding="utf-8"))
    assert results.get("command"), f"{path}: no command"
    assert results.get("machine", {}).get("cpu"), f"{path}: no machine"


def test_the_documents_quote_results():
    """Guards the guard: a renamed or mistyped marker would silently skip the checks above."""
    assert {document.name for document, *_ in (param.values for param in _markers())} >= {"README.md", "performance.md"}


def test_requote_replaces_a_stale_table_and_keeps_the_rest(tmp_path):
    marker = "<!-- results: benchmarks/results/peers-speed.json peers-speed -->"
    stale = f"# Title\n\n{marker}\n| old | table |\n|---|---|\n| 1 | 2 |\n\nAfter.\n"
    fresh = requote(stale)
    assert fresh == f"# Title\n\n{marker}\n" + "\n".join(render(*marker.split()[2:4])) + "\n\nAfter.\n"
    assert requote(fresh) == fresh


def test_the_experiments_page_quotes_its_tables():
    """docs/experiments.md keeps its tables under markers, so the study's figures cannot drift."""
    quoted = {
        table for document, _, _, table in (param.values for param in _markers()) if document.name == "experiments.md"
    }
    assert {"experiments-attention", "experiments-attention-steps", "experiments-attention-length"} <= quoted
    assert "experiments-trials" in quoted


def test_an_experiment_table_gives_mean_and_sample_deviation_over_seeds():
    def trial(name, bleu):
        validation = [{"step": 300, "valid_bleu": bleu / 2, "valid_loss": 2.0}]
        return {
            "name": name,
            "parameters": 2_560_000,
            "valid_bleu": bleu,
            "test_bleu": bleu - 1,
            "valid_loss": 1.5,
            "train_loss_end": 1.4,
            "validation": validation,
        }

    results = {
        "base": "base",
        "experiments": {
            "rnn": {"points": [{"label": "gru", "trials": ["base", "b2"]}, {"label": "lstm", "trials": ["l"]}]}
        },
        "trials": [trial("base", 40.0), trial("b2", 42.0), trial("l", 35.0)],
    }
    assert RENDERERS["experiments-rnn"](results)[2:] == [
        "| gru (base) | 41.00 ± 1.41 | 40.00 ± 1.41 | 1.50 ± 0.00 | 1.40 ± 0.00 | 2.56M |",
        "| lstm | 35.00 | 34.00 | 1.50 | 1.40 | 2.56M |",
    ]
    assert RENDERERS["experiments-rnn-steps"](results)[2:] == ["| gru (base) | 20.50 |", "| lstm | 17.50 |"]

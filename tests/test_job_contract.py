"""The two faces agree on which features combine: every pair of the features both offer, sent
through `attnmt translate` and through POST /v1/translate, is accepted by both or refused by both
naming the same feature, as `job.REFUSED` (the one table) says.

The pairs are generated from `job.FEATURES`: a feature added there without a way to ask for it on
each face below fails `test_every_feature_both_faces_offer_has_its_two_spellings`.
"""

import itertools

import pytest

from attnmt.cli.common import FLAGS
from attnmt.jobs.job import FEATURES, REFUSED
from tests.cli_helpers import run_error, run_ok
from tests.serve_helpers import serving

CLI_ONLY = {"alignment"}  # the API returns attention, from which an alignment follows
PLAIN, TAGGED = "a b c d", "<b>a</b> b c d"


def spellings(tmp_path) -> dict[str, tuple[list[str], dict]]:
    """Each feature both faces offer -> (its CLI arguments, its API request fields)."""
    glossary = tmp_path / "glossary.tsv"
    glossary.write_text("b\tb\n", encoding="utf-8")
    return {
        "document": (["--document"], {"document": True}),
        "markup": (["--markup", "html"], {"markup": "html"}),
        "prefixes": (["--prefix", "d"], {"prefixes": ["d"]}),
        "required_phrases": (["--require", "a"], {"required_phrases": [["a"]]}),
        "glossary": (["--glossary", str(glossary)], {"glossary": [["b", "b"]]}),
        "n_best": (["--n-best", "2", "--beam", "2"], {"n_best": 2, "beam_size": 2}),
        "attention": (["--attention", str(tmp_path / "heatmaps")], {"return_attention": True}),
    }


def refused_field(pair: tuple[str, str]) -> str | None:
    """The feature REFUSED names for this pair, in either order; None when the two combine."""
    for refused, other in (pair, pair[::-1]):
        if (refused, other) in REFUSED:
            return refused
    return None


def test_every_feature_both_faces_offer_has_its_two_spellings(tmp_path):
    assert set(spellings(tmp_path)) == set(FEATURES) - CLI_ONLY
    assert all(refused in FEATURES and other in FEATURES for refused, other in REFUSED)


def test_every_pair_of_features_gets_the_same_answer_from_the_cli_and_the_api(reverse_run, tmp_path, capsys):
    faces = spellings(tmp_path)
    _, client = serving(str(reverse_run))
    with client:
        for pair in itertools.combinations(faces, 2):
            sentence = TAGGED if "markup" in pair else PLAIN
            argv = ["translate", str(reverse_run), sentence, *faces[pair[0]][0], *faces[pair[1]][0]]
            body = {"sentences": [sentence], **faces[pair[0]][1], **faces[pair[1]][1]}
            answer = client.post("/v1/translate", json=body)
            field = refused_field(pair)
            if field is None:
                assert answer.status_code == 200, (pair, answer.text)
                assert run_ok(capsys, *argv).strip(), pair
                continue
            assert answer.status_code == 422 and answer.json()["field"] == field, (pair, answer.text)
            line = run_error(capsys, *argv)
            assert line.startswith(f"attnmt: error: {FLAGS[field]}: "), (pair, line)


@pytest.mark.parametrize(("pair", "why"), list(REFUSED.items()))
def test_each_refusal_says_why_in_the_words_of_its_face(pair, why):
    """`check` names both features as the face spells them, and the reason from the table."""
    from attnmt.jobs.job import TranslationJob
    from attnmt.search.options import SearchOverrides
    from attnmt.utils import UserError

    asked = {
        "document": {"document": True},
        "markup": {"markup": "html"},
        "prefixes": {"prefixes": True},
        "required_phrases": {"required_phrases": True},
        "alignment": {"alignment": True},
        "glossary": {"glossary": [["b", "b"]]},
        "n_best": {"search": SearchOverrides(n_best=2)},
        "attention": {"attention": True},
    }
    job = TranslationJob(**asked[pair[0]], **asked[pair[1]])
    with pytest.raises(UserError) as refused:
        job.check(spell=lambda name: f"<{name}>")
    assert refused.value.field == pair[0]
    assert refused.value.problem == f"<{pair[0]}> cannot be combined with <{pair[1]}>: {why}"


def test_no_face_reads_the_translators_codec_or_config():
    """The CLI and the server read a model through the translator's named properties and methods
    (`source_language`, `encode_target`, ...), so a second model family need only offer those."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "attnmt"
    found = []
    for path in sorted([*(root / "cli").glob("*.py"), *(root / "serve").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("codec", "config"):
                owner = ast.unparse(node.value)
                if owner.endswith(("translator", "teacher")):
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {owner}.{node.attr}")
    assert not found, found

"""Inline markup: tags read out of a sentence, put back around the aligned target words, the output
well-formed whenever the input was; through the CLI and the API."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.jobs.markup import Element, MarkupError, Standalone, put_back, read_markup
from tests.cli_helpers import run_error, run_ok

TAG = re.compile(r"<[^>]*>")


def tags_of(text: str) -> Counter:
    return Counter(TAG.findall(text))


def standalones(element: Element) -> Counter:
    """The standalone tags of a tree, by text: an element that lost its partner would add one."""
    found = Counter()
    for node in element.children:
        found += Counter([node.text]) if isinstance(node, Standalone) else standalones(node)
    return found


def plain(text: str) -> str:
    """The text without its tags, entities decoded (as the reader sees it)."""
    return read_markup(text).text


def test_text_and_tags_are_read_with_their_spans():
    marked = read_markup('Click <a href="/x">the <b>red</b> button</a> now.<br/> a &amp; b<!-- note -->')
    assert marked.text == "Click the red button now. a & b"
    [link, br, comment] = marked.root.children
    assert isinstance(link, Element) and link.opening == '<a href="/x">' and link.closing == "</a>"
    assert marked.text[link.start : link.end] == "the red button"
    [bold] = link.children
    assert marked.text[bold.start : bold.end] == "red"
    assert br == Standalone("<br/>", len("Click the red button now.")) and comment.text == "<!-- note -->"
    assert read_markup("a <img src='x.png'> b").root.children == [Standalone("<img src='x.png'>", 2)]


def test_tags_without_their_partner_are_kept_where_they_stand():
    assert read_markup("x </b> y").root.children == [Standalone("</b>", 2)]
    opened = read_markup("a <b>open <i>it</i>")
    assert opened.text == "a open it"
    assert [type(node).__name__ for node in opened.root.children] == ["Standalone", "Element"]


@pytest.mark.parametrize(
    ("sentence", "column", "problem"),
    [
        ("a <b>x <i>y</b></i>", 12, "</b> closes <b> while <i> (column 8) is still open: the markup is not"),
        ("a <b", 3, "an unfinished tag '<b'"),
        ("x <b>y</b> <i class='z'", 12, "an unfinished tag"),
    ],
)
def test_markup_that_is_not_well_formed_is_one_error_naming_the_column(sentence, column, problem):
    with pytest.raises(MarkupError, match=f"^column {column}: .*{re.escape(problem)}"):
        read_markup(sentence)


def test_tags_follow_the_alignment_when_the_words_are_reordered():
    marked = read_markup("a <b>red</b> car <i>now</i>")
    # "une voiture rouge maintenant": red -> rouge, car -> voiture, now -> maintenant
    aligned = {0: {0}, 1: {2}, 2: {1}, 3: {3}}
    assert put_back(marked, "une voiture rouge maintenant", aligned) == "une voiture <b>rouge</b> <i>maintenant</i>"
    # words with no aligned target keep their element, empty, before the next aligned word
    assert put_back(marked, "une voiture maintenant", {0: {0}, 2: {1}, 3: {2}}) == (
        "une <b></b>voiture <i>maintenant</i>"
    )
    # an element spans from its first aligned target word to its last; the text is escaped again
    spread = read_markup("<b>x &amp; y</b> z")
    assert put_back(spread, "p & q r", {0: {0}, 1: {1}, 2: {2}, 3: {3}}) == "<b>p &amp; q</b> r"


WORDS = st.lists(st.sampled_from(["a", "b", "c&d", "x<y", "é"]), min_size=1, max_size=6)


@st.composite
def tagged_sentences(draw) -> str:
    """A well-formed tagged sentence: nested elements, void tags and comments around words."""
    words = [w.replace("&", "&amp;").replace("<", "&lt;") for w in draw(WORDS)]

    def build(items: list[str], depth: int) -> str:
        if not items:
            return ""
        choice = draw(st.integers(0, 4 if depth < 3 else 1))
        if choice == 0 or (len(items) == 1 and choice > 2):
            return " ".join(items)
        cut = draw(st.integers(0, len(items)))
        name = draw(st.sampled_from(["b", "i", "span"]))
        inner = build(items[:cut], depth + 1)
        rest = build(items[cut:], depth + 1)
        if choice == 1:
            return f"{inner} <br/> {rest}".strip()
        if choice == 2:
            return f"<{name}>{inner}</{name}> {rest}".strip()
        return f'<a href="x">{inner}</a> <!--c--> {rest}'.strip()

    return build(words, 0)


@settings(max_examples=300, deadline=None)
@given(
    tagged_sentences(),
    st.lists(st.sampled_from(["p", "q&r", "s<t", "ü"]), max_size=7),
    st.dictionaries(st.integers(0, 6), st.sets(st.integers(0, 6), max_size=3)),
)
def test_the_output_is_well_formed_with_every_tag_and_the_translations_text(sentence, target_words, aligned):
    """Whatever the alignment: the output reads back without an error, holds every tag of the input
    once, and its text is the translation's."""
    marked = read_markup(sentence)
    target = " ".join(target_words)
    output = put_back(marked, target, {s: {t for t in ts if t < len(target_words)} for s, ts in aligned.items()})
    again = read_markup(output)  # raises for markup that is not well-formed
    assert again.text.split() == target.split()
    assert tags_of(output) == tags_of(sentence)
    assert standalones(again.root) == standalones(marked.root), "every element still an element"


@settings(max_examples=200, deadline=None)
@given(tagged_sentences())
def test_the_same_words_aligned_one_to_one_give_the_input_back(sentence):
    """Tags go after the space before their first word and end right after their last: a sentence
    whose tags sit that way is written back as it was."""
    marked = read_markup(sentence)
    words = marked.text.split()
    output = put_back(marked, " ".join(words), {k: {k} for k in range(len(words))})
    assert plain(output) == " ".join(words) and tags_of(output) == tags_of(sentence)
    elements = [node for node in marked.root.children if isinstance(node, Element)]
    for element in elements:  # each top-level element around the same words as in the input
        inside = marked.text[element.start : element.end].split()
        if inside:
            assert f"{element.opening}{' '.join(inside)}" in output.replace("&amp;", "&").replace("&lt;", "<") or (
                element.children
            )


def test_the_command_line_puts_tags_back_on_the_translation(reverse_run, tmp_path, capsys):
    sentences = ["a <b>b c</b> d", "e f <i>g</i>", "h<br/> i j"]
    out = run_ok(capsys, "translate", str(reverse_run), "--markup", "html", *sentences).splitlines()
    texts = run_ok(capsys, "translate", str(reverse_run), *[plain(s) for s in sentences]).splitlines()
    for output, text, sentence in zip(out, texts, sentences, strict=True):
        assert plain(output).split() == text.split(), "the translation of the text without its tags"
        assert tags_of(output) == tags_of(sentence)
    inputs = tmp_path / "tagged.txt"
    inputs.write_text("".join(line + "\n" for line in sentences))
    assert run_ok(capsys, "translate", str(reverse_run), "--markup", "html", "--input", str(inputs)).splitlines() == out


def test_a_line_that_is_not_well_formed_stops_the_run_before_anything_is_written(reverse_run, tmp_path, capsys):
    inputs = tmp_path / "tagged.txt"
    inputs.write_text("a <b>b</b>\nc d\ne <b>f <i>g</b></i>\n")
    output = tmp_path / "out.txt"
    line = run_error(
        capsys, "translate", str(reverse_run), "--markup", "html", "--input", str(inputs), "--output", str(output)
    )
    assert line == (
        f"attnmt: error: --markup: {inputs}:3: column 12: </b> closes <b> while <i> (column 8) is still open: "
        "the markup is not well-formed"
    )
    assert not output.exists(), "nothing written"
    for option in (["--alignment"], ["--prefix", "x"]):
        message = run_error(capsys, "translate", str(reverse_run), "a <b>b</b>", "--markup", "html", *option)
        assert message.startswith(f"attnmt: error: {option[0]}: {option[0]} cannot be combined with --markup")


def test_the_api_answers_the_tagged_translation_and_refuses_broken_markup(reverse_run):
    from tests.serve_helpers import serving

    _, client = serving(str(reverse_run))
    with client:
        answer = client.post("/v1/translate", json={"sentences": ["a <b>b c</b> d", "e f"], "markup": "html"})
        assert answer.status_code == 200, answer.text
        first, second = answer.json()["translations"]
        assert first["source"] == "a b c d" and tags_of(first["markup"]) == tags_of("<b></b>")
        assert (
            plain(first["markup"]) == first["hypotheses"][0]["text"]
            and second["markup"] == second["hypotheses"][0]["text"]
        )
        assert "markup" not in client.post("/v1/translate", json={"sentences": ["a b"]}).json()["translations"][0]
        for body, field, message in (
            ({"sentences": ["a", "<b>c <i>d</b></i>"], "markup": "html"}, "sentences[1]", "column 10"),
            ({"sentences": ["a"], "markup": "html", "prefixes": ["x"]}, "prefixes", "cannot be combined with markup"),
            ({"sentences": ["a"], "markup": "xml"}, "markup", ""),
        ):
            refused = client.post("/v1/translate", json=body)
            assert refused.status_code == 422 and refused.json()["field"] == field, refused.text
            assert message in refused.json()["error"]


def test_a_page_of_tagged_paragraphs_gets_its_tags_back_over_each_paragraph(reverse_run, capsys):
    """Documents and markup together: each paragraph's tags are taken out, its text cut into
    sentences and translated, and the tags put back over the joined paragraph, on both faces."""
    from tests.serve_helpers import serving

    paragraphs = ["a <b>b c! d</b> e f?", "<i>g h!</i> a."]
    out = run_ok(capsys, "translate", str(reverse_run), "--markup", "html", "--document", *paragraphs).splitlines()
    texts = run_ok(capsys, "translate", str(reverse_run), "--document", *[plain(p) for p in paragraphs]).splitlines()
    for output, text, paragraph in zip(out, texts, paragraphs, strict=True):
        assert plain(output) == text, "the paragraph's translation without its tags"
        assert tags_of(output) == tags_of(paragraph)
    _, client = serving(str(reverse_run))
    with client:
        body = {"sentences": paragraphs, "markup": "html", "document": True}
        answer = client.post("/v1/translate", json=body)
        assert answer.status_code == 200, answer.text
        assert [paragraph["text"] for paragraph in answer.json()["paragraphs"]] == out
        assert all("markup" not in sentence for sentence in answer.json()["translations"]), "tags are the paragraph's"


def test_a_paragraphs_sentences_are_joined_with_their_attention_block_diagonal():
    import torch

    from attnmt.jobs.documents import Paragraph
    from attnmt.jobs.job import _joined
    from attnmt.translation import Translation

    def translation(source_tokens, tokens, seed):
        attention = torch.rand(len(tokens) + 1, len(source_tokens), generator=torch.Generator().manual_seed(seed))
        text = " ".join(tokens)
        return Translation(" ".join(source_tokens), text, tokens, source_tokens, -1.0, -2.0, attention)

    first, second = translation(["a", "b"], ["x", "y", "z"], 0), translation(["c", "d", "e"], ["w"], 1)
    joined = _joined([first, second], Paragraph(1, " ", ["a b", "c d e"], ["  ", "\n"]))
    assert joined.text == " x y z  w\n" and joined.tokens == ["x", "y", "z", "w"]
    assert joined.source_tokens == ["a", "b", "c", "d", "e"] and (joined.score, joined.log_prob) == (-2.0, -4.0)
    assert joined.attention.shape == (4 + 1, 5)
    assert torch.equal(joined.attention[:3, :2], first.attention[:3]), "the first sentence's rows, </s> left out"
    assert torch.equal(joined.attention[3:4, 2:], second.attention[:1])
    assert joined.attention[:3, 2:].abs().sum() == 0 and joined.attention[3:, :2].abs().sum() == 0
    assert joined.attention[4].abs().sum() == 0, "</s>'s row, which the alignment leaves out"

"""The attention explorer end to end in a real browser: `attnmt serve` in its own process, the
page in headless Chromium (Debian's package) driven by Playwright, no browser download.

Skipped, with a line saying how to enable it, where Chromium or Playwright is missing; CI
installs Chromium (`.ci/run`), so there it always runs.
"""

import re

import pytest

from benchmarks.chromium import chromium
from benchmarks.serving import running_server
from tests.browser_helpers import replay_the_search
from tools.browser import open_page

try:
    import playwright.sync_api as playwright
except ImportError:  # pragma: no cover - dev dependencies are installed by `make test`
    playwright = None

pytestmark = pytest.mark.skipif(
    chromium() is None or playwright is None,
    reason="needs Chromium (apt-get install chromium, or ATTNMT_CHROMIUM=/path/to/chrome) and playwright (pip)",
)
expect = playwright.expect if playwright else None


@pytest.fixture(scope="module")
def server(reverse_run, dot_reverse_run):
    """`attnmt serve` on a free port with the two reverse-task runs; its base URL."""
    with running_server([str(reverse_run), str(dot_reverse_run)]) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with open_page(server) as page:
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        expect(page.locator("#model option")).to_have_count(2)
        yield page
        assert not errors, errors


def test_translate_and_explore_the_heatmap(page, tmp_path):
    page.fill("#source", "a b c d e")
    page.click("#translate-button")
    expect(page.locator("#heatmap rect.cell").first).to_be_visible()
    translation = page.inner_text("#translation")
    outputs = page.locator("#heatmap text.out-token")
    sources = page.locator("#heatmap text.src-token")
    assert sources.all_text_contents() == ["a", "b", "c", "d", "e"]
    assert outputs.all_text_contents()[-1] == "</s>" and " ".join(outputs.all_text_contents()[:-1]) == translation
    assert page.locator("#heatmap rect.cell").count() == outputs.count() * sources.count()
    assert page.locator("#heatmap rect.cell.argmax").count() == outputs.count()  # one per output token
    assert page.locator("#nbest tr").count() >= 1

    outputs.nth(0).hover()
    expect(outputs.nth(0)).to_have_class(re.compile(r"\bfocus\b"))
    assert page.locator("#heatmap text.src-token.highlight").count() >= 1
    dimmed = page.locator("#heatmap rect.cell.dim").count()
    assert dimmed == (outputs.count() - 1) * sources.count()  # every row but the hovered one

    sources.nth(4).hover()  # the reverse: which outputs attend to "e"
    expect(sources.nth(4)).to_have_class(re.compile(r"\bfocus\b"))
    assert page.locator("#heatmap text.out-token.highlight").count() >= 1
    page.screenshot(path=tmp_path / "translate.png", full_page=True)


def test_step_through_the_search(page, tmp_path):
    page.fill("#source", "c a b")
    total = replay_the_search(page, expect)
    label = page.locator("#step-label")
    first_rows = page.locator("#search-heatmap text.out-token").count()
    page.click("#step-forward")
    expect(label).to_have_text(f"step 2 of {total}")
    assert page.locator("#search-heatmap text.out-token").count() == first_rows + 1  # one more token so far
    page.locator("#candidates tr").nth(1).click()
    expect(page.locator("#candidates tr").nth(1)).to_have_class("selected")
    page.screenshot(path=tmp_path / "search.png", full_page=True)


def test_compare_two_runs_side_by_side(page, tmp_path):
    page.fill("#source", "d c b a")
    page.click("button[data-tab=compare]")
    page.select_option("#model-b", "dot")
    page.click("#compare-button")
    expect(page.locator("#side-b rect.cell").first).to_be_visible()
    assert "additive" in page.inner_text("#side-a h3") and "dot" in page.inner_text("#side-b h3")
    assert page.locator("#side-a svg").count() == 1 and page.locator("#side-b svg").count() == 1
    page.screenshot(path=tmp_path / "compare.png", full_page=True)


def test_the_test_set_worst_first_and_filtered(page):
    page.click("button[data-tab=analysis]")
    page.click("#analysis-button")
    expect(page.locator("#analysis-table tr").nth(1)).to_be_visible(timeout=60_000)
    scores = [float(text) for text in page.locator("#analysis-table td.chrf").all_text_contents()]
    assert scores == sorted(scores)
    page.fill("#min-length", "7")
    lengths = [int(row.locator("td").nth(1).inner_text()) for row in page.locator("#analysis-table tr").all()[1:]]
    assert all(length >= 7 for length in lengths)
    page.locator("#analysis-table tr").nth(1).click()
    expect(page.locator("#analysis-detail rect.cell").first).to_be_visible()


def test_an_error_is_shown_not_thrown(page):
    page.click("button[data-tab=translate]")
    page.fill("#source", "a " * 600)  # over the server's 1,000 characters
    page.click("#translate-button")
    expect(page.locator("#status")).to_have_class(re.compile(r"\berror\b"))
    assert "at most 1000 characters" in page.inner_text("#status")
    page.fill("#source", "a b")
    page.click("#translate-button")
    expect(page.locator("#status")).not_to_have_class(re.compile(r"\berror\b"))
    expect(page.locator("#status")).to_have_text("")  # answered: no request is left in flight for the next test


def test_type_the_start_of_a_translation_then_require_a_term(page):
    page.click('.tab[data-tab="translate"]')
    page.fill("#source", "a b c d e")
    page.fill("#prefix", "e d")  # typing is enough: the continuation follows once it pauses
    expect(page.locator("#translation")).to_have_text(re.compile(r"^e d\b"))
    assert page.locator("#heatmap text.out-token").all_text_contents()[:2] == ["e", "d"]
    page.fill("#prefix", "")
    page.fill("#require", "x")
    expect(page.locator("#translation")).to_have_text(re.compile(r"\bx\b"))
    page.fill("#prefix", "e d")  # both at once: the start as typed, and the term in what follows
    expect(page.locator("#translation")).to_have_text(re.compile(r"^e d\b.*\bx\b"))
    page.click("button[data-tab=search]")  # the replay shows the search as it was steered
    page.click("#explain-button")
    # while the prefix is forced, its token is the one candidate (waiting out an earlier replay's table)
    expect(page.locator("#candidates tr").first.locator("td").nth(1)).to_have_text("e")
    expect(page.locator("#candidates tr")).to_have_count(1)
    page.click('.tab[data-tab="translate"]')
    page.fill("#prefix", "")
    page.fill("#require", "")


def test_score_your_own_translation(page):
    page.fill("#source", "a b c")
    page.click('.tab[data-tab="score"]')
    page.fill("#own", "c b a")
    page.click("#score-button")
    expect(page.locator("#scored tr")).to_have_count(1 + 4)  # a header, three tokens and </s>
    assert page.locator("#scored td.token").all_text_contents() == ["c", "b", "a", "</s>"]
    expect(page.locator("#score-heatmap rect.cell")).to_have_count(4 * 3)
    page.click('.tab[data-tab="translate"]')


def test_the_terms_of_the_server_glossary_are_shown_with_the_translation(page, reverse_run, tmp_path):
    terms = tmp_path / "terms.tsv"
    terms.write_text("b c\tx y\n")
    with running_server([str(reverse_run)], "--glossary", str(terms)) as url:
        glossary_page = page.context.browser.new_page()  # the module's browser: one Playwright at a time
        try:
            glossary_page.goto(url)
            glossary_page.wait_for_selector("#model option", state="attached")
            glossary_page.fill("#source", "a b c d")
            glossary_page.click("#translate-button")
            expect(glossary_page.locator("#glossary")).to_have_text("Glossary terms applied: b c → x y")
            assert "x y" in glossary_page.inner_text("#translation")
            glossary_page.fill("#source", "e f g")
            glossary_page.click("#translate-button")
            expect(glossary_page.locator("#glossary")).to_have_text("")
        finally:
            glossary_page.close()


def shown(page) -> tuple[list[str], list[str], list[list[float]]]:
    """The heatmap on the page: its row tokens, its column tokens and its weights, read from the
    cells' titles ("row → column: 0.123", row by row)."""
    rows = page.locator("#heatmap text.out-token").all_text_contents()
    columns = page.locator("#heatmap text.src-token").all_text_contents()
    titles = page.locator("#heatmap rect.cell title").all_text_contents()
    assert len(titles) == len(rows) * len(columns)
    weights = [float(re.search(r": (\S+)$", title).group(1)) for title in titles]
    return rows, columns, [weights[i : i + len(columns)] for i in range(0, len(weights), len(columns))]


def difference(weights: list[list[float]], expected: list[list[float]]) -> float:
    """The largest difference of two maps of one shape."""
    pairs = (pair for row, want in zip(weights, expected, strict=True) for pair in zip(row, want, strict=True))
    return max(abs(a - b) for a, b in pairs)


def close_to(weights: list[list[float]], expected: list[list[float]]) -> bool:
    """Equal to the 3 decimals a cell's title shows (and the API's 4)."""
    return difference(weights, expected) <= 6e-4


def mean_of_heads(layer: list[list[list[float]]]) -> list[list[float]]:
    return [
        [sum(head[r][c] for head in layer) / len(layer) for c in range(len(layer[0][0]))] for r in range(len(layer[0]))
    ]


def test_a_transformers_every_layer_and_head_is_picked_beside_the_heatmap(page, transformer_run, reverse_run, tmp_path):
    with running_server([str(transformer_run), str(reverse_run)]) as url:
        heads_page = page.context.browser.new_page()  # the module's browser: one Playwright at a time
        errors, asked = [], []
        heads_page.on("pageerror", lambda error: errors.append(str(error)))
        heads_page.on("request", lambda request: asked.append(request.url) if "/v1/heads" in request.url else None)
        try:
            heads_page.goto(url)
            expect(heads_page.locator("#model option")).to_have_count(2)
            expect(heads_page.locator("#model-info")).to_contain_text("transformer, 2+2 layers × 4 heads, d_model 32")
            picker = heads_page.locator("#heads")
            expect(picker).to_be_hidden()
            heads_page.fill("#source", "a b c d e")
            with heads_page.expect_response(lambda response: response.url.endswith("/v1/heads")) as answered:
                heads_page.click("#translate-button")
            answer = answered.value.json()
            expect(picker).to_be_visible()
            alignment = answer["alignment_layer"]
            assert heads_page.locator("#heads-layer option").all_text_contents() == [
                f"{i} (alignment)" if i == alignment else str(i) for i in range(2)
            ]
            assert heads_page.input_value("#heads-layer") == str(alignment)  # by default: the alignment layer,
            assert heads_page.input_value("#heads-head") == "mean"  # its heads' average
            assert heads_page.locator("#heads-head option").all_text_contents() == ["average", "0", "1", "2", "3"]
            rows, columns, default = shown(heads_page)
            assert rows == answer["outputs"] and columns == answer["source_tokens"] == ["a", "b", "c", "d", "e"]
            assert close_to(default, mean_of_heads(answer["cross"][alignment]))

            other = 1 - alignment  # another layer, and of its heads the one least like the default picture
            maps = answer["cross"][other]
            head = max(range(4), key=lambda h: difference(maps[h], default))
            heads_page.select_option("#heads-layer", str(other))
            heads_page.select_option("#heads-head", str(head))
            _, _, picked = shown(heads_page)
            assert close_to(picked, maps[head]) and not close_to(picked, default)  # the heatmap changed to it

            heads_page.select_option("#heads-kind", "encoder")  # the source over itself: S x S
            rows, columns, weights = shown(heads_page)
            assert rows == columns == answer["source_tokens"]
            assert heads_page.locator("#heatmap rect.cell").count() == 5 * 5
            assert heads_page.input_value("#heads-layer") == str(other)  # the layer and head picked are kept
            assert close_to(weights, answer["encoder"][other][head])
            assert "(alignment)" not in " ".join(heads_page.locator("#heads-layer option").all_text_contents())

            heads_page.select_option("#heads-kind", "decoder")  # each output over what it was fed so far
            rows, columns, weights = shown(heads_page)
            assert rows == answer["outputs"] and columns == answer["inputs"] and columns[0] == "<s>"
            assert close_to(weights, answer["decoder"][other][head])
            assert len(asked) == 1  # fetched once per translation, not once per pick
            heads_page.screenshot(path=tmp_path / "heads.png", full_page=True)

            heads_page.select_option("#model", "run")  # an RNN: the page as it always was, no picker
            expect(picker).to_be_hidden()
            expect(heads_page.locator("#model-info")).to_contain_text("additive attention")
            heads_page.click("#translate-button")
            expect(heads_page.locator("#status")).to_have_text("")
            rows, columns, _ = shown(heads_page)
            assert columns == ["a", "b", "c", "d", "e"] and rows[-1] == "</s>"
            expect(picker).to_be_hidden()
            assert len(asked) == 1
        finally:
            heads_page.close()
        assert not errors, errors

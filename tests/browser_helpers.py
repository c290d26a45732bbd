"""What the browser tests of the explorer (`attnmt serve`) and of the exported web page share:
both pages replay the beam search with the same controls (`views.js`'s `SearchReplay`)."""

import re


def replay_the_search(page, expect) -> int:
    """Open the search tab, replay the search of the sentence typed, and check that it starts at
    step 1; the number of steps (at least two)."""
    page.click("button[data-tab=search]")
    page.click("#explain-button")
    expect(page.locator("#candidates tr").first).to_be_visible()
    label = page.locator("#step-label")
    total = int(re.search(r"of (\d+)", label.inner_text()).group(1))
    assert label.inner_text() == f"step 1 of {total}" and total >= 2
    return total

"""The attention explorer in headless Chromium: what the browser test and the docs' screenshots share.

    python -m tools.browser [--runs runs/demo runs/multi30k-en-de] [--output docs/serving]

writes OUTPUT-translate.png, OUTPUT-compare.png and OUTPUT-search.png: `attnmt serve` on the
runs, a sentence typed into the page, its heatmap hovered, the two runs compared, the search
stepped. Needs Debian's Chromium (`apt-get install chromium`) or ATTNMT_CHROMIUM, and playwright
from PyPI; no browser is downloaded.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import threading
from contextlib import contextmanager
from pathlib import Path

from benchmarks.chromium import open_browser
from benchmarks.serving import running_server

SENTENCE = "The little girl is running on the beach with her dog."


@contextmanager
def open_page(url: str, width: int = 1200, height: int = 900):
    """A Playwright page on `url` in headless Chromium, once the page has listed its models."""
    with open_browser() as browser:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(url)
        page.wait_for_selector("#model option", state="attached")
        yield page


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # a test's page loads are not news
        pass


@contextmanager
def serving_folder(folder: Path):
    """`folder` served as static files on a free local port, as `python -m http.server` serves
    it (no cross-origin isolation headers); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def screenshots(runs: list[str], output: str) -> list[Path]:
    paths = [Path(f"{output}-{name}.png") for name in ("translate", "compare", "search")]
    with running_server(runs) as url, open_page(url) as page:
        page.fill("#source", SENTENCE)
        page.click("#translate-button")
        page.wait_for_selector("#heatmap rect.cell", timeout=60_000)
        page.hover("#heatmap text.out-token[data-row='3']")
        page.screenshot(path=paths[0], full_page=True)
        page.click("button[data-tab=compare]")
        page.click("#compare-button")
        page.wait_for_selector("#side-b rect.cell", timeout=60_000)
        page.screenshot(path=paths[1], full_page=True)
        page.click("button[data-tab=search]")
        page.click("#explain-button")
        page.wait_for_selector("#candidates tr", timeout=60_000)
        for _ in range(3):
            page.click("#step-forward")
        page.screenshot(path=paths[2], full_page=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.browser", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", default=["runs/demo", "runs/multi30k-en-de"], help="runs to serve")
    parser.add_argument("--output", default="docs/serving", help="screenshot path prefix")
    args = parser.parse_args(argv)
    for path in screenshots(args.runs, args.output):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

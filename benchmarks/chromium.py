"""Headless Chromium driven by Playwright: Debian's package (or ATTNMT_CHROMIUM), no browser download.

What the browser tests, the docs' screenshots (`tools.browser`) and the web page's benchmark
(`benchmarks.web`) launch.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

# A closed network refuses Chromium's background connections, and root needs --no-sandbox.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium() -> str | None:
    """The Chromium to drive: $ATTNMT_CHROMIUM, else chromium on the PATH; None if there is none."""
    return os.environ.get("ATTNMT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def open_browser():
    """Headless Chromium (Debian's, or ATTNMT_CHROMIUM) driven by Playwright."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    if executable is None:
        raise SystemExit("no Chromium: apt-get install chromium, or set ATTNMT_CHROMIUM")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()

"""How a translation is shown in a browser, shared by both pages that show one.

`static/views.js` draws a result (the translation, its attention heatmap, the alignment and the
beam replay) and `static/style.css` styles it, for `attnmt serve`'s explorer (served under
`/shared/`) and for the page `attnmt export --format web` writes (copied beside its own files).
Plain JavaScript and CSS: no build step, nothing from a CDN.
"""

from __future__ import annotations

from importlib import resources

STATIC = resources.files("attnmt.views") / "static"
FILES = ("views.js", "style.css")

"""A trained run as a static web page that translates in the browser (`attnmt export --format web`).

`export` writes the folder: the page, its ONNX graphs, tokenizers and vocabularies, and
onnxruntime-web's files (`runtime`); `tokenizers` describes a run's tokenizers for the page's
JavaScript twin of them. No server runs: any static file host serves the folder.
"""

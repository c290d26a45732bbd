"""Serving in a test: the catalog `attnmt serve ARGV` would load, and a FastAPI test client of the
app it would run (server exceptions answered as a client sees them, not raised)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from rich.console import Console

from attnmt.cli import build_parser
from attnmt.cli.serve import models
from attnmt.serve.app import create_app
from attnmt.serve.catalog import Catalog


def serving(*argv: str) -> tuple[Catalog, TestClient]:
    """The catalog `attnmt serve ARGV` loads, and a test client of the app it would run."""
    args = build_parser().parse_args(["serve", *argv])
    catalog = Catalog.load(models(args, Console()), args.glossary)
    return catalog, TestClient(create_app(catalog), raise_server_exceptions=False)

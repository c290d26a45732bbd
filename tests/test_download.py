"""attnmt.data.download: where a corpus file is found, and verified, atomic downloads.

No test reaches the outside network: every download URL points at 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import io
import threading
import zipfile
from pathlib import Path

import pytest

from attnmt.config import DataConfig
from attnmt.data import corpora, download
from attnmt.utils import UserError
from tests.data_helpers import TATOEBA_NAME, put

pytestmark = pytest.mark.usefixtures("isolated")


# --- finding local copies ----------------------------------------------------------------

TINY_TATOEBA = "".join(f"Sentence {i}.\tPhrase {i}.\n" for i in range(8)) + "Sentence 0.\tAutre phrase 0.\n"


def test_data_dir_then_environment_then_cache(tmp_path, monkeypatch, isolated):
    mine = tmp_path / "mine"
    plain = put(mine / "tatoeba-eng-fra" / "fra.txt", TINY_TATOEBA)  # uncompressed is accepted
    assert download.locate(TATOEBA_NAME, mine) == plain
    splits = corpora.load_corpus(DataConfig(valid_size=1, test_size=1, data_dir=str(mine)))
    assert splits.raw_pairs == 9
    monkeypatch.setenv("ATTNMT_DATA", str(mine))
    assert download.locate(TATOEBA_NAME) == plain
    monkeypatch.delenv("ATTNMT_DATA")
    cached = put(isolated / TATOEBA_NAME, TINY_TATOEBA)
    assert download.locate(TATOEBA_NAME) == cached


# --- downloading -------------------------------------------------------------------------


class FakeServer(http.server.ThreadingHTTPServer):
    """Serves `routes[path] = (body, announced length)`; records every request path."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.routes: dict[str, tuple[bytes, int]] = {}
        self.requests: list[str] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class FakeHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append(self.path)
        if self.path not in self.server.routes:
            self.send_error(404)
            return
        body, announced = self.server.routes[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(announced))
        self.end_headers()
        self.wfile.write(body)  # HTTP/1.0: the connection closes after this, short or not

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    fake = FakeServer()
    thread = threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


def tiny_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("fra-eng/fra.txt", TINY_TATOEBA)
        bundle.writestr("fra-eng/_about.txt", "about")
    return buffer.getvalue()


def serve(server, monkeypatch, name: str, body: bytes, *, checksum: str | None = None, announced: int | None = None):
    """Point the remote file `name` at `server`, expecting `checksum` (default: the body's)."""
    remote = download.REMOTE_FILES[name]
    path = "/" + name.replace("/", "-")
    server.routes[path] = (body, len(body) if announced is None else announced)
    checksum = checksum or hashlib.new(remote.algorithm, body).hexdigest()
    replacement = dataclasses.replace(remote, url=server.url(path), checksum=checksum)
    monkeypatch.setitem(download.REMOTE_FILES, name, replacement)
    return server.url(path)


def files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def test_zip_download_lands_in_the_cache_once(server, monkeypatch, isolated):
    serve(server, monkeypatch, TATOEBA_NAME, tiny_zip())
    cfg = DataConfig(valid_size=1, test_size=1)
    first = corpora.load_corpus(cfg)
    assert files_under(isolated) == [isolated / TATOEBA_NAME]
    assert gzip.decompress((isolated / TATOEBA_NAME).read_bytes()).decode() == TINY_TATOEBA
    second = corpora.load_corpus(cfg)
    assert len(server.requests) == 1 and first == second and first.raw_pairs == 9


def test_gz_download_is_stored_as_is(server, monkeypatch, isolated):
    body = gzip.compress(b"A dog runs.\n")
    serve(server, monkeypatch, "multi30k/val.en.gz", body)
    assert download.locate("multi30k/val.en.gz").read_bytes() == body
    assert download.locate("multi30k/val.en.gz") == isolated / "multi30k" / "val.en.gz"
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", [TATOEBA_NAME, "multi30k/val.en.gz"])
def test_checksum_mismatch_leaves_nothing(server, monkeypatch, isolated, name):
    url = serve(server, monkeypatch, name, tiny_zip(), checksum="0" * 40)
    actual = hashlib.new(download.REMOTE_FILES[name].algorithm, tiny_zip()).hexdigest()
    with pytest.raises(UserError) as caught:
        download.locate(name)
    message = str(caught.value)
    assert url in message and "0" * 40 in message and actual in message and "\n" not in message
    assert files_under(isolated) == []


def test_interrupted_transfer_leaves_nothing(server, monkeypatch, isolated):
    body = gzip.compress(b"A dog runs.\n" * 100)
    url = serve(server, monkeypatch, "multi30k/val.en.gz", body, announced=len(body) + 5000)
    with pytest.raises(UserError, match="interrupted") as caught:
        download.locate("multi30k/val.en.gz")
    assert url in str(caught.value)
    assert files_under(isolated) == []


def test_offline_without_local_copy_says_where_to_put_it(isolated):
    url = download.REMOTE_FILES[TATOEBA_NAME].url
    with pytest.raises(UserError) as caught:
        corpora.load_corpus(DataConfig())
    message = str(caught.value)
    assert url in message and "--data-dir" in message and "ATTNMT_DATA" in message
    assert str(isolated / TATOEBA_NAME) in message and "\n" not in message
    assert files_under(isolated) == []


# --- the cache itself --------------------------------------------------------------------


def test_unwritable_cache_is_a_user_error(tmp_path, monkeypatch):
    blocker = put(tmp_path / "not-a-folder", "x")
    monkeypatch.setenv("ATTNMT_CACHE", str(blocker))
    with pytest.raises(UserError, match="ATTNMT_CACHE"):
        download.locate(TATOEBA_NAME)

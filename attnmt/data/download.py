"""Built-in corpus files: where they come from, where a local copy is found, verified download.

A built-in corpus file is looked up in `data_dir` (config or `--data-dir`), then
`$ATTNMT_DATA`, then the cache (`$ATTNMT_CACHE`, else `~/.cache/attnmt`), and only then
downloaded into the cache. All three folders share one layout (`tatoeba-eng-fra/fra.txt.gz`,
`multi30k/train.en.gz`, ...), so a cache can be copied and used as a data folder.

A download is checked against a published checksum before it gets its final name, so the
cache never holds a partial or corrupt file. Leaf module: imports only `utils`, and no torch.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import shutil
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from attnmt.utils import UserError, WriteFailed, atomic_path, cache_root


@dataclass(frozen=True)
class RemoteFile:
    """Where a corpus file is downloaded from and how to recognise the right bytes.

    When `archive_member` is set, the download is a zip: its checksum is checked, then the
    member is stored gzipped under the local name and the zip is deleted.
    """

    url: str
    algorithm: str
    checksum: str
    archive_member: str | None = None


_MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}.gz"
_MULTI30K_SHA256 = {
    "test_2016_flickr.cs": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2016_flickr.de": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2017_flickr.de": "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee",
    "test_2017_flickr.en": "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074",
    "test_2017_flickr.fr": "3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496",
    "train.cs": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "train.de": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.cs": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "val.de": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}
# The dataset's own lowercased, punctuation-normalized, Moses-tokenized validation and test references
# (data/task1/tok, uncompressed there): what the papers' tokenized BLEU is scored against.
_MULTI30K_TOK_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/tok/{name}"
_MULTI30K_TOK_SHA256 = {
    "test_2016_flickr.lc.norm.tok.de": "c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4",
    "test_2016_flickr.lc.norm.tok.en": "5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2",
    "test_2016_flickr.lc.norm.tok.fr": "1463bd5960f9bfe098ec3cd752d3df0c49c84dc646fb518964a29232658cd836",
    "test_2017_flickr.lc.norm.tok.de": "02067e4a9402786a4fcb8c1b6f4307e4a5073ced64800abead5273b54f5f31f6",
    "test_2017_flickr.lc.norm.tok.en": "c9d1dfd7a26add989382e534af235af9f0f658b2a30e7eb0efdaf142496ee54f",
    "test_2017_flickr.lc.norm.tok.fr": "c0583117a47b31e8a6c6a97cfe8de153e462074668f4e994764fcc80b21d33b4",
    "val.lc.norm.tok.de": "97232bd273eceb7207f689527386a97e4be2616b18ada47576bdaf96c8ae1f00",
    "val.lc.norm.tok.en": "46573ce391ae227f1c72f873392436a20ef18e0a6d518098cfbd70b77c8572ec",
    "val.lc.norm.tok.fr": "b303e301aa21fe7822a846b2b3fb2d5a1121ec807cd5b1d006fb7b2b5507168a",
}
# Local name -> source. Tests (or a user with a mirror) replace entries here.
REMOTE_FILES: dict[str, RemoteFile] = {
    # d2l.ai's copy of the 2019-04-07 manythings.org release, with the sha1 d2l publishes.
    "tatoeba-eng-fra/fra.txt.gz": RemoteFile(
        url="http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip",
        algorithm="sha1",
        checksum="94646ad1522d915e7b0f9296181140edcf86a4f5",
        archive_member="fra-eng/fra.txt",
    ),
    **{
        f"multi30k/{name}.gz": RemoteFile(_MULTI30K_URL.format(name=name), "sha256", digest)
        for name, digest in _MULTI30K_SHA256.items()
    },
    **{
        f"multi30k/tok/{name}": RemoteFile(_MULTI30K_TOK_URL.format(name=name), "sha256", digest)
        for name, digest in _MULTI30K_TOK_SHA256.items()
    },
}


def locate(name: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Path of the built-in corpus file `name` (e.g. "multi30k/train.en.gz"), downloaded if need be.

    Looks in `data_dir`, `$ATTNMT_DATA` and the cache, in that order; a file may be there gzipped
    or not, whichever way its name has it (`tatoeba-eng-fra/fra.txt` for `fra.txt.gz`).
    """
    roots = [Path(root) for root in (data_dir, os.environ.get("ATTNMT_DATA"), cache_root()) if root]
    candidates = [name, name.removesuffix(".gz")] if name.endswith(".gz") else [name, f"{name}.gz"]
    for root in roots:
        for candidate in candidates:
            if (root / candidate).is_file():
                return root / candidate
    return download(name, searched=roots)


def download(name: str, searched: list[Path] | tuple[Path, ...] = ()) -> Path:
    """Download the built-in file `name` into the cache, verified, and return its path.

    The bytes go to a temporary file beside the final one and are renamed into place only
    after the checksum matched, so an interrupted or corrupt download leaves nothing behind.
    """
    remote = REMOTE_FILES[name]
    destination = cache_root() / name
    where = ", ".join(str(root) for root in searched) or "nowhere"
    unzip = f" (the file is {remote.archive_member} in that zip)" if remote.archive_member else ""
    hint = (
        f"no local copy of {name} was found (looked in {where}); download it yourself{unzip} and put it "
        f"at {destination} (gzipped or not), or point --data-dir or ATTNMT_DATA at a folder holding {name}"
    )
    print(f"attnmt: downloading {remote.url} -> {destination}", file=sys.stderr)
    try:
        with atomic_path(destination) as partial:
            if remote.archive_member is None:
                fetch_verified(remote, partial, hint)
            else:
                _fetch_archive_member(remote, partial, hint)
    except WriteFailed as error:  # the cache itself: not writable, disk full
        raise UserError(f"{error.failure}; set ATTNMT_CACHE to a writable folder") from None
    except OSError as exc:
        raise UserError(f"cannot write {destination} ({exc}); set ATTNMT_CACHE to a writable folder") from None
    return destination


def _fetch_archive_member(remote: RemoteFile, destination: Path, hint: str) -> None:
    """Download the zip beside `destination`, verify it, and gzip its member into `destination`."""
    assert remote.archive_member is not None  # only a file with a member is a zip
    fd, archive_name = tempfile.mkstemp(prefix=".download.", suffix=".zip.tmp", dir=destination.parent)
    os.close(fd)
    archive = Path(archive_name)
    try:
        fetch_verified(remote, archive, hint)
        with (
            zipfile.ZipFile(archive) as bundle,
            bundle.open(remote.archive_member) as member,
            open(destination, "wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed,
        ):
            shutil.copyfileobj(member, packed)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise UserError(f"{remote.url}: expected a zip holding {remote.archive_member} ({exc})") from None
    finally:
        archive.unlink(missing_ok=True)


def fetch_verified(remote: RemoteFile, path: Path, hint: str) -> None:
    """Stream `remote.url` into `path`, then check its length and checksum (the caller deletes `path`)."""
    digest = hashlib.new(remote.algorithm)
    received = 0
    try:
        with urllib.request.urlopen(remote.url, timeout=60) as response, open(path, "wb") as out:
            announced = response.headers.get("Content-Length")
            while chunk := response.read(1 << 16):
                digest.update(chunk)
                out.write(chunk)
                received += len(chunk)
    except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError is an OSError
        raise UserError(f"could not download {remote.url} ({exc}); {hint}") from None
    # urllib returns a short body without complaint when the server closes early.
    if announced is not None and received != int(announced):
        raise UserError(
            f"download of {remote.url} was interrupted after {received} of {announced} bytes; try again, or: {hint}"
        )
    if digest.hexdigest() != remote.checksum:
        raise UserError(
            f"download of {remote.url} has the wrong checksum: expected {remote.algorithm} "
            f"{remote.checksum}, got {digest.hexdigest()}; nothing was saved; {hint}"
        )

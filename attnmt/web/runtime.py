"""onnxruntime-web's files for an exported page: one pinned npm release, fetched once and cached.

The page runs its ONNX graphs with onnxruntime-web's WebAssembly backend: a small script
(`ort.wasm.min.js`, the global `ort`), the WebAssembly module's loader and the module itself
(about 12 MB). They are not kept in git (too large) nor bundled into the Python package: the
first web export downloads the release's tarball from the npm registry (no `npm` program
needed), checks it against the integrity hash pinned here, and keeps the three files under
the cache (`$ATTNMT_CACHE/onnxruntime-web-VERSION/`); later exports copy them from there. A
folder holding the three files can also be put there by hand where the registry is out of reach.

The module is onnxruntime-web's only build, a threaded one: without cross-origin isolation
(plain static hosts and `python -m http.server` send no COOP/COEP headers) it runs on one
thread, which is how the page always runs it (`env.wasm.numThreads = 1`).
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from attnmt.data.download import RemoteFile, fetch_verified
from attnmt.utils import UserError, WriteFailed, atomic_folder, cache_root

VERSION = "1.23.2"
# npm's `dist.integrity` of onnxruntime-web@VERSION (sha512, here in hex)
SHA512 = (
    "4f4f4952d327f8264b937985c2a887d258107fee12efea181c7b64eae85a6000"
    "0923de5b4dc2a2e5b38e658c0e4577d2fd12d90a30c311719622e3820059448e"
)
FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
DEFAULT_REGISTRY = "https://registry.npmjs.org"


def tarball_url() -> str:
    """Where the release is downloaded from: npm's registry, or the one `npm_config_registry` names."""
    registry = os.environ.get("npm_config_registry") or DEFAULT_REGISTRY  # noqa: SIM112 - npm's own spelling
    return f"{registry.rstrip('/')}/onnxruntime-web/-/onnxruntime-web-{VERSION}.tgz"


def runtime_folder() -> Path:
    """The cached folder of the release's files, downloaded and unpacked on first use."""
    folder = cache_root() / f"onnxruntime-web-{VERSION}"
    if all((folder / name).is_file() for name in FILES):
        return folder
    remote = RemoteFile(tarball_url(), "sha512", SHA512)
    hint = f"or put {', '.join(FILES)} from the npm package onnxruntime-web@{VERSION} (its dist/) into {folder}"
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".onnxruntime-web.", dir=folder.parent) as scratch:
            tarball = Path(scratch) / "package.tgz"
            fetch_verified(remote, tarball, hint)
            with atomic_folder(folder) as staging:
                _unpack(tarball, staging)
    except WriteFailed as error:
        raise UserError(f"{error.failure}; set ATTNMT_CACHE to a writable folder") from None
    except OSError as error:
        raise UserError(f"cannot write {folder} ({error}); set ATTNMT_CACHE to a writable folder") from None
    return folder


def _unpack(tarball: Path, folder: Path) -> None:
    """The release's FILES (package/dist/NAME in the tarball) into `folder`."""
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            for name in FILES:
                member = archive.extractfile(f"package/dist/{name}")
                if member is None:
                    raise KeyError(name)
                with member, open(folder / name, "wb") as out:
                    shutil.copyfileobj(member, out)
    except (tarfile.TarError, KeyError) as error:
        raise UserError(f"{tarball_url()}: not the onnxruntime-web package expected ({error})") from None


def copy_runtime(destination: Path) -> list[Path]:
    """Copy the release's files into `destination` (a folder); the copies' paths."""
    source = runtime_folder()
    destination.mkdir(parents=True, exist_ok=True)
    copies = []
    for name in FILES:
        shutil.copyfile(source / name, destination / name)
        copies.append(destination / name)
    return copies

"""What the peer benchmark's tests share: a tiny task every system learns, and the peers that
the benchmark installed."""

import os
import random
from pathlib import Path

import pytest

from attnmt.utils import cache_root
from benchmarks.peers.harness import Harness
from benchmarks.peers.joeynmt import JoeyNMT
from benchmarks.peers.opennmt import OpenNMT
from benchmarks.peers.opennmt_recipes import OpenNMTAdamRecipe, OpenNMTRecipe
from benchmarks.peers.system import PeerSystem, Setup

PEER_CLASSES = {
    "opennmt-py": OpenNMT,
    "joeynmt": JoeyNMT,
    "opennmt-py-recipe": OpenNMTRecipe,
    "opennmt-py-adam-recipe": OpenNMTAdamRecipe,
}
LETTERS = "abcdefghijkl"
KEPT = "abcdef"  # the task: the source's letters from a-f, reversed and upper-cased
TINY = {"train": 96, "valid": 8, "test2016": 10}  # 96 training pairs: 6 batches of 16 per epoch


def write_tiny_task(folder: Path) -> Path:
    """Distinct random source lines of 4-10 letters; targets of varying length, so batches have padding."""
    rng, seen = random.Random(1), set()
    folder.mkdir()
    for split, count in TINY.items():
        sources = []
        while len(sources) < count:
            line = " ".join(rng.choice(LETTERS) for _ in range(rng.randint(4, 10)))
            if line not in seen and set(line) & set(KEPT):  # no empty target: JoeyNMT would drop the pair
                seen.add(line)
                sources.append(line)
        targets = [" ".join(letter.upper() for letter in reversed(line.split()) if letter in KEPT) for line in sources]
        (folder / f"{split}.en").write_text("".join(line + "\n" for line in sources), encoding="utf-8")
        (folder / f"{split}.de").write_text("".join(line + "\n" for line in targets), encoding="utf-8")
    return folder


def installed_peer(name: str, setup: Setup) -> tuple[Harness, PeerSystem]:
    """The peer from the environment the benchmark installed it into, or a skip (a failure under CI)."""
    system = PEER_CLASSES[name]()
    work = cache_root() / "peers"
    if not (work / "envs" / system.environment()).is_dir():  # the harness's layout
        reason = f"{system.name} {system.version} is not installed in {work / 'envs'} (.ci/run shows how)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must test the {system.name} probe: {reason}")
        pytest.skip(reason)
    harness = Harness(setup, [system], work, say=lambda _: None)
    harness.install()  # instant: the install is complete, or finished here
    assert not harness.errors, harness.errors
    return harness, system

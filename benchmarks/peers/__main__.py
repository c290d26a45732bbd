"""attnmt, OpenNMT-py and JoeyNMT on the same data, shapes, batches and threads, side by side.

    python -m benchmarks.peers speed   [--systems attnmt,attnmt-bahdanau,opennmt-py,joeynmt] [--repeats 5]
                                       [--steps 60] [--warmup 10] [--decode-updates 1000]
    python -m benchmarks.peers quality [--systems ...] [--minutes 50] [--save-every 250] [--seeds 1,2]
    python -m benchmarks.peers quality --systems attnmt-recipe,opennmt-py-adam-recipe   # each its own recipe
    common: [--work DIR] [--data-dir DIR] [--threads 2] [--json OUT]
    python -m benchmarks.peers stopping [--systems attnmt,opennmt-py] [--updates 4600] [--seeds 1,2]
                                       # output length and BLEU per search, on models of equal updates
    python -m benchmarks.peers same-weights [--updates 4600] [--seeds 1] [--repeats 3]
                                       # one attnmt model decoded by both it and OpenNMT-py
    python -m benchmarks.peers markdown RESULTS.json   # the tables README and docs quote

Each peer is installed once, pinned, into its own virtual environment under the work folder
(default: the attnmt cache's `peers/`); that needs the network the first time. A system that
cannot be installed or run is reported in one line and left out; the others are still
measured and the exit code is 2.

A quality race is either of the Setup's systems (one model size, optimizer and batch size for
all; by default into docs/results/peers-quality-identical.json) or of the systems that train
their own recipe (`*-recipe`, into docs/results/peers-quality-recipes.json), never both: the
two answer different questions.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from rich.console import Console

from attnmt.utils import UserError, cache_root
from benchmarks.measure import describe_machine, positive_int, write_results
from benchmarks.peers.data import prepare_data
from benchmarks.peers.harness import Harness
from benchmarks.peers.quality import QualityOptions, quality
from benchmarks.peers.report import (
    print_quality,
    print_speed,
    quality_curves,
    quality_rows,
    same_weights_rows,
    save_figure,
    speed_rows,
    stopping_rows,
)
from benchmarks.peers.same_weights import SameWeightsOptions, same_weights
from benchmarks.peers.speed import SpeedOptions, speed
from benchmarks.peers.stopping import StoppingOptions, stopping
from benchmarks.peers.system import PeerError, PeerSystem, Setup
from benchmarks.report import markdown_table

# name -> (module, class): imported when chosen, so a broken adapter only affects itself.
SYSTEMS = {
    "attnmt": ("benchmarks.peers.attnmt_peer", "Attnmt"),
    "attnmt-bahdanau": ("benchmarks.peers.attnmt_peer", "Attnmt"),
    "attnmt-tanh": ("benchmarks.peers.attnmt_peer", "Attnmt"),
    "attnmt-feed-before-dropout": ("benchmarks.peers.attnmt_peer", "Attnmt"),
    "opennmt-py": ("benchmarks.peers.opennmt", "OpenNMT"),
    "joeynmt": ("benchmarks.peers.joeynmt", "JoeyNMT"),
    "attnmt-recipe": ("benchmarks.peers.attnmt_peer", "Attnmt"),
    "opennmt-py-recipe": ("benchmarks.peers.opennmt_recipes", "OpenNMTRecipe"),
    "opennmt-py-adam-recipe": ("benchmarks.peers.opennmt_recipes", "OpenNMTAdamRecipe"),
}
RECIPES = [name for name in SYSTEMS if name.endswith("-recipe")]
# Kept only to reproduce earlier races: what the `attnmt` system was when they ran.
EARLIER_ATTNMT = ["attnmt-tanh", "attnmt-feed-before-dropout"]
# Raced by default: the Setup's systems, but for the earlier ones.
DEFAULT_SYSTEMS = [name for name in SYSTEMS if name not in RECIPES and name not in EARLIER_ATTNMT]
DEFAULT_JSON = {
    "speed": Path("benchmarks/results/peers-speed.json"),
    "quality": Path("docs/results/peers-quality-identical.json"),
    "quality-recipes": Path("docs/results/peers-quality-recipes.json"),
    "stopping": Path("benchmarks/results/peers-stopping.json"),
    "same-weights": Path("benchmarks/results/peers-same-weights.json"),
}


def system_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SYSTEMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown system {', '.join(unknown) or '(none)'}; valid names: {', '.join(SYSTEMS)}"
        )
    return names


def seed_list(text: str) -> tuple[int, ...]:
    seeds = tuple(positive_int(part.strip()) for part in text.split(",") if part.strip())
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct seeds separated by commas, got {text!r}")
    return seeds


def finished_runs(path: Path, results: dict, options: QualityOptions, systems: Sequence[PeerSystem] = ()) -> dict:
    """The systems' runs already in the results file `path`, when it holds a race with the same
    setup and budget, and with the same architecture for each of `systems` that it holds; an
    absent file is an empty race. Each of `systems` whose schedule the race fitted to its minutes
    takes that fit first (`PeerSystem.fit_schedule`), so that the race goes on as it began.
    Raises UserError for another race."""
    if not path.exists():
        return {}
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
        same = {
            "mode": earlier["mode"] == "quality",
            "setup": earlier["setup"] == results["setup"],
            "minutes": earlier["options"]["minutes"] == options.minutes,
            "save_every": earlier["options"]["save_every"] == options.save_every,
            "runs": all("runs" in system for system in earlier["systems"].values()),
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UserError(f"{path}: not a results file of this benchmark ({error}); pass another --json") from None
    differs = [what for what, equal in same.items() if not equal]
    for system in systems:
        entry = earlier["systems"].get(system.name)
        if entry is None:
            continue
        if system.schedule_updates is not None and "schedule" in entry:
            updates = entry["schedule"].get("updates") if isinstance(entry["schedule"], dict) else None
            if not isinstance(updates, int) or updates < 1:
                raise UserError(f"{path}: systems.{system.name}.schedule.updates: expected a positive count of updates")
            system.fit_schedule(updates)
        if entry.get("architecture_notes") != system.architecture_notes:
            differs.append(f"architecture of {system.name}")
    if differs:
        raise UserError(
            f"{path}: holds a race with another {', '.join(differs)}; pass --json NEW.json to start another race"
        )
    return earlier["systems"]


def default_results(mode: str, systems: list[str]) -> Path:
    """Where a run's results go without --json: a race of own recipes has a file of its own."""
    return DEFAULT_JSON["quality-recipes" if mode == "quality" and systems[0] in RECIPES else mode]


def build_system(name: str, data_dir: str | None) -> PeerSystem:
    module, cls = SYSTEMS[name]
    system_class = getattr(importlib.import_module(module), cls)
    return system_class(data_dir, name) if name.startswith("attnmt") else system_class()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    speed_parser = modes.add_parser("speed", help="training and decoding speed, alternating systems")
    speed_parser.add_argument("--repeats", type=positive_int, default=SpeedOptions.repeats)
    speed_parser.add_argument("--warmup", type=positive_int, default=SpeedOptions.warmup, help="untimed first updates")
    speed_parser.add_argument("--steps", type=positive_int, default=SpeedOptions.steps, help="timed updates per repeat")
    speed_parser.add_argument(
        "--decode-updates",
        type=positive_int,
        default=SpeedOptions.decode_updates,
        help="updates of the decoding models",
    )
    quality_parser = modes.add_parser("quality", help="test BLEU after the same wall-clock budget")
    quality_parser.add_argument("--minutes", type=float, default=QualityOptions.minutes)
    quality_parser.add_argument("--save-every", type=positive_int, default=QualityOptions.save_every)
    quality_parser.add_argument(
        "--seeds", type=seed_list, default=QualityOptions.seeds, help="comma-separated, one run per system each"
    )
    stopping_parser = modes.add_parser("stopping", help="output length and BLEU per search, at equal updates")
    stopping_parser.add_argument("--updates", type=positive_int, default=StoppingOptions.updates)
    stopping_parser.add_argument("--save-every", type=positive_int, default=StoppingOptions.save_every)
    stopping_parser.add_argument("--seeds", type=seed_list, default=StoppingOptions.seeds, help="comma-separated")
    same_parser = modes.add_parser("same-weights", help="one attnmt model decoded by attnmt and by OpenNMT-py")
    same_parser.add_argument("--updates", type=positive_int, default=SameWeightsOptions.updates)
    same_parser.add_argument("--seeds", type=seed_list, default=SameWeightsOptions.seeds, help="comma-separated")
    same_parser.add_argument("--repeats", type=positive_int, default=SameWeightsOptions.repeats)
    markdown_parser = modes.add_parser("markdown", help="print a results file's tables as Markdown")
    markdown_parser.add_argument("results", type=Path)
    for sub, systems in (
        (speed_parser, DEFAULT_SYSTEMS),
        (quality_parser, DEFAULT_SYSTEMS),
        (stopping_parser, ["attnmt", "opennmt-py"]),
        (same_parser, None),
    ):
        if systems is not None:
            sub.add_argument("--systems", type=system_names, default=systems, help=f"of {', '.join(SYSTEMS)}")
        else:
            sub.set_defaults(systems=["attnmt", "opennmt-py"])
        sub.add_argument("--work", type=Path, default=None, help="work folder (default: the cache's peers/)")
        sub.add_argument("--data-dir", default=None, help="Multi30k folder (default: $ATTNMT_DATA, then the cache)")
        sub.add_argument("--threads", type=positive_int, default=Setup.threads, help="threads of every system")
        sub.add_argument("--json", type=Path, default=None, help="results file")
    args = parser.parse_args(argv)
    if args.mode == "quality" and 0 < len(set(args.systems) & set(RECIPES)) < len(args.systems):
        parser.error(
            f"a quality race is of the Setup's systems or of the own-recipe systems ({', '.join(RECIPES)}), "
            "not both: race them separately"
        )
    return args


def print_markdown(path: Path) -> int:
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
        rows_of = {"speed": speed_rows, "quality": quality_rows, "stopping": stopping_rows}
        rows_of["same-weights"] = same_weights_rows
        header, rows = rows_of[results["mode"]](results)
    except (OSError, ValueError, KeyError) as error:
        print(f"benchmarks.peers: error: {path}: not a results file of this benchmark ({error})", file=sys.stderr)
        return 2
    print("\n".join(markdown_table(header, rows)))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mode == "markdown":
        return print_markdown(args.results)
    console = Console(stderr=True)
    work = (args.work or cache_root() / "peers").resolve()
    try:
        data = prepare_data(work / "data", data_dir=args.data_dir)
    except UserError as error:
        print(f"benchmarks.peers: error: {error}", file=sys.stderr)
        return 2
    setup = Setup(data_dir=data, threads=args.threads)
    systems = [build_system(name, args.data_dir) for name in args.systems]
    harness = Harness(setup, systems, work, say=console.log)
    harness.install()
    results = {
        "mode": args.mode,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {**describe_machine(torch.device("cpu")), "threads": setup.threads},
        "setup": {**setup.describe(), "data_dir": "multi30k en-de, lowercased word tokens (benchmarks/peers/data.py)"},
    }
    path = args.json or default_results(args.mode, args.systems)

    def save_partial(partial: dict) -> None:  # after every run, as the race does
        write_results(path, {**results, **partial, "errors": harness.errors}, "benchmarks.peers", argv)

    if args.mode == "speed":
        results.update(speed(harness, SpeedOptions(args.repeats, args.warmup, args.steps, args.decode_updates)))
    elif args.mode == "stopping":
        results.update(stopping(harness, StoppingOptions(args.updates, args.save_every, args.seeds), save_partial))
    elif args.mode == "same-weights":
        try:
            options = SameWeightsOptions(args.updates, args.seeds, args.repeats)
            results.update(same_weights(harness, options, save_partial))
        except PeerError as error:
            harness.errors["same-weights"] = str(error)
    else:
        options = QualityOptions(args.minutes, args.save_every, args.seeds)
        try:
            finished = finished_runs(path, results, options, harness.systems)
        except UserError as error:
            print(f"benchmarks.peers: error: {error}", file=sys.stderr)
            return 2

        def save(race: dict) -> None:  # after every run: a race outlives the session that ran it
            write_results(path, {**results, **race, "errors": harness.errors}, "benchmarks.peers", argv)

        results.update(quality(harness, options, finished, on_run=save))
    results["errors"] = errors = harness.errors
    write_results(path, results, "benchmarks.peers", argv)
    if args.mode == "quality" and results["systems"]:
        console.log(f"curves drawn in {save_figure(quality_curves(results), path.with_suffix('.png'))}")
    if args.mode in ("stopping", "same-weights"):
        print("\n".join(markdown_table(*(stopping_rows if args.mode == "stopping" else same_weights_rows)(results))))
    else:
        (print_speed if args.mode == "speed" else print_quality)(results, Console(width=200))
    console.log(f"results written to {path}")
    for line in errors.values():
        print(f"benchmarks.peers: error: {line}", file=sys.stderr)
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

"""`attnmt data stats` over several configs, kept as one raw result with how it was made.

    python -m tools.data_stats CONFIG [CONFIG ...] [--json docs/results/data-stats.json]

The figures are `attnmt.data.stats.describe`'s, the ones `attnmt data stats CONFIG --json` writes for
one config (pairs, lengths, vocabulary coverage, and the padding share of the training batches,
length-bucketed against random batches of the same sizes); this adds the command, the machine and
the attnmt and torch versions that a figure quoted in the docs needs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnmt.config import load_config
from attnmt.data.batching import build_data
from attnmt.data.stats import describe
from attnmt.utils import UserError
from benchmarks.measure import describe_machine, write_results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.data_stats", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, default=Path("docs/results/data-stats.json"))
    args = parser.parse_args(argv)
    configs = {}
    try:
        for path in args.configs:
            config = load_config(path)
            configs[path.as_posix()] = describe(build_data(config.data), config.data, seed=config.train.seed)
    except UserError as error:  # a missing or mistyped config, data that cannot be found
        print(f"tools.data_stats: error: {error}", file=sys.stderr)
        return 2
    write_results(args.json, {"machine": describe_machine("cpu"), "configs": configs}, "tools.data_stats", argv)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

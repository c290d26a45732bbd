"""The `attnmt` command: the only reader of argv.

One module per command, each adding its parser (`add_parser`) and the function that runs it,
which the parser hands back as `args.run`: dispatch is the parser's. What a command decides is
about argv only; every other rule lives in the library. Heavy modules (torch, uvicorn, optuna)
are imported inside the run functions, so that building the parser, `--help` and `validate` stay
fast.

Every user mistake surfaces as a `UserError`; `main` prints it as `attnmt: error: ...` on
stderr, its field named as the flag that sets it (`common.FLAGS`), and returns exit code 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from rich.console import Console

from attnmt.cli import (
    average,
    configs,
    data,
    demo,
    distill,
    evaluate,
    export,
    plot,
    score,
    serve,
    shortlist,
    sweep,
    train,
    translate,
    validate,
)
from attnmt.cli.common import FLAGS
from attnmt.utils import Interrupted, UserError

COMMANDS = (
    demo,
    configs,
    validate,
    train,
    data,
    translate,
    score,
    distill,
    shortlist,
    evaluate,
    average,
    plot,
    export,
    sweep,
    serve,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt", description="Attention-based RNN sequence-to-sequence translation.")
    parser.add_argument("--version", action=_Version, help="print the version (with the commit of a checkout) and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def version() -> str:
    """attnmt's version, with the commit it runs from in a git checkout (and whether files differ)."""
    from attnmt import __version__
    from attnmt.provenance import code_state

    state = code_state()
    if state["commit"] is None:
        return f"attnmt {__version__}"
    return f"attnmt {__version__} (commit {state['commit'][:12]}{', modified' if state['dirty'] else ''})"


class _Version(argparse.Action):
    """--version, asked of git only when given: building the parser stays fast."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version())
        parser.exit()


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """parse_args, except that `translate RUN --beam 2 SENTENCE` works: argparse gives an optional
    positional list (nargs="*") its empty match before the first option, leaving the rest over."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras and args.command == "translate" and not any(extra.startswith("-") for extra in extras):
        args.sentences = [*args.sentences, *extras]
    elif extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    args.command_line = shlex.join(["attnmt", *(sys.argv[1:] if argv is None else argv)])  # recorded in results
    return args


def error_lines(error: UserError) -> list[str]:
    """The error as the command line says it: its field as the flag that sets it."""
    return error.rendered(FLAGS.get(error.field or "", error.field)).splitlines() or ["(no message)"]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        args.run(args, Console())
        return 0
    except UserError as error:
        for line in error_lines(error):
            print(f"attnmt: error: {line}", file=sys.stderr)
        return 2
    except Interrupted as interruption:
        print(f"attnmt: {interruption}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("attnmt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

"""The machine a figure ran on, named in prose from its raw result, so no page calls two machines one name.

A figure's machine follows it as a name and a comment naming the raw result:

    50 minutes on Intel Xeon<!-- machine: docs/results/peers-quality-identical-3.json -->

`tools.quote` checks every such name against the file's `machine.cpu` (its processor's family, as
`machine_name` shortens it; a file of runs on several machines names each, joined by "and"), and
`tests/test_results.py` refuses "the project machine" on any page that is not a history page.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MACHINE = re.compile(r"<!-- machine: (\S+) -->")
FAMILIES = ("Intel Xeon", "AMD EPYC", "Apple M", "Ampere", "Graviton")


def _family(cpu: str) -> str:
    plain = re.sub(r"\((R|TM)\)", "", cpu)
    plain = " ".join(plain.split())
    return next((family for family in FAMILIES if plain.startswith(family)), plain)


def machine_name(results: dict) -> str:
    """The processor family (or families) a raw result ran on: "Intel Xeon", "AMD EPYC"."""
    cpu = (results.get("machine") or {}).get("cpu")
    if not cpu:
        raise ValueError("records no machine.cpu")
    names = [_family(name) for name in (cpu if isinstance(cpu, list) else [cpu])]
    return " and ".join(dict.fromkeys(names))


def check_machines(line: str, where: str, source: Callable[[str], dict]) -> None:
    """Raise ValueError where a machine comment does not follow its raw result's machine name."""
    for match in MACHINE.finditer(line):
        try:
            name = machine_name(source(match[1]))
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"{where}: {match[1]}: {error}") from None
        if not line[: match.start()].endswith(name):
            raise ValueError(f"{where}: {match[1]} ran on {name}: write that name right before its comment")

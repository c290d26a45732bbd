"""The README's shape: at most 160 lines, and an opening that a newcomer reads first: a `# ` title,
a paragraph saying what attnmt is, and the two set-up commands, `make demo` and `make test`,
in the first section after that introduction. The rest of the README's detail belongs in docs/."""

from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
MOST_LINES = 160
SETUP_COMMANDS = ("make demo", "make test")


def problems(text: str) -> list[str]:
    """What breaks the README's shape in `text`, one line each (none: it holds)."""
    lines = text.splitlines()
    found = [] if len(lines) <= MOST_LINES else [f"{len(lines)} lines, at most {MOST_LINES}"]
    if not lines or not lines[0].startswith("# "):
        return [*found, "the first line is not its `# ` title"]
    paragraphs = [block.strip() for block in "\n".join(lines[1:]).split("\n\n") if block.strip()]
    introduction = paragraphs[0] if paragraphs else ""
    if not introduction[:1].isalpha() or "translation" not in introduction:  # prose, not a heading, image or list
        found.append("the title is not followed by a paragraph saying what attnmt is (its translation)")
    # the first `## ` section is the one after the introduction; the next `## ` heading ends the opening
    sections = [index for index, line in enumerate(lines) if line.startswith("## ")]
    opening = lines[: sections[1]] if len(sections) > 1 else lines
    commands = {line.split("#")[0].strip() for line in opening[sections[0] :]} if sections else set()
    missing = [command for command in SETUP_COMMANDS if command not in commands]
    if missing:
        found.append(f"the set-up commands {missing} are not in the first section after the introduction")
    return found


def test_the_readme_is_short_and_opens_with_its_title_what_attnmt_is_and_the_two_commands():
    assert problems(README.read_text(encoding="utf-8")) == []


GOOD = """# attnmt

Attention-based sequence-to-sequence translation in PyTorch.

![a picture](docs/picture.png)

## Two commands

```bash
make demo   # trains and shows
make test   # runs the tests
```

## Everyday tasks
"""


def test_the_check_fails_on_a_long_readme_a_missing_title_or_introduction_and_commands_moved_down():
    assert problems(GOOD) == []
    assert problems(GOOD + "\n" * MOST_LINES) == [f"{len(GOOD.splitlines()) + MOST_LINES} lines, at most 160"]
    assert problems(GOOD.replace("# attnmt", "attnmt", 1))[0] == "the first line is not its `# ` title"
    without_introduction = GOOD.replace("Attention-based sequence-to-sequence translation in PyTorch.\n\n", "")
    assert problems(without_introduction)[0].startswith("the title is not followed by a paragraph")
    moved_down = GOOD.replace("## Everyday tasks\n", "").replace("## Two commands", "## Two commands\n\n## Later")
    assert problems(moved_down) == [
        "the set-up commands ['make demo', 'make test'] are not in the first section after the introduction"
    ]

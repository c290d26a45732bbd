"""Translating files of any length: lazily read windows, input order kept, worker processes."""

import itertools

import pytest

from attnmt.cli import main
from attnmt.data.textfiles import count_lines, stream_lines
from attnmt.loading import ModelSpec, load
from attnmt.search.options import SearchOptions
from attnmt.stream import translate_windows, windows


def sentences(count: int) -> list[str]:
    """Reverse-task sentences of varied lengths, with an empty line now and then."""
    return ["" if i % 17 == 0 else " ".join(str((i * 7 + j) % 9 + 1) for j in range(i % 11)) for i in range(count)]


def test_windows_read_lazily():
    read = []

    def endless():
        for number in itertools.count():
            read.append(number)
            yield str(number)

    chunks = windows(endless(), 4)
    assert next(chunks) == ["0", "1", "2", "3"]
    assert len(read) == 4


def test_translation_reads_no_further_than_it_needs(reverse_run):
    """A window is read only when the one before is translated: an endless input is fine."""
    translator = load(ModelSpec(reverse_run, device="cpu"))
    read = 0

    def endless():
        nonlocal read
        for number in itertools.count():
            read += 1
            yield " ".join("123456789"[: number % 9 + 1])

    chunks = translate_windows(endless(), SearchOptions(), translator=translator, window=8)
    for _ in range(3):
        assert len(next(chunks)) == 8
    assert read <= 3 * 8 + 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_translates_as_one_batch_would(reverse_run, tmp_path, workers):
    """Whatever the window and the number of processes: the same lines, in input order."""
    lines = sentences(150)
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in lines))
    expected = [t.text for t in load(ModelSpec(reverse_run, device="cpu")).translate(lines, SearchOptions())]
    translator = load(ModelSpec(reverse_run, device="cpu"))
    got = [
        t.text
        for window in translate_windows(
            stream_lines(str(source)),
            SearchOptions(),
            translator=translator,
            spec=ModelSpec(reverse_run, device="cpu"),
            workers=workers,
            window=16,  # many windows, each sorted on its own
        )
        for t in window
    ]
    assert got == expected


def test_cli_input_output_and_workers(reverse_run, tmp_path, capsys):
    lines = sentences(60)
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in lines))
    outputs = []
    for workers in ("1", "2"):
        output = tmp_path / f"out-{workers}.txt"
        argv = ["translate", str(reverse_run), "--beam", "2", "--input", str(source), "--output", str(output)]
        assert main([*argv, "--workers", workers]) == 0
        outputs.append(output.read_text())
    assert outputs[0] == outputs[1]
    assert len(outputs[0].splitlines()) == len(lines)
    assert capsys.readouterr().err == ""  # no progress bar where stderr is not a terminal


def test_invalid_utf8_deep_in_a_file_names_its_line(reverse_run, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(b"1 2 3\n" * 5000 + b"4 \xff 5\n" + b"6 7\n")
    output = tmp_path / "out.txt"
    assert main(["translate", str(reverse_run), "--input", str(source), "--output", str(output), "--beam", "1"]) == 2
    expected = f"attnmt: error: {source}:5001: not valid UTF-8 (byte 2); expected UTF-8 text"
    assert capsys.readouterr().err.strip() == expected
    assert not output.exists()  # nothing half-written


def test_workers_must_be_positive(reverse_run, capsys):
    assert main(["translate", str(reverse_run), "a b", "--workers", "0"]) == 2
    assert capsys.readouterr().err.strip() == "attnmt: error: --workers: expected at least 1 process, got 0"


def test_count_lines_matches_what_is_streamed(tmp_path):
    for content in (b"", b"a", b"a\n", b"a\nb", b"a\n\nb\n", b"\xef\xbb\xbfa\r\nb\r\n"):
        path = tmp_path / "f.txt"
        path.write_bytes(content)
        assert count_lines(str(path)) == len(list(stream_lines(str(path))))

"""The tools (collecting results, quoting them into docs), and the indexes of `tools` and `benchmarks`."""

import ast
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import attnmt.train
from attnmt.config import ModelConfig
from attnmt.utils import UserError
from tools import attention_focus, distillation_runs, init_parts, multi30k_table

ROOT = Path(__file__).resolve().parent.parent
INDEX_ENTRY = "- `"


def indexed(package: Path) -> list[str]:
    """The names a package's docstring indexes, one per line starting "- `NAME`"."""
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    lines = [line for line in docstring.splitlines() if line.startswith(INDEX_ENTRY)]
    return [line[len(INDEX_ENTRY) :].split("`")[0] for line in lines]


def present(package: Path) -> set[str]:
    """A package's modules and sub-packages (folders of Python files), by name."""
    modules = {path.stem for path in package.glob("*.py") if path.stem not in ("__init__", "__main__")}
    return modules | {folder.name for folder in package.iterdir() if folder.is_dir() and any(folder.glob("*.py"))}


@pytest.mark.parametrize("package", ["benchmarks", "tools"])
def test_a_package_index_lists_each_module_present_once(package):
    names, modules = indexed(ROOT / package), present(ROOT / package)
    assert len(names) == len(set(names)), f"{package}/__init__.py indexes {names} with a repeat"
    assert set(names) == modules, (
        f"{package}/__init__.py: not indexed: {sorted(modules - set(names))}; "
        f"indexed but absent: {sorted(set(names) - modules)}"
    )


def test_nothing_in_benchmarks_imports_tools():
    """tools render the benchmarks' results, so the dependency goes one way."""
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(name.split(".")[0] == "tools" for name in names), f"{path.relative_to(ROOT)} imports tools"


def _evaluation(command: str, records: list[dict]) -> dict:
    figures = {"bleu": 30.0, "chrf": 55.0, "tokenized_bleu": 31.0, "bleu_signature": "sig", "bleu_by_length": []}
    search = {"beam_size": 5, "length_penalty": 1.0}
    training = {"step": 900, "valid_score": 30.0, "minutes": 9.0, "run_steps": 1000, "run_minutes": 10.0}
    code = {"commit": "c" * 40, "dirty": False, "dirty_paths": [], "load_average": 0.5}
    return {
        "command": command,
        "machine": {"cpu": "test cpu"},
        "code_at_start": code,
        "code_at_end": code,
        "runs": [{**figures, "search": search, "training": training, **record} for record in records],
    }


def test_multi30k_table_collects_each_system_and_names_no_machine_folder(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    folder = tmp_path / "runs" / "evaluation"
    single = _evaluation(
        f"attnmt evaluate r-s1 r-s1/checkpoints/averaged --src {data}/multi30k/test_2017_flickr.en.gz",
        [{"checkpoint": "r/en-fr-s1/checkpoints/step-0000900"}, {"checkpoint": "r/en-fr-s1/checkpoints/averaged"}],
    )
    members = [f"r/en-fr-s{seed}/checkpoints/averaged" for seed in (1, 2)]
    ensemble = _evaluation("attnmt evaluate --ensemble", [{"checkpoint": members[0], "members": members}])
    for name, evaluation in [
        ("multi30k-en-fr-test2017-single", single),
        ("multi30k-en-fr-test2017-ensemble", ensemble),
    ]:
        (folder / name).mkdir(parents=True)
        (folder / name / "evaluation.json").write_text(json.dumps(evaluation), encoding="utf-8")
    (folder / "an-unrelated-folder").mkdir()
    monkeypatch.setenv("ATTNMT_DATA", str(data))
    out = tmp_path / "table.json"

    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    models = [(e["direction"], e["test_set"], e["model"]) for e in results["entries"]]
    assert models == [  # singles before the ensemble, though "ensemble" sorts first by name
        ("en-fr", "test2017 flickr", "single, seed 1"),
        ("en-fr", "test2017 flickr", "averaged, seed 1"),
        ("en-fr", "test2017 flickr", "ensemble of 2, averaged"),
    ]
    assert all(entry["code_at_start"]["commit"] == "c" * 40 for entry in results["entries"])  # each row's evaluation
    assert str(data) not in out.read_text(encoding="utf-8")
    assert "--src $ATTNMT_DATA/multi30k/test_2017_flickr.en.gz" in results["entries"][0]["command"]
    header, body = multi30k_table.table_rows(results)
    assert len(body) == 3 and all(len(row) == len(header) for row in body)
    assert body[0][1] == "Bahdanau, additive"
    assert body[0][4:] == ["31.00", "30.00", "55.00", "beam 5, lp 1", "step 900 of 1,000 updates, 10 min"]
    assert "| ensemble of 2, averaged |" in capsys.readouterr().out


def test_multi30k_table_names_no_machine_folder_without_attnmt_data_set(tmp_path, monkeypatch):
    """The data folder is also read off the evaluation's own test files (`--src`, `--ref`)."""
    data = tmp_path / "data"
    src, ref = f"{data}/multi30k/test_2017_flickr.en.gz", f"{data}/multi30k/test_2017_flickr.fr.gz"
    evaluation = _evaluation(
        f"attnmt evaluate r-s1 --src {src} --ref {ref}", [{"checkpoint": "r/en-fr-s1/checkpoints/step-0000900"}]
    )
    folder = tmp_path / "runs" / "evaluation" / "multi30k-en-fr-test2017-single"
    folder.mkdir(parents=True)
    (folder / "evaluation.json").write_text(json.dumps({**evaluation, "src": src, "refs": [ref]}), encoding="utf-8")
    monkeypatch.delenv("ATTNMT_DATA", raising=False)
    out = tmp_path / "table.json"

    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(out)]) == 0
    command = json.loads(out.read_text(encoding="utf-8"))["entries"][0]["command"]
    portable = "$ATTNMT_DATA/multi30k/test_2017_flickr"
    assert command == f"attnmt evaluate r-s1 --src {portable}.en.gz --ref {portable}.fr.gz"


@pytest.mark.parametrize(
    ("files", "folders"),
    [
        (["/data/multi30k/val.en.gz", "/data/multi30k/val.de.gz"], ["/data"]),
        (["/multi30k/val.en.gz"], []),  # its folder would be "/" itself: replacing that would mangle every path
        (["multi30k/val.en.gz"], []),  # relative: no machine's folder to hide
        (["/data/other/val.en.gz"], []),  # not a Multi30k file
    ],
)
def test_multi30k_table_reads_the_data_folder_off_absolute_multi30k_files_below_the_root(files, folders):
    assert multi30k_table._data_dir_of({"src": files[0], "refs": files[1:]}) == folders


def test_multi30k_summary_means_the_seeds_and_shows_the_ensemble_of_best_checkpoints():
    def entry(model: str, bleu: float, test_set="test2016 flickr", members=None, minutes=10.2) -> dict:
        training = {"run_minutes": minutes}
        record = {"direction": "en-fr", "decoder": "Bahdanau, additive", "test_set": test_set, "model": model}
        return {**record, "tokenized_bleu": bleu, "training": training, **({"members": members} if members else {})}

    runs = ["r-s1/checkpoints/step-1", "r-s2/checkpoints/step-2"]
    averaged = ["r-s1/checkpoints/averaged", "r-s2/checkpoints/averaged"]
    entries = [
        entry("single, seed 1", 37.0),
        entry("averaged, seed 1", 99.0),
        entry("single, seed 2", 38.0, minutes=11.9),
        entry("ensemble of 2", 39.0, members=runs),
        entry("ensemble of 2, averaged", 98.0, members=averaged),
        entry("single, seed 1", 30.0, test_set="test2017 flickr"),
    ]
    header, body = multi30k_table.summary_rows({"entries": entries})
    assert header[2:6] == ["test2016 single", "test2016 ensemble", "test2017 single", "test2017 ensemble"]
    assert body == [
        ["en-fr", "Bahdanau, additive", "37.50 (37.00-38.00, 2 seeds)", "39.00 (2 runs)", "30.00", "-", "10-12 min"]
    ]


@pytest.mark.parametrize(
    "folder, text, said",
    [
        ("no-such-config-test2016-single", json.dumps(_evaluation("attnmt evaluate r", [])), "no no-such-config.yaml"),
        ("multi30k-en-fr-test2016-single", '{"runs": [', "unreadable"),
        ("multi30k-en-fr-test2016-single", '{"runs": []}', "no command, machine and runs"),
        ("multi30k-en-fr-test2016-single", '{"runs": 3, "command": "c", "machine": {}}', "runs is not a list"),
    ],
)
def test_multi30k_table_names_a_bad_evaluation_folder_in_one_line(tmp_path, capsys, folder, text, said):
    (tmp_path / "evaluation" / folder).mkdir(parents=True)
    (tmp_path / "evaluation" / folder / "evaluation.json").write_text(text, encoding="utf-8")
    assert multi30k_table.main([str(tmp_path), "--json", str(tmp_path / "table.json")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and folder in error and said in error
    assert not (tmp_path / "table.json").exists()


def test_multi30k_table_update_replaces_only_the_rows_of_the_evaluations_found(tmp_path, capsys):
    de_en, en_fr = "configs/multi30k-de-en.yaml", "configs/multi30k-en-fr.yaml"

    def entry(config: str, test_set: str, model: str, bleu: float, **more) -> dict:
        record = _evaluation("attnmt evaluate r", [{"model": model, "tokenized_bleu": bleu, **more}])["runs"][0]
        return {**record, "config": config, "direction": "x-y", "decoder": "d", "test_set": test_set, "machine": {}}

    previous = [
        entry(de_en, "test2016 flickr", "single, seed 1", 40.0),
        entry(de_en, "test2016 flickr", "ensemble of 2", 41.0, members=["a", "b"]),
        entry(en_fr, "test2016 flickr", "single, seed 1", 59.0),
        entry(en_fr, "test2017 flickr", "single, seed 1", 51.0),
    ]
    table = tmp_path / "table.json"
    note = {
        "at": "2026-11-30T10:00:00+00:00",
        "note": "Seed 1 of de-en trained before checkpoints recorded their code.",
    }
    table.write_text(json.dumps({"entries": previous, "annotations": [note]}), encoding="utf-8")
    members = [f"r/en-fr-s{seed}/checkpoints/step-1" for seed in (1, 2)]
    found = {
        "single": _evaluation("attnmt evaluate r", [{"checkpoint": member} for member in members]),
        "ensemble": _evaluation("attnmt evaluate --ensemble", [{"checkpoint": members[0], "members": members}]),
    }
    for kind, evaluation in found.items():
        folder = tmp_path / "runs" / "evaluation" / f"multi30k-en-fr-test2016-{kind}"
        folder.mkdir(parents=True)
        (folder / "evaluation.json").write_text(json.dumps(evaluation), encoding="utf-8")

    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(table), "--update"]) == 0
    updated = json.loads(table.read_text(encoding="utf-8"))
    assert updated["annotations"] == [note]  # the notes on the rows it kept stay with them
    rows = [(e["config"], e["test_set"], e["model"], e["tokenized_bleu"]) for e in updated["entries"]]
    assert rows == [  # de-en kept as it was; en-fr test2016 singles replaced, its ensemble added; test2017 kept
        (de_en, "test2016 flickr", "single, seed 1", 40.0),
        (de_en, "test2016 flickr", "ensemble of 2", 41.0),
        (en_fr, "test2016 flickr", "single, seed 1", 31.0),
        (en_fr, "test2016 flickr", "single, seed 2", 31.0),
        (en_fr, "test2016 flickr", "ensemble of 2", 31.0),
        (en_fr, "test2017 flickr", "single, seed 1", 51.0),
    ]
    capsys.readouterr()
    table.write_text('{"entries": 3}', encoding="utf-8")
    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(table), "--update"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(table) in error and table.read_text(encoding="utf-8") == '{"entries": 3}'
    table.write_text(json.dumps({"entries": previous, "annotations": "not a list"}), encoding="utf-8")
    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(table), "--update"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "annotations: not a list" in error
    table.write_text(json.dumps({"entries": previous, "annotations": ["a note without its time"]}), encoding="utf-8")
    assert multi30k_table.main([str(tmp_path / "runs"), "--json", str(table), "--update"]) == 2
    assert "annotations[0]: not a note with its time" in capsys.readouterr().err


def test_distillation_runs_records_each_run_and_the_distillation_by_folder_names(reverse_run, tmp_path, capsys):
    from attnmt.checkpoint import read_index, read_meta
    from attnmt.runlog import read_metrics

    runs = tmp_path / "study"
    runs.mkdir()
    for name in ("teacher-s2", "teacher-s1", "student-small"):
        (runs / name).symlink_to(reverse_run)
    checkpoint = reverse_run / "checkpoints" / read_index(reverse_run).best
    record = {  # as attnmt distill writes it: the teachers by their absolute paths
        "teacher": [str(checkpoint.resolve())] * 2,
        "search": {"beam_size": 5},
        "lines_done": 2000,
        "complete": True,
        "seconds": 12.5,
    }
    (runs / "distilled").mkdir()
    (runs / "distilled" / "train.distill.json").write_text(json.dumps(record), encoding="utf-8")
    out = tmp_path / "record.json"

    assert distillation_runs.main([str(runs), "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    recorded = {key: value for key, value in results.items() if key != "command"}  # the command names its folders
    assert str(tmp_path) not in json.dumps(recorded) and str(reverse_run.parent) not in json.dumps(recorded)
    assert [(run["run"], run["role"]) for run in results["runs"]] == [
        ("teacher-s1", "teacher"),
        ("teacher-s2", "teacher"),
        ("student-small", "student"),
    ]
    teacher = results["runs"][0]
    last = read_meta(reverse_run / "checkpoints" / read_index(reverse_run).last)
    assert teacher["steps"] == last["step"] and teacher["minutes"] == last["elapsed"] / 60
    assert teacher["best"] == {
        "checkpoint": checkpoint.name,
        "step": read_meta(checkpoint)["step"],
        "valid_bleu": read_index(reverse_run).best_score,
    }
    rates = sorted(r["tokens_per_s"] for r in read_metrics(reverse_run) if "tokens_per_s" in r)
    assert rates[0] <= teacher["tokens_per_s"] <= rates[-1]
    assert results["distillation"]["teachers"] == [f"{reverse_run.name}/{checkpoint.name}"] * 2
    assert results["distillation"]["seconds"] == 12.5 and results["machine"]["cores"] >= 1
    header, body = distillation_runs.run_rows(results)
    assert len(body) == 3 and all(len(row) == len(header) for row in body)

    capsys.readouterr()
    (runs / "distilled" / "train.distill.json").write_text('{"teacher": [', encoding="utf-8")
    assert distillation_runs.main([str(runs), "--json", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "train.distill.json" in error and json.loads(out.read_text()) == results
    assert distillation_runs.main([str(tmp_path / "empty"), "--json", str(out)]) == 2
    assert "expected teacher-s* and student-* run folders" in capsys.readouterr().err


def test_multi30k_table_without_evaluations_is_one_line_and_exit_2(tmp_path, capsys):
    assert multi30k_table.main([str(tmp_path), "--json", str(tmp_path / "table.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "table.json").exists()


def test_attention_focus_measures_the_weight_on_the_first_source_position():
    rows = [torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[0.5, 0.25, 0.25]]), torch.empty(0, 0)]

    class Stub:
        def translate(self, sentences):
            return [SimpleNamespace(attention=attention) for attention in rows]

    focus = attention_focus.first_position_focus(Stub(), ["a", "b", "c"])
    assert focus == {
        "steps": 3,
        "mean_weight_first": round(1.5 / 3, 4),
        "share_argmax_first": round(2 / 3, 4),
        "uniform_weight": round((0.5 + 0.5 + 1 / 3) / 3, 4),
    }


def test_attention_focus_on_a_folder_that_is_no_run_is_one_line_and_exit_2(tmp_path, capsys):
    assert attention_focus.main([str(tmp_path / "no-run")]) == 2
    assert capsys.readouterr().err.startswith("tools.attention_focus: error: ")


def test_attention_focus_without_any_translation_is_a_clear_error():
    class Stub:
        def translate(self, sentences):
            return [SimpleNamespace(attention=torch.empty(0, 0))]

    with pytest.raises(UserError, match="no sentence"):
        attention_focus.first_position_focus(Stub(), [""])


def test_init_parts_draws_only_the_named_parameters_again_and_restores_the_builder():
    """The variant's scheme for the whole model, the prefix's own draw on top, and the trainer's
    builder back as it was afterwards, even when training fails."""
    original = attnmt.train.build_model
    config = ModelConfig(embedding_size=4, encoder_hidden=3, decoder_hidden=6, decoder="luong", attention="general")
    glorot_output = math.sqrt(6 / (5000 + 6))  # the (V, H) output matrix's Glorot bound, V = 5,000
    with init_parts.initialized_as("xavier", {"decoder.output.weight": "uniform"}) as started:
        model = attnmt.train.build_model(config, 20, 5000)
    output = model.decoder.output.weight.abs().max().item()
    assert started == {"output_shape": [5000, 6], "output_range": output}
    assert 2 * glorot_output < output <= 0.1  # U(-0.1, 0.1), not Glorot
    assert model.decoder.output.bias.eq(0).all()  # the rest is Glorot's: zero biases
    assert model.decoder.combine.weight.abs().max() <= math.sqrt(6 / (12 + 6))
    assert attnmt.train.build_model is original
    with init_parts.initialized_as("uniform", {"decoder.output.weight": "fan_in"}):
        model = attnmt.train.build_model(config, 20, 5000)
    assert 0.9 / math.sqrt(6) < model.decoder.output.weight.abs().max() <= 1 / math.sqrt(6)
    assert model.decoder.output.bias.abs().max() <= 0.1 and model.decoder.output.bias.abs().max() > 0
    with pytest.raises(RuntimeError), init_parts.initialized_as("xavier", {}):
        raise RuntimeError("training failed")
    assert attnmt.train.build_model is original


def test_init_parts_and_attention_focus_tables():
    variant = {"variant": "glorot", "last_train_loss": 6.2, "valid_loss": 5.9, "valid_bleu": 0.3}
    variant |= {"mean_weight_first": 0.97, "uniform_weight": 0.07}
    header, [row] = init_parts.parts_rows({"variants": [variant]})
    assert len(header) == len(row) and row[0] == "`glorot`" and row[3] == "0.30"
    run = {"decoder": "luong", "attention": "general", "init": "uniform", "seed": 2, "best_valid_bleu": None}
    run |= {"mean_weight_first": 0.07, "share_argmax_first": 0.07, "uniform_weight": 0.075}
    header, [row] = attention_focus.focus_rows({"runs": [run]})
    assert len(header) == len(row) and row[3:5] == ["2", "-"]


def test_init_parts_names_an_unknown_variant_in_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        init_parts.main(["configs/demo.yaml", "--variants", "glorot,orthogonal"])
    assert exited.value.code == 2 and "unknown variant" in capsys.readouterr().err


def test_init_parts_leaves_the_machines_run_folder_out_of_the_recorded_command():
    argv = ["configs/demo.yaml", "--work", "/scratch/runs", "--steps", "5", "--work=/elsewhere"]
    assert init_parts.recorded_arguments(argv) == ["configs/demo.yaml", "--steps", "5"]


def test_data_stats_keeps_each_configs_figures_with_how_they_were_made(tmp_path):
    from attnmt.config import load_config
    from attnmt.data.batching import build_data
    from attnmt.data.stats import describe
    from tools import data_stats

    config = tmp_path / "reverse.yaml"
    config.write_text("data:\n  corpus: reverse\n  synthetic_size: 200\n  batch_tokens: 300\n", encoding="utf-8")
    out = tmp_path / "stats.json"
    assert data_stats.main([str(config), "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["command"] == f"python -m tools.data_stats {config} --json {out}"
    assert results["machine"]["cpu"] and results["torch"] == torch.__version__
    loaded = load_config(config)
    expected = json.loads(json.dumps(describe(build_data(loaded.data), loaded.data, seed=loaded.train.seed)))
    assert results["configs"] == {config.as_posix(): expected}
    batching = expected["batching"]
    assert 0.0 <= batching["padding_bucketed"] < batching["padding_random"] < 1.0


def test_data_stats_names_a_missing_config_in_one_line(tmp_path, capsys):
    from tools import data_stats

    out = tmp_path / "stats.json"
    assert data_stats.main([str(tmp_path / "missing.yaml"), "--json", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tools.data_stats: error:") and "missing.yaml" in error and error.count("\n") == 1
    assert not out.exists()


def test_the_multi30k_table_shows_the_papers_bleu_where_every_evaluation_scored_it():
    from tools.multi30k_table import table_rows

    entry = {"direction": "en-de", "decoder": "d", "test_set": "test2016 flickr", "model": "single, seed 1"}
    entry |= {"tokenized_bleu": 39.8, "bleu": 38.9, "chrf": 60.1, "search": {"beam_size": 5, "length_penalty": 1.0}}
    entry |= {"training": {"step": 7000, "run_steps": 7000, "run_minutes": 33.0}}
    header, rows = table_rows({"entries": [entry]})
    assert "BLEU moses-tok-lc" not in header and header[4] == "BLEU word-tok-lc"  # an older table: word tokens only
    header, rows = table_rows({"entries": [{**entry, "moses_bleu": 39.7}]})
    assert header[4:6] == ["BLEU moses-tok-lc", "BLEU word-tok-lc"] and rows[0][4:6] == ["39.70", "39.80"]

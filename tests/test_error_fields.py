"""One error dialect: every setting a `UserError` names (its `field`, raised anywhere in attnmt/)
has a face on the command line and, where a request can reach it, in the API.

On the command line a field is shown as the flag that sets it (`cli.common.FLAGS`) or, for a
config key, as the key; in the API as the request field that set it (`serve.catalog.API_FIELDS`):
the search and translation a request runs raise only fields that map to one, or the run's own
decode settings, which no request sets. The server's own refusals name request fields."""

import ast
from pathlib import Path

from attnmt.cli.common import FLAGS
from attnmt.config import Config
from attnmt.serve.catalog import API_FIELDS, ONE_SENTENCE
from attnmt.serve.schemas import ExplainRequest, HeadsRequest, Limits, ScoreRequest, TranslateRequest

ROOT = Path(__file__).resolve().parent.parent
# what a request's search and translation run, and the heads /v1/heads recomputes
REQUEST_REACHES = ("attnmt/search/", "attnmt/translate.py", "attnmt/attention_heads.py")
API_ONLY = {"max_length"}  # library fields only a request can set: no command-line face
# the server's own: the model asked for, its queue, its time, and the heads a model asked for lacks (/v1/heads)
SERVER_FIELDS = {"model", "server", "timeout_s", "heads"}
ANSWERING = tuple(f"attnmt/serve/{name}.py" for name in ("app", "routes", "schemas", "state"))  # requests' refusals


def raised_fields(where: tuple[str, ...] = ("attnmt/",)) -> dict[str, set[str]]:
    """Every literal `field="..."` of a call in the modules under `where`, with the files raising it."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "attnmt").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if not name.startswith(where):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for keyword in node.keywords if isinstance(node, ast.Call) else []:
                if keyword.arg == "field" and isinstance(keyword.value, ast.Constant):
                    found.setdefault(keyword.value.value, set()).add(name)
    return found


def is_config_key(field: str) -> bool:
    """`section.key` of the config (`decode.max_length_a`), as a config file names it."""
    section, _, key = field.partition(".")
    model = Config.model_fields.get(section)
    return bool(key) and model is not None and key in model.annotation.model_fields


def request_fields() -> set[str]:
    return {
        name for model in (TranslateRequest, ScoreRequest, ExplainRequest, HeadsRequest) for name in model.model_fields
    }


def test_the_scan_finds_the_fields_of_the_library_and_of_the_server():
    fields = raised_fields()
    assert {"decode.beam_size", "prefix", "required_phrases", "decode.min_length"} <= set(fields)
    assert "attnmt/search/options.py" in fields["decode.stopping"] and "model" in fields


def test_every_library_field_has_a_command_line_face():
    library = {
        field: files
        for field, files in raised_fields().items()
        if not all(f.startswith("attnmt/serve/") for f in files)
    }
    faceless = {
        field: sorted(files)
        for field, files in library.items()
        if field not in FLAGS and not is_config_key(field) and field not in API_ONLY
    }
    assert not faceless, f"fields the CLI would print raw (add them to cli.common.FLAGS): {faceless}"


def test_every_field_a_request_can_reach_has_an_api_name():
    reached = raised_fields(REQUEST_REACHES)
    nameless = sorted(field for field in reached if field not in API_FIELDS and not field.startswith("decode."))
    assert not nameless, f"fields a request can meet with no request field (add them to API_FIELDS): {nameless}"
    names = set(API_FIELDS.values()) | set(ONE_SENTENCE.values())
    unknown = sorted(names - request_fields() - SERVER_FIELDS)
    assert not unknown, f"API names that are no request's field nor the server's own: {unknown}"


def test_the_servers_own_refusals_name_request_fields_or_its_own():
    served = raised_fields(ANSWERING)
    unknown = sorted(set(served) - request_fields() - SERVER_FIELDS - set(vars(Limits())))
    assert not unknown, f"server refusals naming no request field: {unknown}"

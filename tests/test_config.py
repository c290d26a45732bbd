"""Config: defaults in one place, every problem reported at once, overrides checked too."""

from pathlib import Path

import pytest

from attnmt.config import Config, load_config, save_config
from attnmt.config_files import ConfigError

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_validates(path):
    assert isinstance(load_config(path), Config)


def test_shipped_configs_include_the_corpora():
    names = {path.name for path in CONFIGS}
    assert {"multi30k-en-de.yaml", "tatoeba-eng-fra.yaml", "demo.yaml"} <= names


def test_all_errors_are_reported_at_once_with_file_and_dotted_path(tmp_path):
    path = write(
        tmp_path,
        "data:\n  corpuss: x\n  batch_tokens: -1\nmodel:\n  atention: dot\n  rnn: rnn\ntrain:\n  lr: abc\nextra: 1\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 6
    assert all(line.startswith(f"{path}: ") for line in lines)
    text = str(caught.value)
    for dotted in ("data.corpuss", "data.batch_tokens", "model.atention", "model.rnn", "train.lr", "extra"):
        assert f": {dotted}: " in text
    assert "did you mean 'corpus'" in text and "did you mean 'attention'" in text
    # valid keys are listed for the section the unknown key was found in
    assert "valid keys: alignment_layer, attention, attention_bias, attention_dropout, attention_size" in text


def test_overrides_are_parsed_as_yaml_and_validated(tmp_path):
    path = write(tmp_path, "model:\n  attention: dot\n")
    config = load_config(path, ["train.lr=0.0005", "model.bidirectional=false", "data.corpus=reverse"])
    assert config.train.lr == 0.0005 and config.model.bidirectional is False and config.data.corpus == "reverse"
    assert config.model.attention == "dot"
    with pytest.raises(ConfigError, match=r"model\.hidden: unknown key"):
        load_config(path, ["model.hidden=3"])
    with pytest.raises(ConfigError, match=r"expected section\.key=value"):
        load_config(path, ["model.rnn"])


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "data:\n  corpus: [unclosed\nmodel: {}\n")
    with pytest.raises(ConfigError, match=r"line \d+"):
        load_config(path)


def test_missing_and_non_mapping_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(write(tmp_path, "- a list\n"))


def test_training_needs_a_stopping_limit(tmp_path):
    path = write(tmp_path, "train:\n  max_epochs: null\n")
    with pytest.raises(ConfigError, match="max_steps, max_epochs, max_minutes"):
        load_config(path)


def test_early_stopping_on_bleu_needs_validation_bleu(tmp_path):
    path = write(tmp_path, "train:\n  valid_bleu_sentences: 0\n")
    with pytest.raises(ConfigError, match="valid_bleu_sentences is 0"):
        load_config(path)
    config = load_config(path, ["train.early_stopping_metric=loss"])
    assert config.train.valid_bleu_sentences == 0


def test_a_copy_bridge_needs_the_decoder_as_wide_as_the_encoders_states(tmp_path):
    path = write(tmp_path, "model:\n  bridge: copy\n  encoder_hidden: 256\n  decoder_hidden: 256\n")
    with pytest.raises(ConfigError, match=r"model: bridge copy .* decoder_hidden must be 512 .* got 256"):
        load_config(path)
    assert load_config(path, ["model.decoder_hidden=512"]).model.bridge == "copy"
    assert load_config(path, ["model.bidirectional=false"]).model.decoder_hidden == 256


def test_resolved_config_round_trips(tmp_path):
    config = load_config(None, ["model.attention=general", "decode.beam_size=3"])
    save_config(config, tmp_path / "run" / "config.yaml")
    assert load_config(tmp_path / "run" / "config.yaml") == config

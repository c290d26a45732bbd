"""OpenNMT-py's own recipes for Multi30k, raced against attnmt's own: `opennmt-py-recipe`, the
model and optimizer of its documentation's Multi30k example (the pre-2.0 example: its defaults,
SGD), and `opennmt-py-adam-recipe`, its current documentation's default model with Adam and a
step decay fitted to the race's 50 minutes. Both are installed, driven and scored as the
`opennmt-py` peer is (`opennmt`); only their model and optimizer options differ, written out
here so that a later release changing a default cannot change a recipe.
"""

from __future__ import annotations

from pathlib import Path

from attnmt.config import ModelConfig
from benchmarks.peers.opennmt import OpenNMT, data_options
from benchmarks.peers.system import Setup

# What the recipes share: the model of OpenNMT-py's documentation, with shared decoder
# embeddings, and its default batches and loss.
RECIPE_MODEL_NOTES = (
    "encoder_type rnn, a unidirectional 2-layer LSTM of 500, word_vec_size 500; "
    "InputFeedRNNDecoder, a 2-layer LSTM of 500 starting from the encoder's final states, "
    "global_attention general, input feeding; share_decoder_embeddings (the generator reads the "
    "target embeddings, as the two have the same size: the one change to the documented model); "
    "dropout 0.3"
)
RECIPE_BATCH_NOTES = (
    "no label smoothing; batches of 64 sentences, loss normalized per sentence. Same word tokens "
    "and vocabulary threshold as every system; decoding as for opennmt-py."
)


class OpenNMTRecipe(OpenNMT):
    """OpenNMT-py's own recipe for Multi30k: the model and optimizer of its documentation's
    Multi30k example, which trains with OpenNMT-py's defaults (`onmt_train -data
    data/multi30k.atok.low -save_model multi30k_model`), with the decoder's input and output
    embeddings shared, as its `share_decoder_embeddings` option allows when they have the RNN's
    size. The defaults are written out (RECIPE), so that a later release changing one cannot
    change the recipe; `tests/test_peers.py` checks them against the installed release's."""

    name = "opennmt-py-recipe"
    own_recipe = True
    architecture_notes = (
        "OpenNMT-py 3.5.1 with the recipe of its documentation's Multi30k example (OpenNMT-py's "
        f"defaults): {RECIPE_MODEL_NOTES}; param_init 0.1; SGD, learning rate 1.0 (halved every "
        "10,000 updates from update 50,000, which a 50-minute race does not reach), max_grad_norm "
        f"5; {RECIPE_BATCH_NOTES}"
    )

    def environment(self) -> str:
        return OpenNMT().environment()  # the same installed package

    def arithmetic_shapes(self, setup: Setup) -> ModelConfig:
        # OpenNMT's general score transforms the query (per target token) where attnmt's formula
        # transforms the keys (per source token): the same products, counted on the other side.
        return ModelConfig(
            rnn="lstm",
            embedding_size=RECIPE["word_vec_size"],
            encoder_hidden=RECIPE["hidden_size"],
            encoder_layers=RECIPE["enc_layers"],
            bidirectional=False,
            decoder_hidden=RECIPE["hidden_size"],
            decoder_layers=RECIPE["dec_layers"],
            attention="general",
            decoder="luong",
            input_feeding=True,
            bridge="copy",
            tie_embeddings=True,
        )

    def train_options(self, setup: Setup, work: Path) -> dict:
        return {**data_options(setup, work), **RECIPE}


# OpenNMT-py 3.5.1's defaults for the options that make its documented Multi30k recipe, plus
# shared decoder embeddings. Not taken from the Setup: a recipe has its own sizes and optimizer.
RECIPE = {
    "encoder_type": "rnn",
    "decoder_type": "rnn",
    "rnn_type": "LSTM",
    "enc_layers": 2,
    "dec_layers": 2,
    "hidden_size": 500,
    "word_vec_size": 500,
    "global_attention": "general",
    "input_feed": 1,
    "bridge": False,
    "share_decoder_embeddings": True,
    "dropout": [0.3],
    "param_init": 0.1,
    "param_init_glorot": False,
    "optim": "sgd",
    "learning_rate": 1.0,
    "learning_rate_decay": 0.5,
    "start_decay_steps": 50000,
    "decay_steps": 10000,
    "decay_method": "none",
    "max_grad_norm": 5.0,
    "label_smoothing": 0.0,
    "normalization": "sents",
    "accum_count": [1],
    "batch_type": "sents",
    "batch_size": 64,
}


class OpenNMTAdamRecipe(OpenNMTRecipe):
    """OpenNMT-py's recipe with the optimizer and schedule a 50-minute race calls for. The model
    is its current documentation's: the quickstart (docs/source/quickstart.md, 3.x) trains "the
    default model, which consists of a 2-layer LSTM with 500 hidden units on both the encoder and
    decoder", with the defaults written out in RECIPE. Its documentation recommends no optimizer
    for RNNs: the quickstart keeps the default SGD at 1.0 with a decay from update 50,000, far
    past what 50 minutes reach, and the `learning_rate` option's help lists a rate per optimizer
    ("adam = 0.001"), for any model. So this recipe trains with Adam at attnmt's recipe's peak
    rate, and fits OpenNMT-py's own step decay to the race (`adam_recipe`): halved from half the
    updates a 50-minute run makes (`schedule_updates`, which the race measures on its machine),
    then every tenth of them, so that it is at half the peak at mid-run and near attnmt's floor
    at the end, as attnmt's cosine is. OpenNMT-py 3.5.1 has no warmup for a step decay (only its
    noam and rsqrt schedules warm up), so this recipe starts at the peak where attnmt's warms up
    over 200 updates."""

    name = "opennmt-py-adam-recipe"

    def __init__(self) -> None:
        self.fit_schedule(ADAM_RECIPE_UPDATES)

    def fit_schedule(self, updates: int) -> None:
        super().fit_schedule(updates)
        schedule = adam_recipe(updates)
        self.architecture_notes = (
            "OpenNMT-py 3.5.1 with its documentation's default model and the optimizer a 50-minute race "
            f"calls for: {RECIPE_MODEL_NOTES}; param_init 0.1; Adam (0.9, 0.999), learning rate 2e-3 "
            "(attnmt's recipe's peak; OpenNMT-py's documentation recommends no optimizer for RNNs), "
            f"halved at update {schedule['start_decay_steps']:,} and every {schedule['decay_steps']:,} "
            f"updates after (learning_rate_decay 0.5: fitted to the {updates:,} updates of a 50-minute "
            f"run; no warmup), max_grad_norm 5; {RECIPE_BATCH_NOTES}"
        )

    def train_options(self, setup: Setup, work: Path) -> dict:
        assert self.schedule_updates is not None  # set from the start, by __init__
        return {**super().train_options(setup, work), **adam_recipe(self.schedule_updates)}


# The updates the Adam recipe's decay is laid out over until a race fits it to its machine:
# OpenNMT-py's recipe made 3,088 in 50 minutes in the race of own recipes (SGD; Adam's two moment
# buffers add little to an update of this model), on a slower machine than the race's since.
ADAM_RECIPE_UPDATES = 3000


def adam_recipe(updates: int) -> dict:
    """The Adam recipe's optimizer and schedule for a run of `updates` updates: the peak until
    half of them, then halved every tenth of them, so that the last halving falls inside the run."""
    return {
        "optim": "adam",
        "adam_beta1": 0.9,
        "adam_beta2": 0.999,
        "learning_rate": 2e-3,
        "learning_rate_decay": 0.5,
        "start_decay_steps": updates // 2,
        "decay_steps": updates // 10,
        "decay_method": "none",
    }

#!/usr/bin/env bash
# The Multi30k results table: train every direction's runs (three seeds each), average each
# run's last checkpoints, and evaluate single models, averages and ensembles of three on
# test2016 and test2017 (tokenized lowercased BLEU, sacreBLEU with its signature, chrF).
#
#   scripts/multi30k-table.sh [RUNS_DIR]            # default runs/table; rerun to resume
#
# Settings from the environment (defaults in brackets):
#   DEVICE [auto]      cpu, cuda, ...; PARALLEL [1] runs trained at once (one CPU thread each
#                      when more than one); SEEDS [1 2 3]; CONFIGS [multi30k-en-de-luong
#                      multi30k-de-en-luong multi30k-en-fr-luong]; SINGLE_CONFIGS [multi30k-en-de] trained
#                      with seed 1 only; KEEP [5] checkpoints kept and averaged; SET: extra --set
#                      overrides for every run (e.g. "train.max_steps=20" for a smoke test);
#                      PHASES [train average evaluate]; BOOTSTRAP [1000] paired-bootstrap samples;
#                      PACE_PROBE [1] times the machine (python -m attnmt.pace, with $PYTHON [python])
#                      before each run trains, so its evaluations report the pace beside its minutes.
# Every phase skips what is done: a finished run is not trained again, an interrupted one
# resumes from its last checkpoint, an existing evaluation is kept. An evaluation is named by
# config, test set and kind, not by its seeds: to score more seeds of a config already
# evaluated, move its RUNS/evaluation/CONFIG-* folders aside first.
set -euo pipefail

RUNS=${1:-runs/table}
DEVICE=${DEVICE:-auto}
PARALLEL=${PARALLEL:-1}
SEEDS=${SEEDS:-1 2 3}
CONFIGS=${CONFIGS:-multi30k-en-de-luong multi30k-de-en-luong multi30k-en-fr-luong}
SINGLE_CONFIGS=${SINGLE_CONFIGS-multi30k-en-de}
KEEP=${KEEP:-5}
SET=${SET:-}
PHASES=${PHASES:-train average evaluate}
BOOTSTRAP=${BOOTSTRAP:-1000}
DATA=${ATTNMT_DATA:-$HOME/.cache/attnmt}
ATTNMT=${ATTNMT:-python -m attnmt}
PYTHON=${PYTHON:-python}
PACE_PROBE=${PACE_PROBE:-1}
mkdir -p "$RUNS"

runs_of() {  # config -> its run directories
    local config=$1 seeds=$SEEDS
    [[ " $SINGLE_CONFIGS " == *" $config "* ]] && seeds=1
    for seed in $seeds; do echo "$RUNS/$config-s$seed"; done
}

train_one() {  # config seed
    local config=$1 seed=$2 run="$RUNS/$1-s$2" threads=()
    [[ $PARALLEL -gt 1 ]] && threads=(--set train.threads=1)
    local overrides=(--set "train.seed=$seed" --set "train.run_dir=$run" --set "train.device=$DEVICE"
                     --set "train.keep_checkpoints=$KEEP" "${threads[@]}")
    for item in $SET; do overrides+=(--set "$item"); done
    if [[ -f $run/checkpoints/index.json ]]; then
        $ATTNMT train --resume "$run" >> "$run.log" 2>&1
    else
        # the machine's pace in the run's threads, before it trains: its evaluations report it
        mkdir -p "$run"
        if [[ $PACE_PROBE == 1 ]]; then
            $PYTHON -m attnmt.pace --threads "$([[ $PARALLEL -gt 1 ]] && echo 1 || nproc)" --json "$run/pace.json"
        fi
        $ATTNMT train "configs/$config.yaml" "${overrides[@]}" > "$run.log" 2>&1
    fi
    echo "trained $run: $(tail -n 1 "$run.log")"
}

if [[ " $PHASES " == *" train "* ]]; then
    for config in $CONFIGS $SINGLE_CONFIGS; do  # tokenizers once per direction, before runs share the cache
        $ATTNMT data stats "configs/$config.yaml" > /dev/null
    done
    for config in $CONFIGS $SINGLE_CONFIGS; do
        for run in $(runs_of "$config"); do
            while [[ $(jobs -rp | wc -l) -ge $PARALLEL ]]; do wait -n; done
            train_one "$config" "${run##*-s}" &
        done
    done
    wait
fi

if [[ " $PHASES " == *" average "* ]]; then
    for config in $CONFIGS $SINGLE_CONFIGS; do
        for run in $(runs_of "$config"); do
            [[ -d $run/checkpoints/averaged ]] || $ATTNMT average "$run" --last "$KEEP"
        done
    done
fi

evaluate() {  # name test-set-arguments... -- runs...
    local out="$RUNS/evaluation/$1" test=()
    shift
    while [[ $1 != -- ]]; do test+=("$1"); shift; done
    shift
    [[ -f $out/evaluation.json ]] && return
    $ATTNMT evaluate "$@" "${test[@]}" --device "$DEVICE" --bootstrap "$BOOTSTRAP" --output-dir "$out" > "$out.log" 2>&1
}

evaluate_config() {  # config: singles and averages, and ensembles when there are several seeds
    local config=$1 runs averaged src tgt
    mapfile -t runs < <(runs_of "$config")
    averaged=("${runs[@]/%//checkpoints/averaged}")
    src=$(sed -n 's/^  src_lang: //p' "configs/$config.yaml")
    tgt=$(sed -n 's/^  tgt_lang: //p' "configs/$config.yaml")
    local test2017=(--src "$DATA/multi30k/test_2017_flickr.$src.gz" --ref "$DATA/multi30k/test_2017_flickr.$tgt.gz")
    for test in test2016 test2017; do
        local arguments=()
        [[ $test == test2017 ]] && arguments=("${test2017[@]}")
        evaluate "$config-$test-single" "${arguments[@]}" -- "${runs[@]}" "${averaged[@]}"
        if [[ ${#runs[@]} -gt 1 ]]; then
            evaluate "$config-$test-ensemble" "${arguments[@]}" --ensemble -- "${runs[@]}"
            evaluate "$config-$test-ensemble-averaged" "${arguments[@]}" --ensemble -- "${averaged[@]}"
        fi
    done
    echo "evaluated $config"
}

if [[ " $PHASES " == *" evaluate "* ]]; then
    mkdir -p "$RUNS/evaluation"
    for config in $CONFIGS $SINGLE_CONFIGS; do
        while [[ $(jobs -rp | wc -l) -ge $PARALLEL ]]; do wait -n; done
        evaluate_config "$config" &
    done
    wait
fi

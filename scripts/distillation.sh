#!/usr/bin/env bash
# Less arithmetic for the same translation, on Multi30k en->de: three teachers of
# configs/multi30k-en-de-luong.yaml, their ensemble's beam-5 translations of the training
# sources (sequence-level distillation), two students trained on them (the teacher's size and a
# smaller one), vocabulary shortlists, and the speed/quality table of every configuration with
# OpenNMT-py's best model of the peer benchmark beside them.
#
#   scripts/distillation.sh [RUNS_DIR]              # default runs/distill; rerun to resume
#
# Settings from the environment (defaults in brackets): CONFIG [configs/multi30k-en-de-luong.yaml]
# the teachers' and students' config; PHASES [teachers distill students record shortlists pareto];
# SEEDS [1 2 3] of the teachers; BEAM [5] of the distillation; SMALL
# ["model.embedding_size=128 model.encoder_hidden=128 model.decoder_hidden=256"], the smaller
# student's overrides; SET: extra --set overrides for every training run (e.g.
# "train.max_steps=20" for a smoke test); REPEATS [5] timed passes of the table; PEER_SEEDS [1,2]
# the seeds of OpenNMT-py's model to choose the best from (each missing one trains 50 minutes;
# "none" leaves OpenNMT-py's rows out of the table); JSON
# [benchmarks/results/pareto-cpu.json] and PLOT [docs/results/pareto.png], where the table goes;
# RECORD [docs/results/distillation-runs.json], where the record phase writes the runs' training
# figures and the distillation's (tools.distillation_runs); DEVICE [cpu] where the table decodes:
# on cuda it leaves out the int8 rows and OpenNMT-py's, which decode on the CPU only. TABLE [unset]
# a folder of scripts/multi30k-table.sh: the teachers are then that table's runs of CONFIG
# (TABLE/NAME-sSEED, trained there by the table script where missing, and linked here as
# RUNS/teacher-sSEED), so the table's models and the distillation's teachers are the same runs;
# unset, the teachers train here.
# Every phase skips what is done: a finished run is not trained again, an interrupted one resumes
# from its last checkpoint, an interrupted distillation goes on from its last complete chunk.
# Each student trains within the teachers' budget (the config's step and minute budgets).
set -euo pipefail

RUNS=${1:-runs/distill}
PHASES=${PHASES:-teachers distill students record shortlists pareto}
SEEDS=${SEEDS:-1 2 3}
BEAM=${BEAM:-5}
SMALL=${SMALL:-model.embedding_size=128 model.encoder_hidden=128 model.decoder_hidden=256}
SET=${SET:-}
REPEATS=${REPEATS:-5}
PEER_SEEDS=${PEER_SEEDS:-1,2}
JSON=${JSON:-benchmarks/results/pareto-cpu.json}
PLOT=${PLOT:-docs/results/pareto.png}
RECORD=${RECORD:-docs/results/distillation-runs.json}
DEVICE=${DEVICE:-cpu}
ATTNMT=${ATTNMT:-python -m attnmt}
CONFIG=${CONFIG:-configs/multi30k-en-de-luong.yaml}
mkdir -p "$RUNS"

train() {  # run-dir overrides...: train, or resume a run that has a checkpoint
    local run=$1
    shift
    local overrides=(--set "train.run_dir=$run")
    for item in "$@" $SET; do overrides+=(--set "$item"); done
    if [[ -f $run/checkpoints/index.json ]]; then
        $ATTNMT train --resume "$run" >> "$run.log" 2>&1
    else
        $ATTNMT train "$CONFIG" "${overrides[@]}" > "$run.log" 2>&1
    fi
    echo "trained $run: $(tail -n 1 "$run.log")"
}

teachers=()
for seed in $SEEDS; do teachers+=("$RUNS/teacher-s$seed"); done

best_teacher() {  # the teacher with the best validation BLEU (every choice is made on validation)
    python - "${teachers[@]}" <<'EOF'
import sys
from attnmt.checkpoint import read_index
print(max(sys.argv[1:], key=lambda run: read_index(run).best_score))
EOF
}

if [[ -n ${TABLE:-} ]]; then  # the table's runs of CONFIG are the teachers, linked by the names below
    name=$(basename "$CONFIG" .yaml)
    if [[ $CONFIG != configs/$name.yaml ]]; then
        echo "distillation.sh: TABLE needs a CONFIG of configs/ (the table script trains configs/NAME.yaml); got $CONFIG" >&2
        exit 2
    fi
    for seed in $SEEDS; do
        link=$RUNS/teacher-s$seed
        if [[ -e $link && ! -L $link ]]; then
            echo "distillation.sh: $link is a teacher trained here, not the table's run; move it aside or unset TABLE" >&2
            exit 2
        fi
        ln -sfn "$(realpath -m --relative-to="$RUNS" "$TABLE/$name-s$seed")" "$link"
    done
fi

if [[ " $PHASES " == *" teachers "* ]]; then
    if [[ -n ${TABLE:-} ]]; then
        SEEDS="$SEEDS" CONFIGS=$name SINGLE_CONFIGS= PHASES=train SET="$SET" ATTNMT="$ATTNMT" \
            "$(dirname "$0")/multi30k-table.sh" "$TABLE"
    else
        for seed in $SEEDS; do train "$RUNS/teacher-s$seed" "train.seed=$seed"; done
    fi
fi

distilled=$RUNS/distilled/train
if [[ " $PHASES " == *" distill "* ]]; then
    ensemble=()
    for teacher in "${teachers[@]:1}"; do ensemble+=(--ensemble "$teacher"); done
    $ATTNMT distill "${teachers[0]}" "${ensemble[@]}" --beam "$BEAM" --output "$distilled" > "$RUNS/distill.log" 2>&1
    echo "distilled: $(tail -n 1 "$RUNS/distill.log")"
fi

if [[ " $PHASES " == *" students "* ]]; then
    train "$RUNS/student-same" "data.train=$distilled"
    # shellcheck disable=SC2086  # SMALL is a list of overrides
    train "$RUNS/student-small" "data.train=$distilled" $SMALL
fi

if [[ " $PHASES " == *" record "* ]]; then
    python -m tools.distillation_runs "$RUNS" --json "$RECORD"
fi

if [[ " $PHASES " == *" shortlists "* ]]; then
    for run in "$(best_teacher)" "$RUNS/student-same" "$RUNS/student-small"; do
        [[ -f $run/shortlist.safetensors ]] || $ATTNMT shortlist "$run" > "$run-shortlist.log" 2>&1
    done
fi

if [[ " $PHASES " == *" pareto "* ]]; then
    best=$(best_teacher)
    ensemble=$(IFS=+; echo "${teachers[*]}")
    variants=("" ",shortlist")  # int8 (dynamic quantization) and the peer decode on the CPU only
    peer=()
    if [[ $DEVICE == cpu ]]; then
        variants=("" ",int8" ",shortlist" ",int8,shortlist")
        [[ $PEER_SEEDS == none ]] || peer=(--peer opennmt-py --peer-seeds "$PEER_SEEDS")
    fi
    systems=("ensemble=$ensemble,beam=5" "teacher=$best,beam=5" "teacher-greedy=$best,beam=1")
    for variant in "${variants[@]:1}"; do
        systems+=("teacher${variant//,/-}=$best,beam=5$variant")
    done
    for student in same small; do
        for beam in 1 5; do
            for variant in "${variants[@]}"; do
                systems+=("student-$student-b$beam${variant//,/-}=$RUNS/student-$student,beam=$beam$variant")
            done
        done
    done
    arguments=()
    for system in "${systems[@]}"; do arguments+=(--system "$system"); done
    python -m benchmarks.pareto "${arguments[@]}" "${peer[@]}" --device "$DEVICE" \
        --splits test_2016_flickr,test_2017_flickr --repeats "$REPEATS" --json "$JSON" --plot "$PLOT"
fi

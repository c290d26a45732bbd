#!/usr/bin/env bash
# Screen sweep studies on one GPU in minutes: every trial of every study at once (one worker
# process per trial, one CPU thread each, all on the one GPU), stopped after SECONDS; then each
# trial's best checkpoint scored on the whole valid split with beam 5, each study reported
# (`attnmt sweep report`), and everything a table needs packed into OUT_DIR/screen.tar.gz:
# study databases, reports, the trials' configs, metrics and logs, and the valid scores.
#
#   scripts/screen-on-gpu.sh OUT_DIR SECONDS STUDY.yaml [STUDY.yaml ...]
#   AVERAGE_LAST=5 scripts/screen-on-gpu.sh ...   # also score each trial's last 5 checkpoints averaged
#
# Trials still training at the deadline are stopped by SIGINT (the sweep retires them for a
# resume) and keep their validation curves in metrics.jsonl. PYTHON names the interpreter
# (default python3). With CUDA's MPS daemon on the machine, it is started first, so the workers'
# small kernels run side by side instead of taking turns on the GPU; without it they take turns.
set -u -o pipefail
out=${1:?usage: scripts/screen-on-gpu.sh OUT_DIR SECONDS STUDY.yaml [STUDY.yaml ...]}
seconds=${2:?usage: scripts/screen-on-gpu.sh OUT_DIR SECONDS STUDY.yaml [STUDY.yaml ...]}
shift 2
python=${PYTHON:-python3}
mkdir -p "$out/eval"
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

if command -v nvidia-cuda-mps-control >/dev/null && [ "${MPS:-1}" = 1 ]; then
  mps=$(mktemp -d)  # the daemon's pipes and log, short paths (a socket's path is limited in length)
  export CUDA_MPS_PIPE_DIRECTORY="$mps/pipe" CUDA_MPS_LOG_DIRECTORY="$mps/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout 20 nvidia-cuda-mps-control -d && timeout 90 "$python" -c "import torch; torch.ones(1, device='cuda').sum().item()"; then
    log "MPS daemon started"
  else
    log "MPS did not start; the workers take turns on the GPU"
    echo quit | timeout 10 nvidia-cuda-mps-control
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
fi

# One worker per trial: the trials of a study are its grid's unique configs.
pids=()
for study in "$@"; do
  trials=$("$python" -c "import sys; from attnmt.sweep.spec import load_plan; print(len(load_plan(sys.argv[1]).grid))" "$study") || exit 2
  name=$(basename "$study" .yaml)
  log "$name: $trials trials, $trials workers"
  "$python" -m attnmt sweep "$study" --workers "$trials" --threads 1 >"$out/sweep-$name.log" 2>&1 &
  pids+=($!)
done
deadline=$((SECONDS + seconds))
while [ $SECONDS -lt $deadline ]; do
  running=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=1; done
  [ $running = 0 ] && break
  sleep 5
done
for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null; done
for pid in "${pids[@]}"; do wait "$pid"; done
log "sweeps ended"

# Each trial with a best checkpoint, scored on the whole valid split with beam 5, in parallel;
# with AVERAGE_LAST=N, also the average of its last N checkpoints (a trial that kept N or more).
average=${AVERAGE_LAST:-0}
for study in "$@"; do
  dir=$("$python" -c "import sys; from attnmt.sweep.spec import load_plan; print(load_plan(sys.argv[1]).sweep_dir)" "$study")
  for trial in "$dir"/trials/*/; do
    [ -f "$trial/checkpoints/index.json" ] || continue
    name=$(basename "$dir")--$(basename "$trial")
    {
      timeout 180 "$python" -m attnmt evaluate "$trial" --split valid --beam 5 --output-dir "$out/eval/$name"
      if [ "$average" -gt 1 ] && timeout 120 "$python" -m attnmt average "$trial" --last "$average"; then
        timeout 180 "$python" -m attnmt evaluate "$trial/checkpoints/averaged" --split valid --beam 5 \
          --output-dir "$out/eval/$name--averaged"
      fi
    } >"$out/eval/$name.log" 2>&1 &
  done
done
wait
log "valid scored"
for study in "$@"; do
  timeout 120 "$python" -m attnmt sweep report "$study" >"$out/report-$(basename "$study" .yaml).log" 2>&1
done
dirs=$(for study in "$@"; do "$python" -c "import sys; from attnmt.sweep.spec import load_plan; print(load_plan(sys.argv[1]).sweep_dir)" "$study"; done)
# shellcheck disable=SC2086
tar czf "$out/screen.tar.gz" --exclude='*.safetensors' --exclude='*.pt' --exclude='checkpoints' \
  --exclude='*.vocab.json' --exclude='*.model' $dirs "$out"/eval "$out"/*.log 2>/dev/null
log "packed $(du -h "$out/screen.tar.gz" | cut -f1)"
if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then echo quit | timeout 10 nvidia-cuda-mps-control; fi

#!/usr/bin/env bash
# The A/B accept-length gate against a REAL drafter regression, on one H200, real SGLang (issue 50,
# run 4's "τ gate with a τ drop"; lab tool).
#
#   bash tools/gpu_tau_trials.sh [KIND ...]     KIND = same | drop | small
#
# Each KIND is one `specgate run` of fixtures/deployments/smollm2-h200-ab.toml (SmolLM2-135M, plain
# reference, STANDALONE base drafting with the unperturbed model, STANDALONE candidate; every server
# booted afresh, side by side), with the candidate's drafter switched by writing a copy of the
# deployment per KIND (lab/specgate_lab/tau_trials.py; named smollm2-h200-ab-KIND):
#   same    the candidate drafts with the unperturbed copy too: an A/A run, which must PASS
#   drop    the copy with noise SIGMA_DROP (default 0.02: ~10% fewer tokens per verify step by the CPU
#           measurement), which the accept gate at 5% must FAIL
#   small   the copy with noise SIGMA_SMALL (default 0.004: ~3% fewer), which it should PASS
# (results/2026-12-05-cpu-smollm2-perturbed-drafter sized both with HF transformers on CPU, not SGLang.)
# The deployment leaves greedy equivalence off, so a run whose gates all pass ends PARTIAL (exit 4),
# one the accept gate fails FAIL (exit 1): read the summary line's verdicts, not the exit code.
# Without KINDs: same drop small same drop same drop same drop. Runs go in the order given until the
# call's deadline (DEADLINE_S, default 570 from the start; a run is not started unless ~RUN_S seconds
# are left, 190 by default, 420 for the first boot of a fresh machine). FIRST=N numbers the runs from
# N, so later calls' runs do not overwrite. SEED (default 0) seeds both perturbed copies.
#
# The bundle's parts must be in /tmp/chunks (../shared/gpu/README.md; any folder layout: unpack.sh
# finds them). The model assets (SmolLM2 from the bundle's GGUF, and each perturbed copy the KINDs
# need: `specgate-lab assets smollm2-perturbed`) are written to /tmp/assets once per machine.
# SPECGATE_COMMIT=<clean commit> (the device copy has no .git). JIT_CACHE=FILE restores Triton and
# FlashInfer kernel caches first; SAVE_JIT_CACHE=1 sends them back (jit-cache.tar.gz, under 15 MiB only).
# TELEMETRY=0 leaves out tools/host_telemetry.py (host at 2 Hz, nvidia-smi clocks; on by default).
# DRY=1: nothing is unpacked, made or booted; prints every command it would run, writes and prints
# the deployments (under $OUT/deployments), and checks each with `specgate check` (this machine's
# Python; where SGLang is not importable, by specgate's table of the declared release).
#
# Comes back under $OUT: summary.txt (provenance; one line per run: exit code, seconds, the A/B accept
# gate's and speed gate's verdicts with their ratios and intervals, both sides' accept lengths, read
# from report.json), run.log, results.tar.gz (each run's report folder with benchmark.json's
# per-request samples and server logs, the deployments run, each perturbed copy's perturbation.json,
# provenance.txt, telemetry). Packed after every run: a call killed at its limit keeps what finished.
set -uo pipefail
kinds=("$@")
((${#kinds[@]})) || kinds=(same drop small same drop same drop same drop)
for k in "${kinds[@]}"; do
  [[ $k == same || $k == drop || $k == small ]] || { echo "gpu_tau_trials.sh: bad kind '$k' (same, drop or small)" >&2; exit 2; }
done
sigma_drop=${SIGMA_DROP:-0.02}
sigma_small=${SIGMA_SMALL:-0.004}
seed=${SEED:-0}
dry=${DRY:-0}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
deadline=$((SECONDS + ${DEADLINE_S:-570}))
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
src=fixtures/deployments/smollm2-h200-ab.toml
[[ -f $src ]] || { echo "gpu_tau_trials.sh: no $src: run from the repository root" >&2; exit 2; }
work=/tmp/tau-trials; ((dry)) && work=$OUT
mkdir -p "$work/deployments"
assets=/tmp/assets
gguf=/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf
export PYTHONPATH=$PWD:$PWD/lab${PYTHONPATH:+:$PYTHONPATH}
# The perturbed copies' folders are named by the lab's own rule (specgate_lab.perturb.perturbed_dir_name).
dir_of() { python3 -c 'import sys; from specgate_lab.perturb import perturbed_dir_name as n; print(n(float(sys.argv[1]), int(sys.argv[2])))' "$1" "$seed"; }
drafter_of() {
  case $1 in
    same) echo "$assets/smollm2-135m-instruct" ;;
    drop) echo "$assets/$(dir_of "$sigma_drop")" ;;
    small) echo "$assets/$(dir_of "$sigma_small")" ;;
  esac
}
sigma_of() { case $1 in drop) echo "$sigma_drop" ;; small) echo "$sigma_small" ;; *) echo 0 ;; esac; }
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
# DRY: print instead of running.
act() { if ((dry)); then echo "DRY: $*" | tee -a "$OUT/summary.txt"; else "$@"; fi; }

: > "$OUT/summary.txt"
# shellcheck source=tools/gpu_lib.sh
source "${BASH_SOURCE[0]%/*}/gpu_lib.sh"
((dry)) || gpu_bundle_env gpu_tau_trials.sh

# The perturbed copies this call's kinds need (the unperturbed copy is made with the first of them).
needed=()
for k in drop small; do [[ " ${kinds[*]} " == *" $k "* ]] && needed+=("$(sigma_of "$k")"); done
t0=$SECONDS
if [[ ! -f $assets/smollm2-135m-instruct/config.json ]]; then
  act python3 -m specgate_lab assets smollm2 "$assets" --gguf "$gguf" > "$work/assets.log" 2>&1 || { tail -5 "$work/assets.log"; exit 3; }
fi
for s in "${needed[@]}"; do
  act python3 -m specgate_lab assets smollm2-perturbed "$assets" --noise "$s" --seed "$seed" --gguf "$gguf" >> "$work/assets.log" 2>&1 \
    || { tail -5 "$work/assets.log"; exit 3; }
done
((dry)) && cat "$work/assets.log"
echo "assets ready after $((SECONDS - t0)) s"

# One deployment per kind, the candidate's drafter path replaced (checked: nothing else moves).
for k in same drop small; do
  python3 -m specgate_lab.tau_trials variant "$src" "$work/deployments/$k.toml" "$k" "$(drafter_of "$k")" || exit 3
done
if ((dry)); then
  for k in same drop small; do
    echo "== $work/deployments/$k.toml (differs from $src in:)"
    diff "$src" "$work/deployments/$k.toml"
    python3 -m specgate.cli check "$work/deployments/$k.toml" > "$work/deployments/$k.check" 2>&1
    rc=$?
    say "specgate check deployments/$k.toml: exit $rc$( ((rc)) && echo ": $(tail -3 "$work/deployments/$k.check")")"
    ((rc == 0)) || exit 3
  done
fi

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${SPECGATE_COMMIT:-unknown}"
  echo "command: tools/gpu_tau_trials.sh ${kinds[*]} (SIGMA_DROP=$sigma_drop SIGMA_SMALL=$sigma_small SEED=$seed DEADLINE_S=${DEADLINE_S:-570} FIRST=${FIRST:-1} RUN_S=${RUN_S:-190} JIT_CACHE=${JIT_CACHE:-none} TELEMETRY=${TELEMETRY:-1} DRY=$dry)"
  echo "host: $(hostname) machine-id $(cat /etc/machine-id 2>/dev/null || echo none) boot-id $(cat /proc/sys/kernel/random/boot_id)"
  ((dry)) || nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid,clocks.max.sm --format=csv,noheader
  ((dry)) || python3 -c 'import importlib.metadata as m; print("sglang", m.version("sglang"), "torch", m.version("torch"), "transformers", m.version("transformers"), "flashinfer", m.version("flashinfer-python"))'
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  for k in same drop small; do echo "drafter $k: $(drafter_of "$k")"; done
} > "$work/provenance.txt"
cat "$work/provenance.txt" >> "$OUT/summary.txt"

tel=$work/telemetry.jsonl
tel_pid=""
if [[ ${TELEMETRY:-1} == 1 ]] && ! ((dry)); then
  python3 tools/host_telemetry.py "$tel" --hz 2 --match sglang &
  tel_pid=$!
fi
mark() { [[ -n $tel_pid ]] && echo "$(date +%s.%N) $*" >> "$tel.marks"; }
pack() {
  ((dry)) && return
  [[ -f $tel ]] && gzip -c "$tel" > "$work/telemetry.jsonl.gz"
  for d in "$assets"/smollm2-135m-instruct-noise*/; do
    [[ -f $d/perturbation.json ]] && cp "$d/perturbation.json" "$work/deployments/$(basename "$d").perturbation.json"
  done
  cat "$work"/run-*.out > "$OUT/run.log" 2>/dev/null
  tar -C "$work" -czf "$OUT/results.tar.gz" --exclude='*.log.gz' --exclude='baselines-*' --exclude=telemetry.jsonl --exclude=jit-cache.tar.gz .
}
run=${FIRST:-1}
fresh=1; [[ -f /tmp/.tau-trials-booted || -f /tmp/.jit-restored ]] && fresh=0
for k in "${kinds[@]}"; do
  need=${RUN_S:-190}; ((fresh)) && need=420
  name=$(printf 'run-%02d-%s' "$run" "$k")
  if ! ((dry)) && ((SECONDS + need > deadline)); then
    say "$name: NOT STARTED (needs ~$need s, $((deadline - SECONDS)) s left)"
    run=$((run + 1)); continue
  fi
  t0=$SECONDS
  mark "start $name"
  act python3 -m specgate.cli run "$work/deployments/$k.toml" --report-dir "$work/$name" --baselines-dir "$work/baselines-$name" > "$work/$name.out" 2>&1
  rc=$?
  mark "end $name rc $rc"
  fresh=0; ((dry)) || touch /tmp/.tau-trials-booted
  if ((dry)); then
    cat "$work/$name.out"; rm -f "$work/$name.out"
  else
    say "$name (noise $(sigma_of "$k")): exit $rc in $((SECONDS - t0)) s: $(python3 -m specgate_lab.tau_trials summary "$work/$name/report.json")"
  fi
  pack
  run=$((run + 1))
done
[[ -n $tel_pid ]] && { kill "$tel_pid" 2>/dev/null; wait "$tel_pid" 2>/dev/null; }
pack
((dry)) && exit 0
say "results.tar.gz: $(stat -c %s "$OUT/results.tar.gz") bytes"
gpu_save_jit_cache "$work" "$OUT" | tee -a "$OUT/summary.txt"
exit 0

#!/usr/bin/env bash
# Where the speculative servers' speed noise comes from, on one H200 (issue 50; lab tool).
#
#   bash tools/gpu_noise.sh VARIANT [VARIANT ...]     VARIANT = quiet | spin | pinned
#
# Each VARIANT is one A/A round: `specgate run` of the dummy 8B with a steady simulated accept
# length (fixtures/deployments/llama8b-dummy-h200-steady.toml) plus a TWIN of eagle3-decode
# (`eagle3-decode-twin`, the same flags and environment), every config booted afresh and measured
# interleaved, so each round gives plain, E, E-twin and D (eagle3-decode-drawn) side by side:
#   quiet   the deployment as shipped (--sleep-on-idle on every server)
#   spin    without --sleep-on-idle: idle neighbours poll on host cores, as the first H200 data ran
#   pinned  quiet, plus launch.cpu_affinity = "split" (whole physical cores per server)
#   ab      not an A/A round: one trial of the gate as users run it (experiment 4), by
#           tools/gate_trials.py: fixtures/deployments/llama8b-dummy-h200-ab.toml, the candidate
#           eagle3-decode against an identical base beside it, judged by the A/B speed gate and the
#           deployment's kept calibration alone (an empty baselines folder every trial); odd rounds
#           unchanged, even ones with the candidate slowed by SLOWDOWN (default 0.10, tools/inject)
# Rounds run in the order given until the call's deadline (DEADLINE_S, default 570 from the start;
# a round is not started unless ~ROUND_S seconds are left, 170 by default, 340 for the first boot of a
# fresh machine; an ab round ~AB_ROUND_S, 240 by default, 420 on a fresh machine). FIRST=N numbers the rounds from N, so later calls' rounds do not overwrite.
#
# Beside every round, tools/host_telemetry.py samples the host at 2 Hz (/proc/stat with steal,
# loadavg, CPU MHz, per-thread CPU and current core of every SGLang process, `lscpu -e` once) and
# nvidia-smi the GPU's SM/memory clocks, power and throttle reasons; marks say when each round began
# and ended. Pass SPECGATE_COMMIT=<clean commit> (the device copy has no .git). The bundle's parts
# must be in /tmp/chunks (../shared/gpu/README.md; any folder layout: unpack.sh finds them). SAVE_JIT_CACHE=1 sends the kernel caches back
# (jit-cache.tar.gz, under 15 MiB only); JIT_CACHE=FILE restores them first.
#
# Comes back under $OUT: summary.txt (provenance, a line per round), results.tar.gz (each round's
# report folder with benchmark.json's per-request samples and server logs, provenance.txt, the
# deployments run, telemetry.jsonl.gz and telemetry.gpu.csv).
set -uo pipefail
(($#)) || { echo "usage: tools/gpu_noise.sh quiet|spin|pinned|ab ..." >&2; exit 2; }
for v in "$@"; do [[ $v == quiet || $v == spin || $v == pinned || $v == ab ]] || { echo "gpu_noise.sh: bad variant '$v' (quiet, spin, pinned or ab)" >&2; exit 2; }; done
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
deadline=$((SECONDS + ${DEADLINE_S:-570}))
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
src=fixtures/deployments/llama8b-dummy-h200-steady.toml
work=/tmp/noise; mkdir -p "$work"
# shellcheck source=tools/gpu_lib.sh
source "${BASH_SOURCE[0]%/*}/gpu_lib.sh"
gpu_bundle_env gpu_noise.sh

# The variants, each under its own name (the launch digest leaves --sleep-on-idle out, so only the
# name keeps their stored figures apart), each with the twin config. Not `check`ed here: each
# check imports SGLang (~25 s), and `run` asks SGLang's parser before it boots anything.
twin='
[configs.eagle3-decode-twin]
description = "a twin of eagle3-decode: the same flags and environment, booted and measured beside it"
args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/tmp/assets/llama-3.1-8b-eagle3-dummy",
        "--speculative-draft-load-format", "dummy",
        "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
        "--speculative-attention-mode", "decode"]
env = { SGLANG_SIMULATE_ACC_LEN = "2.0", SGLANG_SIMULATE_ACC_METHOD = "match-expected" }
'
make_variant() {
  local v=$1 out=$work/$1.toml
  python3 - "$src" "$out" "$v" "$twin" <<'PY' || exit 3
import sys
src, out, variant, twin = sys.argv[1:]
text = open(src).read()
text = text.replace('name = "llama8b-dummy-h200-steady"', f'name = "llama8b-dummy-h200-noise-{variant}"', 1)
if variant == "spin":
    assert ', "--sleep-on-idle"]' in text
    text = text.replace(', "--sleep-on-idle"]', "]", 1)
if variant == "pinned":
    text = text.replace("coexist = true", 'coexist = true\ncpu_affinity = "split"', 1)
# The twin goes before [workload], beside the other configs.
text = text.replace("\n[workload]\n", twin + "\n[workload]\n", 1)
open(out, "w").write(text)
PY
}
if [[ ! -d /tmp/assets/llama-3.1-8b-eagle3-dummy ]]; then
  python3 -m specgate_lab assets llama8b-dummy /tmp/assets --gguf /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf > "$work/assets.log" 2>&1 || { tail -5 "$work/assets.log"; exit 3; }
fi
for v in quiet spin pinned; do make_variant "$v"; done

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${SPECGATE_COMMIT:-unknown}"
  echo "command: tools/gpu_noise.sh $* (DEADLINE_S=${DEADLINE_S:-570} FIRST=${FIRST:-1} ROUND_S=${ROUND_S:-170} SLOWDOWN=${SLOWDOWN:-0.10} JIT_CACHE=${JIT_CACHE:-none})"
  echo "host: $(hostname) machine-id $(cat /etc/machine-id 2>/dev/null || echo none) boot-id $(cat /proc/sys/kernel/random/boot_id)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid,clocks.max.sm --format=csv,noheader
  python3 -c 'import importlib.metadata as m; print("sglang", m.version("sglang"), "torch", m.version("torch"), "flashinfer", m.version("flashinfer-python"))'
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
} > "$work/provenance.txt"
cp "$work/provenance.txt" "$OUT/summary.txt"


tel=$work/telemetry.jsonl
python3 tools/host_telemetry.py "$tel" --hz 2 --match sglang &
tel_pid=$!
mark() { echo "$(date +%s.%N) $*" >> "$tel.marks"; }
# Packed after every round as well as at the end: a call killed at its limit still sends back
# every round that finished.
pack() {
  gzip -c "$tel" > "$work/telemetry.jsonl.gz"
  cp "$src" fixtures/deployments/llama8b-dummy-h200-ab.toml "$work/"
  cat "$work"/round-*.out > "$OUT/run.log" 2>/dev/null
  tar -C "$work" -czf "$OUT/results.tar.gz" --exclude='*.log.gz' --exclude='baselines-*' --exclude=telemetry.jsonl --exclude=jit-cache.tar.gz .
}
round=${FIRST:-1}
fresh=1; [[ -f /tmp/.noise-booted ]] && fresh=0
for v in "$@"; do
  need=${ROUND_S:-170}; ((fresh)) && need=340
  # An A/B trial may take its 40 paired requests of three servers (~120 s) beside the boots.
  [[ $v == ab ]] && { need=${AB_ROUND_S:-240}; ((fresh)) && need=420; }
  name=$(printf 'round-%02d-%s' "$round" "$v")
  if compgen -G "$work/round-$(printf '%02d' "$round")-*" > /dev/null; then
    # A warm machine keeps the earlier calls' rounds in $work: this one would overwrite one of them.
    echo "$name: NOT STARTED: round $round exists already in $work (an earlier call's); pass FIRST=<a free number>" | tee -a "$OUT/summary.txt"
    break
  fi
  if ((SECONDS + need > deadline)); then
    echo "$name: NOT STARTED (needs ~$need s, $((deadline - SECONDS)) s left)" | tee -a "$OUT/summary.txt"
    round=$((round + 1)); continue
  fi
  t0=$SECONDS
  mark "start $name"
  if [[ $v == ab ]]; then
    # tools/inject first on the servers' path (inert unless the trial sets SPECGATE_INJECT_SLOWDOWN);
    # the trial's report folder and its line in trials.jsonl go under $work/trials.
    PYTHONPATH=$PWD/tools/inject:$PYTHONPATH python3 tools/gate_trials.py run --runs 1 --first "$round" \
      --slowdown "${SLOWDOWN:-0.10}" --out "$work/trials" --deadline-s 100000 > "$work/$name.out" 2>&1
    rc=$?
    mark "end $name rc $rc"
    fresh=0; touch /tmp/.noise-booted
    echo "$name: exit $rc in $((SECONDS - t0)) s: $(tail -1 "$work/$name.out")" | tee -a "$OUT/summary.txt"
    pack
    round=$((round + 1))
    continue
  fi
  python3 -m specgate.cli run "$work/$v.toml" --report-dir "$work/$name" --baselines-dir "$work/baselines-$name" > "$work/$name.out" 2>&1
  rc=$?
  mark "end $name rc $rc"
  fresh=0; touch /tmp/.noise-booted
  line=$(python3 - "$work/$name/report.json" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
print(" ".join(f"{row['config']}={row['decode_tps']}" for row in r.get("speed", [])))
PY
)
  echo "$name: exit $rc in $((SECONDS - t0)) s: ${line:-$(grep -m1 '^specgate: ' "$work/$name.out")}" | tee -a "$OUT/summary.txt"
  pack
  round=$((round + 1))
done
kill "$tel_pid" 2>/dev/null; wait "$tel_pid" 2>/dev/null
pack
ls -la "$OUT/results.tar.gz" | tee -a "$OUT/summary.txt"
gpu_save_jit_cache "$work" "$OUT" | tee -a "$OUT/summary.txt"

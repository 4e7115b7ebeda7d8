#!/usr/bin/env bash
# The speed gates' noise and sensitivity on one H200, real SGLang, the dummy 8B with a steady
# simulated accept length (fixtures/deployments/llama8b-dummy-h200-steady.toml), in two device calls:
#
#   bash tools/gpu_steady.sh calibrate   unpack SGLang (bundle parts in /tmp/chunks), write the dummy
#                                        8B assets, `specgate calibrate` (CAL_BOOTS A/A rounds, default
#                                        4, none started past the call's deadline): every config booted
#                                        afresh per round, eagle3-decode (accepts exactly 2 per cycle)
#                                        beside eagle3-decode-drawn (SGLang's default draws)
#   bash tools/gpu_steady.sh judge       with that calibration (kept in /tmp/steady while the machine
#                                        stays warm): `baseline update`, then unchanged runs and runs with
#                                        eagle3-decode slowed by SLOWDOWN (default 0.10: tools/inject,
#                                        a GPU spin after every draft-verify cycle), alternating, every
#                                        run booting its servers afresh, none started past the deadline
#                                        (BASELINES_IN=DIR: start from a stored baseline and calibration
#                                        kept from an earlier call, e.g. under results/; RUNS=N pairs, default 5)
#   PIN=1 (either phase): the deployment with launch.cpu_affinity = "split", named …-steady-pinned
#   SPIN=1 (either phase): the deployment without --sleep-on-idle, idle neighbours spinning on host
#                          cores as every boot of the first H200 data ran, named …-spinning: against
#                          the default (quiet) one it measures what quiet neighbours remove
#
# Pass SPECGATE_COMMIT=<clean commit>. DEADLINE_S (default 570) bounds each call. Everything comes
# back under $OUT: summary.txt (provenance, one line per step, every report's first screen),
# run.log, results.tar.gz (every report folder with benchmark.json's per-request samples and the
# server logs, the calibration record and baseline written, provenance.txt). Lab tool.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
phase=${1:?usage: tools/gpu_steady.sh calibrate|judge}
deadline=$((SECONDS + ${DEADLINE_S:-570}))
export NCCL_NVLS_ENABLE=0
dep=fixtures/deployments/llama8b-dummy-h200-steady.toml
work=/tmp/steady; mkdir -p "$work/baselines"
if [[ ${PIN:-0} == 1 ]]; then
  # The same deployment with every server on its own fixed CPU slice, under its own name (its
  # calibration and baseline are another runner setup's, so they must not mix with the unpinned ones).
  sed -e 's/^name = "llama8b-dummy-h200-steady"/name = "llama8b-dummy-h200-steady-pinned"/' \
      -e 's/^coexist = true/coexist = true\ncpu_affinity = "split"/' "$dep" > "$work/pinned.toml"
  dep=$work/pinned.toml
fi
if [[ ${SPIN:-0} == 1 ]]; then
  # Under its own name: the launch digest leaves --sleep-on-idle out, so only the name keeps this
  # setup's calibration and baselines apart from the quiet one's.
  name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$dep" | head -1)
  sed -e "s/^name = \"$name\"/name = \"$name-spinning\"/" -e 's/, "--sleep-on-idle"\]/]/' "$dep" > "$work/spinning.toml"
  if grep -q '"--sleep-on-idle"' "$work/spinning.toml"; then echo "SPIN=1: --sleep-on-idle left in the launch"; exit 3; fi
  dep=$work/spinning.toml
fi
# Unpacked once per machine: a judge call on a fresh machine unpacks too.
if [[ $phase == calibrate || ! -f /tmp/gpu-env.sh ]]; then
  bash /tmp/chunks/p0/tools/unpack.sh 2>&1 | tail -2 || exit 3
fi
source /tmp/gpu-env.sh || exit 3
# The injection hook first on every server's path; it does nothing unless SPECGATE_INJECT_SLOWDOWN is set.
export PYTHONPATH=$PWD/tools/inject:$PWD:$PWD/lab${PYTHONPATH:+:$PYTHONPATH}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${SPECGATE_COMMIT:-unknown}"
  echo "phase: $phase (CAL_BOOTS=${CAL_BOOTS:-4} SLOWDOWN=${SLOWDOWN:-0.10} DEADLINE_S=${DEADLINE_S:-570} PIN=${PIN:-0} SPIN=${SPIN:-0})"
  echo "deployment: $dep ($(sed -n 's/^name = //p' "$dep" | head -1))"
  echo "host: $(hostname) machine-id $(cat /etc/machine-id 2>/dev/null || echo none)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid,clocks.max.sm --format=csv,noheader
  python3 -c 'import importlib.metadata as m; print("sglang", m.version("sglang"), "torch", m.version("torch"), "flashinfer", m.version("flashinfer-python"))'
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
} > "$work/provenance-$phase.txt"
: > "$OUT/summary.txt"
cat "$work/provenance-$phase.txt" >> "$OUT/summary.txt"
step() {  # step NAME SECONDS_NEEDED COMMAND...: one specgate command, unless it would pass the deadline
  local name=$1 need=$2; shift 2
  if ((SECONDS + need > deadline)); then
    echo "$name: NOT STARTED (needs ~$need s, $((deadline - SECONDS)) s left)" | tee -a "$OUT/summary.txt"
    return
  fi
  local t0=$SECONDS
  "$@" --report-dir "$work/$name" > "$work/$name.out" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(grep -m1 '^specgate: ' "$work/$name.out" || tail -1 "$work/$name.out")" | tee -a "$OUT/summary.txt"
}
if [[ $phase == calibrate || ! -d /tmp/assets/llama-3.1-8b-eagle3-dummy ]]; then
  python3 -m specgate_lab assets llama8b-dummy /tmp/assets --gguf /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf > "$work/assets.log" 2>&1 || { tail -5 "$work/assets.log"; exit 3; }
fi
if [[ $phase == calibrate ]]; then
  left=$((deadline - SECONDS - 20))
  step calibrate 200 python3 -m specgate.cli calibrate "$dep" --boots "${CAL_BOOTS:-4}" --max-seconds "$left" \
    --baselines-dir "$work/baselines" --numerics 0
  cat "$work/calibrate/calibration.md" >> "$OUT/summary.txt" 2>/dev/null
else
  # BASELINES_IN: a folder holding <deployment>/ (a stored baseline, calibration/), e.g. a previous
  # session's results/…/baselines, used where this machine has none of its own yet.
  if [[ -n ${BASELINES_IN:-} && -z $(ls -A "$work/baselines" 2>/dev/null) ]]; then
    cp -r "$BASELINES_IN"/. "$work/baselines/" || exit 3
    echo "baselines from $BASELINES_IN (another lease's machine)" | tee -a "$OUT/summary.txt"
  fi
  slow=${SLOWDOWN:-0.10}
  # UPDATE=0: judge against the baseline this machine stored in an earlier call.
  [[ ${UPDATE:-1} == 1 ]] && step update 150 python3 -m specgate.cli baseline update "$dep" --baselines-dir "$work/baselines"
  # FIRST: the number of the first run here, so that a later call's runs do not overwrite this one's.
  first=${FIRST:-1}
  for i in $(seq "$first" $((first + ${RUNS:-5} - 1))); do
    step "unchanged-$i" 130 python3 -m specgate.cli run "$dep" --baselines-dir "$work/baselines"
    [[ ${SLOWED:-1} == 1 ]] && SPECGATE_INJECT_SLOWDOWN=$slow SPECGATE_INJECT_ONLY=eagle3-decode step "slowed-$i" 130 python3 -m specgate.cli run "$dep" --baselines-dir "$work/baselines"
  done
  for r in "$work"/unchanged-* "$work"/slowed-*; do
    [[ -f $r/report.md ]] && { echo "== $(basename "$r")"; sed -n 1,30p "$r/report.md"; } >> "$OUT/summary.txt"
  done
  grep -h "specgate-inject" "$work"/slowed-*/logs/*.log 2>/dev/null | sort | uniq -c | tail -8 >> "$OUT/summary.txt"
fi
cat "$work"/*.out > "$OUT/run.log" 2>/dev/null
tar -C "$work" -czf "$OUT/results.tar.gz" --exclude='*.log.gz' .

#!/usr/bin/env bash
# The proof run of "verdicts that hold on real hardware" on one H200, in two device calls:
#
#   bash tools/gpu_url_drift.sh start     unpack SGLang (bundle parts in /tmp/chunks), make SmolLM2,
#                                         start a plain and a STANDALONE server by hand (setsid: they
#                                         outlive the call while the machine stays warm) and the
#                                         throttling proxy in front of the STANDALONE one
#   bash tools/gpu_url_drift.sh measure   against those very servers (smollm2-url-h200, launcher url):
#                                         specgate calibrate (A/A runs minutes apart), baseline update,
#                                         three unchanged runs, then one run with the proxy pacing every
#                                         streamed event to one per DELAY_MS (default 8): the injected regression
#
# Pass SPECGATE_COMMIT=<clean commit>. Everything comes back under $OUT: summary.txt, run.log,
# results.tar.gz (every run's report folder with benchmark.json's per-request samples, the
# calibration record and the baseline written, server logs, provenance.txt). Lab tool.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
phase=${1:?usage: tools/gpu_url_drift.sh start|measure}
export NCCL_NVLS_ENABLE=0
model=/tmp/assets/smollm2-135m-instruct
common=(--model-path "$model" --host 127.0.0.1 --prefill-attention-backend flashinfer --decode-attention-backend triton
        --cuda-graph-max-bs-decode 2 --cuda-graph-backend-prefill disabled --mem-fraction-static 0.15)
work=/tmp/url-drift; mkdir -p "$work"
if [[ $phase == start ]]; then
  bash /tmp/chunks/p0/tools/unpack.sh 2>&1 | tail -3 || exit 3
  source /tmp/gpu-env.sh
  export PYTHONPATH=$PWD:$PWD/lab${PYTHONPATH:+:$PYTHONPATH}
  python3 -m specgate_lab assets smollm2 /tmp/assets --gguf /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf > "$work/assets.log" 2>&1 \
    || { tail -5 "$work/assets.log"; exit 3; }
  echo 0 > "$work/delay_ms"
  setsid python3 -m sglang.launch_server "${common[@]}" --port 31000 > "$work/baseline.log" 2>&1 < /dev/null &
  sleep 10
  setsid python3 -m sglang.launch_server "${common[@]}" --port 31001 --speculative-algorithm STANDALONE \
    --speculative-draft-model-path "$model" --speculative-num-steps 3 --speculative-eagle-topk 1 \
    --speculative-num-draft-tokens 4 --speculative-attention-mode decode > "$work/standalone.log" 2>&1 < /dev/null &
  setsid python3 tools/throttle_proxy.py 31002 31001 "$work/delay_ms" > "$work/proxy.log" 2>&1 < /dev/null &
  for port in 31000 31002; do
    for _ in $(seq 1 110); do
      curl -sf -m 10 "http://127.0.0.1:$port/health_generate" > /dev/null && { echo "port $port ready after ${SECONDS} s"; break; }
      sleep 3
    done
  done
  tail -n 3 "$work"/*.log > "$OUT/start.log"
  curl -sf -m 10 http://127.0.0.1:31002/health_generate > /dev/null || { echo "servers not ready"; tail -20 "$work"/*.log; exit 3; }
  exit 0
fi
source /tmp/gpu-env.sh
export PYTHONPATH=$PWD:$PWD/lab${PYTHONPATH:+:$PYTHONPATH}
dep=smollm2-url-h200
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${SPECGATE_COMMIT:-unknown}"
  echo "command: tools/gpu_url_drift.sh measure (DELAY_MS=${DELAY_MS:-8})"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid --format=csv,noheader
  python3 -c 'import importlib.metadata as m; print("sglang", m.version("sglang"), "torch", m.version("torch"), "flashinfer", m.version("flashinfer-python"))'
  echo "cpu: $(nproc) cores"
} > "$work/provenance.txt"
cat "$work/provenance.txt"
step() {  # step NAME COMMAND...: one specgate command, its exit code and its report kept
  local name=$1; shift
  local t0=$SECONDS
  "$@" --report-dir "$work/$name" > "$work/$name.out" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s: $(grep -m1 '^specgate: ' "$work/$name.out" || tail -1 "$work/$name.out")" | tee -a "$OUT/summary.txt"
}
: > "$OUT/summary.txt"
cat "$work/provenance.txt" >> "$OUT/summary.txt"
step calibrate python3 -m specgate.cli calibrate $dep --boots 3 --numerics 0
step update python3 -m specgate.cli baseline update $dep
for i in 1 2 3; do step "unchanged-$i" python3 -m specgate.cli run $dep; done
echo "${DELAY_MS:-8}" > "$work/delay_ms"
step slowed python3 -m specgate.cli run $dep
echo 0 > "$work/delay_ms"
cp -r baselines/$dep "$work/baselines-written" 2>/dev/null
for r in unchanged-1 unchanged-2 unchanged-3 slowed; do
  { echo "== $r"; sed -n 1,25p "$work/$r/report.md"; } >> "$OUT/summary.txt" 2>/dev/null
done
cat "$work"/*.out > "$OUT/run.log"
tar -C "$work" -czf "$OUT/results.tar.gz" --exclude='*.log.gz' .

#!/usr/bin/env bash
# One device call, one whole GPU run: unpack real SGLang from the carried bundle, make the
# SmolLM2 assets, run the gate suite on a deployment, and leave the results under $OUT.
#
#   bash tools/gpu_run.sh DEPLOYMENT [check|update]
#
#   check   the gate, compared against the repo's stored baselines (the default)
#   update  the gate, then store this run's figures as the baseline (`specgate baseline update`);
#           the new file comes back in results.tar.gz under baselines/
#
# The bundle's parts must already be in /tmp/chunks (../shared/gpu/README.md). The copy sent to
# the device has no .git: pass SPECGATE_COMMIT=<hash> so the report and baselines name the commit.
# Environment: RUN_TIMEOUT (s, the suite's limit; default 480), RUN_EXAMPLES (equivalence cases per
# speculative config; default 8), JIT_CACHE (a .tar.gz of Triton/FlashInfer kernel caches from an
# earlier run to start from), SAVE_JIT_CACHE=1 (send this run's caches back as jit-cache.tar.gz),
# RUN_SELECT (a pytest -k expression, e.g. "regression" for the no-regression gates alone).
#
# Comes back (8 files at most): report.md report.json report.png run.log summary.txt
# results.tar.gz (benchmark.json, server logs, golden file, provenance, nvidia-smi samples,
# the baseline written) and, if asked, jit-cache.tar.gz.
set -uo pipefail
deployment=${1:?usage: tools/gpu_run.sh DEPLOYMENT [check|update]}
mode=${2:-check}
case $mode in check | update) ;; *) echo "gpu_run.sh: mode must be check or update, got '$mode'" >&2; exit 2 ;; esac
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
work=/tmp/gpu-run && rm -rf "$work" && mkdir -p "$work"
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started )) s"; }

bash /tmp/chunks/p0/tools/unpack.sh 2>&1 | tail -3 || { echo "gpu_run.sh: unpack failed"; exit 3; }
source /tmp/gpu-env.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${SPECGATE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  echo "command: tools/gpu_run.sh $deployment $mode (RUN_EXAMPLES=${RUN_EXAMPLES:-8}, JIT_CACHE=${JIT_CACHE:-none}, RUN_SELECT=${RUN_SELECT:-all})"
  echo -n "gpu, driver, memory.total: "; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvidia-smi | grep "CUDA Version" | sed 's/|//g;s/  */ /g'
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  python3 -c "import sglang, torch, transformers, flashinfer; print('sglang', sglang.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, 'flashinfer', flashinfer.__version__)" 2>/dev/null
} > "$work/provenance.txt"
cat "$work/provenance.txt"

if [[ -n ${JIT_CACHE:-} && -f $JIT_CACHE ]]; then
  tar -C "$HOME" -xzf "$JIT_CACHE" && echo "kernel caches restored from $JIT_CACHE"
fi
python3 -m specgate.cli assets smollm2 /tmp/assets --gguf /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf 2>&1 | tail -2
echo "unpack and assets done after $(elapsed)"

# What nvidia-smi sees while the suite runs (memory per server process, release after teardown).
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader -l 5 > "$work/compute-apps.log" 2>&1 &
sampler=$!
if [[ $mode == update ]]; then verb=(baseline update); else verb=(run); fi
timeout "${RUN_TIMEOUT:-480}" python3 -m specgate.cli "${verb[@]}" "$deployment" --report-dir "$work/report" \
  --examples "${RUN_EXAMPLES:-8}" -- -p no:cacheprovider ${RUN_SELECT:+-k "$RUN_SELECT"} > "$OUT/run.log" 2>&1
status=$?
echo "suite exit $status after $(elapsed)" | tee -a "$OUT/run.log"
kill $sampler 2>/dev/null

# A short summary of what happened, for reading before anything else.
{
  cat "$work/provenance.txt"
  echo "suite exit $status after $(elapsed)"
  grep -E "^(FAILED|ERROR)|^specgate:|passed|failed" "$OUT/run.log" | tail -40
  for log in "$work"/report/logs/*.log; do
    [[ -f $log ]] || continue
    echo "--- $(basename "$log"): $(grep -c 'gen throughput' "$log") decode lines"
    grep -E "Capture cuda graph end|fired up|Traceback|Error|error:|CUDA out of memory|Not enough memory" "$log" | head -8
  done
  echo "--- left running: $(ps aux | grep -c '[s]glang.launch_server') SGLang processes"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
} > "$OUT/summary.txt" 2>&1
cp "$work"/report/report.{md,json,png} "$OUT/" 2>/dev/null

mkdir -p "$work/pack/baselines"
if [[ $mode == update ]]; then
  find baselines -name '*.json' -newer "$work/provenance.txt" -exec cp --parents {} "$work/pack/" \;
fi
cp -r "$work/provenance.txt" "$work/compute-apps.log" "$work/pack/"
(cd "$work/report" && cp -r benchmark.json logs $(ls ./*-golden.json 2>/dev/null) "$work/pack/" 2>/dev/null)
tar -C "$work/pack" -czf "$OUT/results.tar.gz" .

if [[ -n ${SAVE_JIT_CACHE:-} ]]; then
  (cd "$HOME" && tar -czf "$work/jit-cache.tar.gz" $(ls -d .triton/cache .cache/flashinfer .cache/tvm-ffi 2>/dev/null))
  size=$(stat -c %s "$work/jit-cache.tar.gz")
  echo "kernel caches: $((size / 1024)) KiB compressed ($(du -sh "$HOME/.triton" "$HOME/.cache/flashinfer" 2>/dev/null | xargs))" | tee -a "$OUT/summary.txt"
  if ((size < 15 * 1024 * 1024)); then cp "$work/jit-cache.tar.gz" "$OUT/"; else echo "too large to send back" | tee -a "$OUT/summary.txt"; fi
fi
echo "done after $(elapsed)"
exit $status

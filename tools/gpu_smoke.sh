#!/usr/bin/env bash
# One device call: real SGLang from the carried bundle, SmolLM2 assets, the gate suite on
# fixtures/deployments/smollm2-h200-smoke.toml, results under $OUT. Parts of the bundle
# must already be in /tmp/chunks (see ../shared/gpu/README.md). The copy sent to the device
# has no .git: pass SPECGATE_COMMIT=<hash> so reports and provenance name the commit.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
started=$(date +%s)
bash /tmp/chunks/p0/tools/unpack.sh 2>&1 | tail -3
source /tmp/gpu-env.sh
export PYTHONPATH=$PWD:$PYTHONPATH
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${SPECGATE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  echo -n "gpu, driver, memory.total: "; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvidia-smi | grep "CUDA Version" | sed 's/|//g'
  python3 -c "import sglang, torch, transformers; print('sglang', sglang.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" 2>/dev/null
} > "$OUT/provenance.txt"
cat "$OUT/provenance.txt"
python3 -m specgate.cli assets smollm2 /tmp/assets --gguf /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf 2>&1 | tail -3
echo "assets ready after $(( $(date +%s) - started )) s"
deployment=smollm2-h200-smoke
if [[ -n ${SMOKE_SEQUENTIAL:-} ]]; then
  # The same deployment with servers one at a time: golden file, reboots, GPU-release waits.
  sed 's/^coexist = true.*/coexist = false/' fixtures/deployments/smollm2-h200-smoke.toml > /tmp/smoke-sequential.toml
  deployment=/tmp/smoke-sequential.toml
fi
# What nvidia-smi sees while the suite runs (are the servers' PIDs visible in this container?)
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader -l 5 > "$OUT/compute-apps.log" 2>&1 &
sampler=$!
timeout ${SMOKE_TIMEOUT:-420} python3 -m specgate.cli run "$deployment" --report-dir /tmp/report \
  --examples ${SMOKE_EXAMPLES:-6} -- -p no:cacheprovider 2>&1 | tee "$OUT/run.log" | grep -E "^(FAILED|ERROR|specgate:)|passed|failed" 
echo "exit ${PIPESTATUS[0]} after $(( $(date +%s) - started )) s" | tee -a "$OUT/run.log"
kill $sampler 2>/dev/null
cp /tmp/report/report.md /tmp/report/report.json /tmp/report/report.png "$OUT/" 2>/dev/null
tar -C /tmp/report -czf "$OUT/report-extra.tar.gz" benchmark.json logs $(cd /tmp/report && ls *-golden.json 2>/dev/null) 2>/dev/null
ps aux | grep -c "[s]glang.launch_server" | sed 's/^/sglang processes left: /' | tee -a "$OUT/run.log"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv | tee -a "$OUT/run.log"

#!/usr/bin/env bash
# One device call, one or more whole GPU jobs: unpack real SGLang from the carried bundle (once
# per machine), make the model assets, run each job, and leave the results under $OUT.
#
#   bash tools/gpu_run.sh JOB [JOB ...]        JOB = drafter[:distil|grow|train|refine] | DEPLOYMENT[:check|update|calibrate|sweep][+weak]
#
#   drafter `specgate-lab assets smollm2-eagle3 /tmp/assets`: a trained EAGLE-3 drafter for SmolLM2
#           (self-distilled data through SGLang, SpecForge training; needs a tools/bundle.sh bundle
#           whose main release has SpecForge). Kept in /tmp/assets while the machine stays warm,
#           and sent back as drafters.tar.zst.partNN (carry it again as DRAFTERS_IN to restore).
#           DRAFTER_PROMPTS (templated, default 4000), DRAFTER_SELF_PROMPTS (written by the target
#           itself first, default 4000), DRAFTER_SELF_PASSAGES (passages of everyday prose it writes
#           first, made into summarisation and long-input prompts, default 0),
#           DRAFTER_EPOCHS (12), DRAFTER_TRAIN_S (240; never past the deadline),
#           DRAFTER_BATCH_TOKENS (padded tokens per training step, 16384).
#           drafter:distil makes only the training data (sent back as distilled.tar.zst.partNN: carry
#           their concatenation as DISTILLED_IN; a fresh
#           machine's first SGLang boot took 259 s, so data and training may need a call each);
#           it stops sending prompts before the call's deadline and keeps what was answered: run
#           drafter:distil again with the same sizes (this machine's data, or DISTILLED_IN) to
#           answer the rest of the same plan (DRAFTER_FRESH=1: distil anew all the same);
#           drafter:grow distils a further round of new prompts (none asked before) beside that data,
#           into smollm2-eagle3-work/round-N (sent back as distilled-round-N.tar.zst.partNN; carry it
#           as DISTILLED_ROUNDS_IN, several separated by spaces, each restored where its round is absent);
#           drafter:train trains from the data on this machine, or from DISTILLED_IN (a carried copy);
#           drafter:refine trains the trained drafter (this machine's, or DRAFTERS_IN) further on that
#           data, keeping the weak one. DRAFTER_LR: the peak learning rate (default 3e-4).
#   +weak   run the job with /tmp/assets/smollm2-eagle3 pointing at the weak checkpoint (a
#           worse drafter pushed under the same path), then point it back
#   check   the gate, compared against the repo's stored baselines (the default); a failing case's
#           replay file comes back in results.tar.gz under JOB/baselines/
#   update  the gate, then store this run's figures as the baseline (`specgate baseline update`);
#           the new file comes back in results.tar.gz under JOB/baselines/
#   calibrate `specgate calibrate DEPLOYMENT`: CAL_BOOTS (default 3) A/A rounds, each booting every
#           config afresh; the calibration record comes back in results.tar.gz under JOB/baselines/
#   sweep   `specgate sweep DEPLOYMENT`, resumed from /tmp/sweep-state/DEPLOYMENT.json while the
#           machine stays warm (or from SWEEP_STATE_IN, a carried copy), stopped between waves
#           before the call's deadline: run the same job again to go on
#
# The bundle's parts must already be in /tmp/chunks (../shared/gpu/README.md). The copy sent to
# the device has no .git: pass SPECGATE_COMMIT=<hash> so reports and baselines name the commit,
# and SPECGATE_COMMIT_TIME=$(git show -s --format=%cI <hash>) SPECGATE_BRANCH=<branch> so that
# benchmark.json's commit_info says when it was made (null otherwise).
# Environment: DEADLINE_S (this call's budget from the script's start, default 560: jobs that
# cannot finish in what is left are not started, and say so), RUN_EXAMPLES (equivalence cases per
# speculative config; default 8), JIT_CACHE (a .tar.gz of Triton/FlashInfer kernel caches to start
# from), SAVE_JIT_CACHE=1 (send this run's caches back), RUN_SELECT (pytest -k expression for gate
# jobs), SWEEP_GPUS (e.g. 0,1: spread a sweep's servers over these GPUs), WARM_KERNELS (a
# deployment: tools/warm_kernels.py boots each of its configs once, niced, in the background from
# the start of the call, so that its JIT kernels compile while a drafter job works; a gate job
# waits for it first; its log comes back in results.tar.gz under warm-kernels/).
#
# Comes back (8 files at most): summary.txt, run.log (every job's output), results.tar.gz (per job:
# report or sweep table and state, benchmark.json, server logs, golden file, baselines written;
# provenance; nvidia-smi samples), the last gate job's report.md, the last sweep's sweep.md and
# sweep.json, and, if asked, jit-cache.tar.gz.
set -uo pipefail
(($#)) || { echo "usage: tools/gpu_run.sh drafter[:distil|grow|train|refine] | DEPLOYMENT[:check|update|calibrate|sweep][+weak] ..." >&2; exit 2; }
# Checked before the bundle is unpacked (minutes on a fresh machine): a bad rate fails now, not then.
if [[ -n ${DRAFTER_LR:-} ]] && ! python3 -c 'import math, sys; v = float(sys.argv[1]); sys.exit(not (0 < v < 1))' "$DRAFTER_LR" 2>/dev/null; then
  echo "gpu_run.sh: DRAFTER_LR=$DRAFTER_LR: expected a learning rate between 0 and 1 (e.g. 1e-4)" >&2; exit 2
fi
for job in "$@"; do
  [[ $job == drafter || $job == drafter:distil || $job == drafter:grow || $job == drafter:train || $job == drafter:refine ]] && continue
  [[ $job == drafter[:+]* ]] && { echo "gpu_run.sh: bad job '$job' (drafter, drafter:distil, drafter:grow, drafter:train or drafter:refine; no suffix)" >&2; exit 2; }
  [[ -n ${job%%[:+]*} ]] || { echo "gpu_run.sh: bad job '$job' (no deployment name)" >&2; exit 2; }
  mode=${job#*:}; mode=${mode%+weak}
  case $mode in "${job%+weak}" | check | update | sweep | calibrate) ;; *) echo "gpu_run.sh: bad job '$job' (mode: check, update, calibrate or sweep; suffix +weak)" >&2; exit 2 ;; esac
done
# A distillation server sizes its memory from what is free when it boots: the warmer waits for a
# drafter:distil's server, but a grow's round (and its log) is chosen in Python.
if [[ -n ${WARM_KERNELS:-} && " $* " == *" drafter:grow "* ]]; then
  echo "gpu_run.sh: WARM_KERNELS with drafter:grow: the warmer's servers would boot beside the distillation's; warm in a later job's call" >&2; exit 2
fi
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
deadline=${DEADLINE_S:-560}
work=/tmp/gpu-run && rm -rf "$work" && mkdir -p "$work/pack"
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
left() { echo $((deadline - $(elapsed))); }
# The host's rule for multi-GPU machines, inherited by every process the suite starts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [[ -f /tmp/gpu-env.sh ]] && (source /tmp/gpu-env.sh && python3 -c "import sglang") 2>/dev/null; then
  echo "SGLang already unpacked on this machine"
else
  bash /tmp/chunks/p0/tools/unpack.sh 2>&1 | tail -6
  ((PIPESTATUS[0] == 0)) || { echo "gpu_run.sh: unpack failed"; exit 3; }
fi
source /tmp/gpu-env.sh
# lab/: the drafter and model-asset maker (`python3 -m specgate_lab`), outside the product's package.
export PYTHONPATH=$PWD:$PWD/lab${PYTHONPATH:+:$PYTHONPATH}
versions='import importlib.metadata as m, sys
def v(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return "not installed"
print(" ".join(n.split("-python")[0] + " " + v(n) for n in sys.argv[1:]))'
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${SPECGATE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}${SPECGATE_COMMIT_TIME:+ ($SPECGATE_COMMIT_TIME)}${SPECGATE_BRANCH:+ on $SPECGATE_BRANCH}"
  echo "command: tools/gpu_run.sh $* (RUN_EXAMPLES=${RUN_EXAMPLES:-8}, JIT_CACHE=${JIT_CACHE:-none}, RUN_SELECT=${RUN_SELECT:-all}, SWEEP_GPUS=${SWEEP_GPUS:-as launched})"
  echo "gpus (name, driver, memory.total, uuid):"; nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid --format=csv,noheader
  nvidia-smi | grep "CUDA Version" | sed 's/|//g;s/  */ /g'
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  # Versions from the installed packages' metadata: importing SGLang and torch to ask them cost
  # ~25 s per interpreter on every call (60 s before a training job started).
  python3 -c "$versions" sglang torch transformers flashinfer-python specforge
  for py in /tmp/sglang-*/python; do
    [[ -x $py ]] && echo "$py: $("$py" -c "$versions" sglang transformers flashinfer-python 2>/dev/null | tail -1)"
  done
} > "$work/pack/provenance.txt"
cat "$work/pack/provenance.txt"

if [[ -n ${JIT_CACHE:-} && -f $JIT_CACHE && ! -f /tmp/.jit-restored ]]; then
  tar -C "$HOME" -xzf "$JIT_CACHE" && touch /tmp/.jit-restored && echo "kernel caches restored from $JIT_CACHE"
fi
gguf=/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf
# A carried .tar.zst unpacked under /tmp/assets, where it was packed from.
unpack() { mkdir -p /tmp/assets && LD_LIBRARY_PATH=/tmp/chunks/p0/tools /tmp/chunks/p0/tools/zstd -d -q -c "$1" | tar -C /tmp/assets -xf -; }
if [[ -n ${DRAFTERS_IN:-} && -f $DRAFTERS_IN && ! -f /tmp/assets/smollm2-eagle3/drafter.json ]]; then
  unpack "$DRAFTERS_IN" && echo "drafters restored from $DRAFTERS_IN"
fi
if [[ -n ${DISTILLED_IN:-} && -f $DISTILLED_IN && ! -f /tmp/assets/smollm2-eagle3-work/distilled.json ]]; then
  unpack "$DISTILLED_IN" && echo "distilled data restored from $DISTILLED_IN"
fi
for carried in ${DISTILLED_ROUNDS_IN:-}; do
  round=$(basename "$carried"); round=${round#distilled-}; round=${round%.tar.zst}
  if [[ ! -f $carried || ! $round =~ ^round-[1-9][0-9]*$ ]]; then
    echo "gpu_run.sh: DISTILLED_ROUNDS_IN: $carried: expected a whole distilled-round-N.tar.zst a drafter:grow job sent back (its parts joined)" >&2; exit 2
  fi
  if [[ ! -f /tmp/assets/smollm2-eagle3-work/$round/distilled.json ]]; then
    if ! unpack "$carried"; then
      rm -rf "/tmp/assets/smollm2-eagle3-work/$round"  # half a round would train as a whole one
      echo "gpu_run.sh: DISTILLED_ROUNDS_IN: $carried: could not be unpacked (cut short?); nothing of $round kept" >&2; exit 2
    fi
    echo "distilled $round restored from $carried"
  fi
done
# Each kind of asset once per machine and per version of the code that makes them: a stamp
# names both, written only once `specgate-lab assets` succeeded (a conversion stopped halfway leaves
# none). Starting Python with torch and transformers only to find the files there cost ~40 s a job.
assets_digest=$(sha256sum < lab/specgate_lab/assets.py | cut -c1-16)
make_assets() {
  local stamp=/tmp/assets/.made-$1-$assets_digest
  [[ -f $stamp ]] && return 0
  python3 -m specgate_lab assets "$1" /tmp/assets --gguf "$gguf" > "$work/assets-$1.log" 2>&1 \
    && touch "$stamp" && tail -1 "$work/assets-$1.log" || { echo "specgate-lab assets $1 failed:"; tail -5 "$work/assets-$1.log"; }
}
for job in "$@" ${WARM_KERNELS:-}; do
  case ${job%%:*} in
    llama8b*) make_assets llama8b-dummy ;;
    smollm2*) make_assets smollm2 ;;
  esac
done
echo "unpack and assets done after $(elapsed) s"

warmer=""
if [[ -n ${WARM_KERNELS:-} ]]; then
  mkdir -p "$work/pack/warm-kernels"
  # A distillation server sizes its memory from what is free when it boots: the warmer's servers
  # start only once it is up (its log says so), never while it measures.
  distil_log=""
  for job in "$@"; do [[ $job == drafter || $job == drafter:distil ]] && distil_log=/tmp/assets/smollm2-eagle3-work/distilled.server.log; done
  [[ -n $distil_log ]] && rm -f "$distil_log"
  # A random-weight drafter of the deployment's own shape (specgate-lab assets makes both).
  stand_in=/tmp/assets/smollm2-eagle3-random; [[ $WARM_KERNELS == llama8b* ]] && stand_in=/tmp/assets/llama-3.1-8b-eagle3-dummy
  setsid bash -c 'log=$1; shift; if [[ -n $log ]]; then for _ in $(seq 150); do grep -qs "fired up" "$log" && break; sleep 2; done; fi
    exec nice -n 10 python3 tools/warm_kernels.py "$@"' _ "$distil_log" "$WARM_KERNELS" \
    --draft-stand-in "$stand_in" --log-dir "$work/pack/warm-kernels" \
    --deadline $((started + deadline - 90)) > "$work/pack/warm-kernels/warm.log" 2>&1 &
  warmer=$!
  echo "warming $WARM_KERNELS's kernels in the background (pid $warmer${distil_log:+, once the distillation server is up})"
fi
# The gate must not share the GPU or the CPU with the warmer: wait for it, stop it at the deadline.
wait_warmer() {
  [[ -n $warmer ]] || return 0
  while kill -0 "$warmer" 2>/dev/null && (($(left) > ${1:-30})); do sleep 2; done
  kill -0 "$warmer" 2>/dev/null && { echo "warm_kernels still running: stopped"; kill -TERM -- "-$warmer" 2>/dev/null; sleep 5; kill -KILL -- "-$warmer" 2>/dev/null; }
  wait "$warmer" 2>/dev/null; echo "warm_kernels: exit $? after $(elapsed) s" | tee -a "$OUT/run.log"
  cat "$work/pack/warm-kernels/warm.log" >> "$OUT/run.log"
  warmer=""
}
# An archive sent back in 15-MiB parts. A call returns 8 files of 16 MiB and about 64 MiB in all:
# the first 3 parts go with it (beside the summary, log and results); every part stays in
# /tmp/parts-out while the machine is warm, and the log names the ones a next call must fetch
# (`cp /tmp/parts-out/NAME.partNN ... $OUT/`).
send_parts() {
  local archive=$1 name; name=$(basename "$1")
  mkdir -p /tmp/parts-out && rm -f "/tmp/parts-out/$name".part*
  (cd "$(dirname "$archive")" && split -b 15m -d -a 2 "$name" "/tmp/parts-out/$name.part") || { echo "$name: could not split" | tee -a "$OUT/run.log"; return 1; }
  local parts=(/tmp/parts-out/"$name".part*)
  cp "${parts[@]:0:3}" "$OUT/"
  if ((${#parts[@]} > 3)); then
    echo "$name: ${#parts[@]} parts, 3 sent back; fetch the rest next call: cp ${parts[*]:3} \$OUT/" | tee -a "$OUT/run.log"
  fi
}
# PATH... under /tmp/assets as NAME (a tar, zstd-compressed), sent back in 15-MiB parts (a file
# over 16 MiB does not come back from a call), its checksum printed and added to SUMS.
pack_and_send() {
  local name=$1 sums=$2; shift 2
  tar -C /tmp/assets -cf - "$@" | LD_LIBRARY_PATH=/tmp/chunks/p0/tools /tmp/chunks/p0/tools/zstd -q -T0 -9 > "$work/$name"
  send_parts "$work/$name"
  sha256sum "$work/$name" | tee -a "$sums"
}
# What nvidia-smi sees while the jobs run (memory per server process, release after teardown).
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader -l 5 > "$work/pack/compute-apps.log" 2>&1 &
sampler=$!
status=0
summary=()
for job in "$@"; do
  weak=""; [[ $job == *+weak ]] && weak=1 && job=${job%+weak}
  deployment=${job%%:*}
  mode=${job#*:}; [[ $mode == "$job" ]] && { [[ $job == drafter ]] && mode=all || mode=check; }
  dir="$work/pack/${deployment}-${mode}${weak:++weak}" && mkdir -p "$dir"
  remaining=$(left)
  echo "=== job $job${weak:++weak}: $remaining s left in this call" | tee -a "$OUT/run.log"
  # Every job starts from the trained drafter under the deployments' path; +weak swaps in the weak one.
  [[ -d /tmp/assets/smollm2-eagle3-trained ]] && ln -sfn smollm2-eagle3-trained /tmp/assets/smollm2-eagle3
  if [[ -n $weak ]]; then
    if [[ ! -d /tmp/assets/smollm2-eagle3-weak ]]; then summary+=("$job+weak: NOT STARTED (no weak checkpoint: run the drafter job first)"); status=4; continue; fi
    ln -sfn smollm2-eagle3-weak /tmp/assets/smollm2-eagle3
  fi
  if [[ $job == drafter || $job == drafter:* ]]; then
    stage=${job#drafter}; stage=${stage#:}; stage=${stage:-all}
    if [[ $stage != distil && $stage != grow && $stage != refine && -f /tmp/assets/smollm2-eagle3/drafter.json ]]; then
      summary+=("drafter: already on this machine ($(python3 -c "import json; print(json.load(open('/tmp/assets/smollm2-eagle3/drafter.json'))['checkpoint']['sha256'][:16])"))")
      continue
    fi
    # A refine needs no server: loading (~40 s), judging the parent and writing back (~50 s) leave
    # training the rest, its schedule fitted to it; a distillation's boot alone took 95-170 s.
    least=300; [[ $stage == refine ]] && least=200
    if ((remaining < least)); then summary+=("drafter: NOT STARTED (only $remaining s left, $least needed)"); status=4; continue; fi
    timeout -k 15 $((remaining - 25)) python3 -m specgate_lab assets smollm2-eagle3 /tmp/assets --gguf "$gguf" --stage "$stage" \
      --prompts "${DRAFTER_PROMPTS:-4000}" --self-prompts "${DRAFTER_SELF_PROMPTS:-4000}" --self-passages "${DRAFTER_SELF_PASSAGES:-0}" --epochs "${DRAFTER_EPOCHS:-12}" \
      --train-seconds "${DRAFTER_TRAIN_S:-240}" --batch-tokens "${DRAFTER_BATCH_TOKENS:-16384}" --lr "${DRAFTER_LR:-3e-4}" \
      --train-until $(($(date +%s) + remaining - 45)) ${DRAFTER_FRESH:+--fresh} 2>&1 | tee -a "$OUT/run.log" | grep -E "^(step|distilled|EAGLE-3|specgate)" | tail -8
    code=${PIPESTATUS[0]}
    ((code == 0)) || status=$code
    if ((code != 0)) && [[ -n $warmer ]]; then
      # The kernels it compiles serve a later call's gate, but after a failed job the next call is a
      # fix: waiting for it to its deadline spent 291 s of device time on nothing.
      echo "$job failed: the kernel warmer is stopped, not waited for" | tee -a "$OUT/run.log"
      wait_warmer 100000
    fi
    cp /tmp/assets/smollm2-eagle3.json /tmp/assets/smollm2-eagle3-work/*.server.log /tmp/assets/smollm2-eagle3-work/distilled.json "$dir/" 2>/dev/null
    if ((code == 0)) && [[ $stage == grow ]]; then
      # The round this job distilled into, as the command said it ("distilled data: …/round-N/distilled.jsonl").
      round=$(grep -oE '^distilled data: [^ ]*/round-[0-9]+/' "$OUT/run.log" | tail -1 | grep -oE 'round-[0-9]+/$' | tr -d /)
      [[ -n $round ]] || { echo "$job: its round's folder is not in run.log: nothing sent back" | tee -a "$OUT/run.log"; status=5; continue; }
      mkdir -p "$dir/$round" && cp /tmp/assets/smollm2-eagle3-work/$round/distilled.json /tmp/assets/smollm2-eagle3-work/$round/*.server.log "$dir/$round/" 2>/dev/null
      pack_and_send "distilled-$round.tar.zst" "$dir/distilled.sha256" \
        smollm2-eagle3-work/$round/distilled.jsonl smollm2-eagle3-work/$round/distilled.json smollm2-eagle3-work/$round/distil-plan.jsonl
    elif ((code == 0)) && [[ $stage == distil ]]; then
      pack_and_send distilled.tar.zst "$dir/distilled.sha256" \
        smollm2-eagle3-work/distilled.jsonl smollm2-eagle3-work/distilled.json smollm2-eagle3-work/distil-plan.jsonl
    elif ((code == 0)); then
      pack_and_send drafters.tar.zst "$dir/drafters.sha256" smollm2-eagle3 smollm2-eagle3-trained smollm2-eagle3-weak
    fi
    summary+=("$job: exit $code after $(elapsed) s")
    continue
  fi
  wait_warmer 240 && remaining=$(left)
  if [[ $mode == calibrate ]]; then
    if ((remaining < 200)); then summary+=("$job: NOT STARTED (only $remaining s left)"); continue; fi
    timeout $((remaining - 15)) python3 -m specgate.cli calibrate "$deployment" --boots "${CAL_BOOTS:-3}" \
      ${CAL_REQUESTS:+--requests "$CAL_REQUESTS"} --report-dir "$dir" --max-seconds $((remaining - 40)) >> "$OUT/run.log" 2>&1
    code=$?
    ((code == 0)) || status=$code
    cp "$dir/calibration.md" "$OUT/${deployment}-calibration.md" 2>/dev/null
    find baselines -path '*calibration*' -name '*.json' -newer "$work/pack/provenance.txt" -exec cp --parents {} "$dir/" \;
  elif [[ $mode == sweep ]]; then
    if ((remaining < 200)); then summary+=("$job: NOT STARTED (only $remaining s left)"); continue; fi
    state=/tmp/sweep-state/$deployment.json && mkdir -p /tmp/sweep-state
    if [[ ! -f $state && -n ${SWEEP_STATE_IN:-} && -f $SWEEP_STATE_IN ]]; then cp "$SWEEP_STATE_IN" "$state"; fi
    timeout $((remaining - 15)) python3 -m specgate.cli sweep "$deployment" --report-dir "$dir" --state "$state" \
      --max-seconds $((remaining - 60)) ${SWEEP_GPUS:+--gpus "$SWEEP_GPUS"} >> "$OUT/run.log" 2>&1
    code=$?
    cp "$state" "$dir/sweep.json" 2>/dev/null
    cp "$dir/sweep.md" "$dir/sweep.json" "$OUT/" 2>/dev/null
    # 3: stopped between waves for time, resumable; anything but 0/3 is a failure
    ((code == 0 || code == 3)) || status=$code
  else
    if ((remaining < 240)); then summary+=("$job${weak:++weak}: NOT STARTED (only $remaining s left)"); continue; fi
    if [[ $mode == update ]]; then verb=(baseline update); else verb=(run); fi
    timeout $((remaining - 20)) python3 -m specgate.cli "${verb[@]}" "$deployment" --report-dir "$dir/report" \
      --examples "${RUN_EXAMPLES:-8}" -- -p no:cacheprovider ${RUN_SELECT:+-k "$RUN_SELECT"} >> "$OUT/run.log" 2>&1
    code=$?
    ((code == 0)) || status=$code
    cp "$dir/report/report.md" "$OUT/" 2>/dev/null
    if [[ $mode == update ]]; then
      find baselines -name '*.json' -newer "$work/pack/provenance.txt" -exec cp --parents {} "$dir/" \;
    else
      # A failing check remembers its cases (baselines/<deployment>/equivalence/replay.json) for
      # later runs to replay first: it comes back too, to be committed with the baselines.
      find baselines -path '*equivalence*' -name '*.json' -newer "$work/pack/provenance.txt" -exec cp --parents {} "$dir/" \;
    fi
  fi
  [[ -n $weak ]] && ln -sfn smollm2-eagle3-trained /tmp/assets/smollm2-eagle3
  summary+=("$job${weak:++weak}: exit $code after $(elapsed) s")
  echo "=== job $job${weak:++weak}: exit $code after $(elapsed) s" | tee -a "$OUT/run.log"
done
wait_warmer 20
kill $sampler 2>/dev/null
# Whatever was skipped or failed, the deployments' path ends on the trained drafter.
[[ -d /tmp/assets/smollm2-eagle3-trained ]] && ln -sfn smollm2-eagle3-trained /tmp/assets/smollm2-eagle3

# A short summary of what happened, for reading before anything else.
{
  cat "$work/pack/provenance.txt"
  printf '%s\n' "${summary[@]}"
  grep -E "^(FAILED|ERROR)|^specgate:|passed|failed|FAILED" "$OUT/run.log" | tail -40
  for log in "$work"/pack/*/logs/*.log "$work"/pack/*/logs/*/*.log "$work"/pack/*/report/logs/*.log; do
    [[ -f $log ]] || continue
    echo "--- ${log#"$work"/pack/}: $(grep -c 'gen throughput' "$log") decode lines"
    grep -E "Capture cuda graph end|fired up|Traceback|Error|error:|CUDA out of memory|Not enough memory" "$log" | head -6
  done
  echo "--- left running: $(ps aux | grep -c '[s]glang.launch_server') SGLang processes"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
} > "$OUT/summary.txt" 2>&1
tar -C "$work/pack" -czf "$OUT/results.tar.gz" .

if [[ -n ${SAVE_JIT_CACHE:-} ]]; then
  (cd "$HOME" && tar -czf "$work/jit-cache.tar.gz" $(ls -d .triton/cache .cache/flashinfer .cache/tvm-ffi 2>/dev/null))
  size=$(stat -c %s "$work/jit-cache.tar.gz")
  echo "kernel caches: $((size / 1024)) KiB compressed" | tee -a "$OUT/summary.txt"
  if ((size < 15 * 1024 * 1024)); then cp "$work/jit-cache.tar.gz" "$OUT/"; else echo "too large to send back" | tee -a "$OUT/summary.txt"; fi
fi
echo "done after $(elapsed) s"
exit $status

# Shared by the lab's GPU scripts (tools/gpu_noise.sh, tools/gpu_tau_trials.sh): sourced, not run.
# shellcheck shell=bash

# gpu_bundle_env SCRIPT: SGLang's environment on the device machine. The bundle's parts in
# /tmp/chunks are unpacked once per machine (tools/unpack.sh writes /tmp/gpu-env.sh) and its
# environment sourced; the repository and lab/ go on PYTHONPATH; JIT_CACHE=FILE's Triton and
# FlashInfer kernel caches are restored once per machine. Exits 3, naming SCRIPT, where it cannot.
gpu_bundle_env() {
  local script=$1 unpack
  if [[ ! -f /tmp/gpu-env.sh ]]; then
    unpack=$(find /tmp/chunks -path '*/tools/unpack.sh' -print -quit 2>/dev/null)
    [[ -n $unpack ]] || { echo "$script: no bundle to unpack: no tools/unpack.sh under /tmp/chunks and no /tmp/gpu-env.sh (carry the bundle's parts to /tmp/chunks: ../shared/gpu/README.md)" >&2; exit 3; }
    bash "$unpack" 2>&1 | tail -2 || exit 3
  fi
  # shellcheck disable=SC1091  # written by tools/unpack.sh on the device
  source /tmp/gpu-env.sh || exit 3
  export PYTHONPATH=$PWD:$PWD/lab${PYTHONPATH:+:$PYTHONPATH}
  if [[ -n ${JIT_CACHE:-} && -f $JIT_CACHE && ! -f /tmp/.jit-restored ]]; then
    tar -C "$HOME" -xzf "$JIT_CACHE" && touch /tmp/.jit-restored && echo "kernel caches restored from $JIT_CACHE"
  fi
}

# gpu_save_jit_cache WORK OUT: where SAVE_JIT_CACHE is set, the kernel caches this machine built,
# packed into WORK/jit-cache.tar.gz and sent back in OUT when under 15 MiB (a call carries 64 MiB);
# says what it did on stdout (the callers tee it into summary.txt).
gpu_save_jit_cache() {
  local work=$1 out=$2 caches size
  [[ -n ${SAVE_JIT_CACHE:-} ]] || return 0
  caches=$(cd "$HOME" && ls -d .triton/cache .cache/flashinfer .cache/tvm-ffi 2>/dev/null)
  # shellcheck disable=SC2086  # the cache folders, one word each
  if [[ -z $caches ]] || ! (cd "$HOME" && tar -czf "$work/jit-cache.tar.gz" $caches); then
    echo "jit-cache.tar.gz: NOT MADE (no kernel cache under $HOME, or tar failed)"
    return 0
  fi
  size=$(stat -c %s "$work/jit-cache.tar.gz")
  echo "jit-cache.tar.gz: $size bytes"
  if ((size < 15 * 1024 * 1024)); then cp "$work/jit-cache.tar.gz" "$out/"; fi
}

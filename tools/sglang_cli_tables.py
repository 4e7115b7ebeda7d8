"""Rebuild specgate's tables of what each SGLang release's server parser takes, from the released wheels.

    python3 tools/sglang_cli_tables.py                 # every release from 0.5.11 on that PyPI serves
                                                       # (downloads every wheel: ~300 MB; give releases to do fewer)
    python3 tools/sglang_cli_tables.py 0.5.24          # add or refresh one release
    python3 tools/sglang_cli_tables.py --wheels DIR    # use wheels already downloaded to DIR

Nothing of SGLang is installed or kept. Each wheel is downloaded with `pip download --no-deps`,
its Python files are unpacked into a temporary folder, and SGLang's own code builds its own
`sglang serve` parser there: `ServerArgs.add_cli_args(argparse.ArgumentParser())`, as
`prepare_server_args` does. The heavy dependencies it imports at module level (torch, triton,
transformers, pydantic, ...) are stood in for by inert modules, which is enough because building the
parser runs none of them; what it does run (msgspec, dill) must be installed here. It writes into
this checkout's `specgate/sglang_cli_tables/`: a specgate release ships them. Every action of
that parser is written to `specgate/sglang_cli_tables/<release>.json`: its option strings, how
many values it takes, its choices and value type, and the new flag a deprecated one names.

Choices that SGLang computes from optional packages at parse time (none in the releases read so
far) would come out empty under the stand-ins; an empty choice list is written as "any value".

This is a tool of this repository, not of the product: the product reads the tables alone
(`specgate/sglang_cli.py`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLES = ROOT / "specgate" / "sglang_cli_tables"
FIRST = (0, 5, 11)  # the oldest release specgate has run against
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def _key(version: str) -> tuple[int, ...]:
    match = _VERSION.match(version)
    return tuple(int(g) for g in match.groups() if g is not None) if match else ()


def released_versions() -> list[str]:
    """Every final release of sglang from FIRST on, as `pip index versions` lists them."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "sglang"], capture_output=True, text=True, check=True
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("Available versions:"))
    versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return sorted((v for v in versions if _VERSION.match(v) and _key(v) >= FIRST), key=_key)


def download(version: str, into: Path) -> Path:
    found = sorted(into.glob(f"sglang-{version}-*.whl"))
    if found:
        return found[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(into),
         f"sglang=={version}"],
        check=True,
    )
    return sorted(into.glob(f"sglang-{version}-*.whl"))[0]


def unpack_python(wheel: Path, into: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("sglang/") and name.endswith(".py") and "/multimodal_gen/" not in name:
                zf.extract(name, into)


# --- run in a subprocess, one per release, over the unpacked sources --------------------------------
_STUB_DENY_PARTS = ("npu", "hpu", "musa", "habana", "mlx", "ascend", "xpu", "ipex", "intel")
_ALWAYS_STOOD_IN = frozenset({"pydantic", "transformers", "torch", "triton", "numpy"})
_ABSENT_ATTRS = frozenset({"npu", "xpu", "hpu", "musa", "mlu", "mps"})  # torch.<backend>: probed with hasattr


def _dump(source: str) -> dict:
    """The parser SGLang's code builds from `source`, as a table. Imports nothing of specgate."""
    import abc
    import importlib.abc
    import importlib.machinery
    import os
    import types

    class InertMeta(abc.ABCMeta):  # ABCMeta's subclass: bases (InertBase, ABC) do not conflict
        def __getattr__(cls, name: str):
            if name.startswith("__"):
                raise AttributeError(name)
            return Inert(f"{cls.__name__}.{name}")

    class InertBase(metaclass=InertMeta):
        """What a class deriving from a stood-in class derives from instead (keywords and all)."""

        def __init_subclass__(cls, **kwargs):
            pass

        def __init__(self, *args, **kwargs):
            pass

    class Inert:
        """Any attribute, call, index or arithmetic of a stood-in module: itself, and falsy."""

        def __init__(self, name: str) -> None:
            self._name = name

        def __getattr__(self, name: str):
            if name == "__version__":
                return "99.0.0"
            if name == "backend":  # triton's target, read as a device name at import
                return "cuda"
            if name in _ABSENT_ATTRS or (name.startswith("__") and name != "__call__"):
                raise AttributeError(name)
            return Inert(f"{self._name}.{name}")

        def __call__(self, *a, **k):
            return Inert(f"{self._name}()")

        def __mro_entries__(self, bases):
            return () if InertBase in bases else (InertBase,)

        def __iter__(self):
            return iter(())

        def __bool__(self):
            return False

        def __int__(self):
            return 0

        __index__ = __int__

        def __float__(self):
            return 0.0

        def __str__(self):
            return self._name

        def __lt__(self, other):
            return False

        __gt__ = __le__ = __ge__ = __lt__

        def __add__(self, other):
            return self

        __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __or__ = __ror__ = __add__

        def __hash__(self):
            return hash(self._name)

        def __eq__(self, other):
            return other is self

        def __len__(self):
            return 0

        def __contains__(self, item):
            return False

        def __getitem__(self, item):
            return self

        def __setitem__(self, item, value):
            pass

        __delitem__ = __setitem__

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class InertModule(types.ModuleType):
        __path__: list[str] = []

        def __getattr__(self, name: str):
            if name == "__version__":
                return "99.0.0"
            if name in _ABSENT_ATTRS or name.startswith("__"):
                raise AttributeError(name)
            return Inert(f"{self.__name__}.{name}")

    class StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """Last on the meta path: a module nothing else finds (and not SGLang's own) is inert."""

        def find_spec(self, name, path, target=None):
            top = name.split(".")[0]
            if top == "sglang" or any(part in top for part in _STUB_DENY_PARTS):
                return None
            return importlib.machinery.ModuleSpec(name, self, is_package=True)

        def create_module(self, spec):
            return InertModule(spec.name)

        def exec_module(self, module):
            pass

    class StandInFirst(StandIn):
        """Before every other finder: packages installed here whose models would choke on stood-in types."""

        def find_spec(self, name, path, target=None):
            return super().find_spec(name, path, target) if name.split(".")[0] in _ALWAYS_STOOD_IN else None

    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    sys.path.insert(0, source)
    sys.meta_path.insert(0, StandInFirst())
    sys.meta_path.append(StandIn())
    for package in ("sglang", "sglang.srt"):  # their __init__ patch libraries and pick a platform: not needed
        module = types.ModuleType(package)
        module.__path__ = [os.path.join(source, *package.split("."))]
        sys.modules[package] = module
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    actions = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        choices = action.choices
        if choices is not None:
            choices = sorted(str(c) for c in choices) if all(isinstance(c, (str, int, float)) for c in choices) else None
        kind = type(action).__name__
        takes = action.nargs
        if takes is None:
            takes = 1
        entry = {
            "flags": list(action.option_strings),
            "dest": action.dest,
            "nargs": takes,
            "type": action.type.__name__ if action.type in (int, float) else "str",
        }
        if choices:
            entry["choices"] = choices
        if action.required:
            entry["required"] = True
        new_flag = getattr(action, "new_flag", None) or getattr(action, "_new_flag", None)
        if kind.startswith("Deprecated") or new_flag:
            entry["deprecated"] = str(new_flag) if new_flag else True
        actions.append(entry)
    return {"prog": parser.prog, "allow_abbrev": parser.allow_abbrev, "actions": actions}


def table_for(version: str, wheel: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        unpack_python(wheel, Path(tmp))
        done = subprocess.run(
            [sys.executable, __file__, "--dump", tmp], capture_output=True, text=True, timeout=600
        )
    if done.returncode != 0:
        raise SystemExit(f"sglang {version}: its parser could not be built here:\n{done.stderr[-3000:]}")
    dumped = json.loads(done.stdout)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return {"release": version, "wheel": wheel.name, "sha256": digest, **dumped}


def write_table(table: dict) -> Path:
    """One action a line, so a release's diff against the last reads as the flags that changed."""
    TABLES.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in table.items() if k != "actions"}
    lines = [json.dumps(a, sort_keys=True) for a in table["actions"]]
    text = "{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
    text += '  "actions": [\n    ' + ",\n    ".join(lines) + "\n  ]\n}\n"
    path = TABLES / f"{table['release']}.json"
    path.write_text(text)
    return path


def main(argv: list[str]) -> int:
    if argv[:1] == ["--dump"]:
        print(json.dumps(_dump(argv[1]), default=lambda o: f"<unknown {o}>"))
        return 0
    cli = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0]
        + " Without releases it downloads every wheel from 0.5.11 on (about 300 MB)."
    )
    cli.add_argument("versions", nargs="*", help="releases to (re)build; default: every release from 0.5.11 on")
    cli.add_argument("--wheels", type=Path, help="a folder of downloaded wheels (default: a temporary one)")
    args = cli.parse_args(argv)
    versions = args.versions or released_versions()
    with tempfile.TemporaryDirectory() as tmp:
        wheels = args.wheels or Path(tmp)
        wheels.mkdir(parents=True, exist_ok=True)
        for version in versions:
            table = table_for(version, download(version, wheels))
            print(f"{write_table(table).relative_to(ROOT)}: {len(table['actions'])} options")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

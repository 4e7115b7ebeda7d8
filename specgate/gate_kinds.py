"""Gate kinds: one object per kind says what its gates are declared as, which gates a deployment
asks of it, which servers each needs, how `specgate check` describes it and how one is decided.

A kind is one module of `specgate.verdicts` defining `KIND`, an instance of a `GateKind`
subclass, and its name in `KIND_MODULES`. Everything else reads the kinds from here: the
deployment parser (its `[[gates.<table>]]` entries), the plugin (one test per kind, parametrized
by the kind's planned gates, and the count of gates a complete run judges), the NOT RUN rows,
the judge (`Judge.decide`), the vacuity warnings, `specgate check` and the JSON Schema.
"""

from __future__ import annotations

import importlib
import re
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from specgate.errors import DeploymentError, GateKindError, SpecgateError

if TYPE_CHECKING:
    from specgate.deployment import Deployment, ServerConfig, Workload
    from specgate.tomlcheck import Table

# The modules of specgate.verdicts that define the kinds, in the order their gates are listed
# (deployment errors, the check, the report's gate table). Named, not imported, here: the kinds
# judge with what the layers above the deployment provide, and the deployment parser reads their
# declarations through this list, as pytest's core loads its built-in plugins by name.
KIND_MODULES = ("beats_gate", "accept_gate", "regression_gate", "ab_gate")
# The [gates] keys that are settings, not a kind's table (deployment._parse_gate_settings reads them).
GATE_SETTINGS = frozenset(
    {"tolerance", "confidence", "sample_batch", "uncompared", "between_boot", "detect", "against_stored"}
)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# A gate's test id: what `-k` and a node id can select (no brackets, spaces, "::" or non-ASCII).
_TEST_ID = re.compile(r"^[A-Za-z0-9_.+-]+$")


@dataclass(frozen=True)
class PlannedGate:
    """One gate a deployment asks for: its test's parameter, its verdict's name and its NOT RUN row."""

    kind: str  # the GateKind's name, which opens the verdict's name
    name: str  # the verdict's gate name: "<kind>:…", e.g. "beats:eagle3-decode-beats-baseline"
    config: str  # the config it judges
    needs: tuple[str, ...]  # the configs whose servers must serve for it to be judged
    test_id: str  # its id in the gate test's name (`-k` selects it)
    spec: Any  # what the kind's `decide` reads: its declaration, or what the kind plans from the configs
    # Decided on decode timing across boots (not on counts): the report says which noise its
    # interval holds, and a baseline update may store figures past its failure (a verdict on speed).
    timing: bool = False
    context: int = 0  # the context bucket it judges (its prompt tokens); 0: the short workload
    # The concurrency it judges at: its verdict's speed row is that concurrency's alone (the
    # verdict carries it, figures["concurrency"]), and only a gate at 1 has context buckets' versions.
    concurrency: int = 1


class GateKind(ABC):
    """A kind of gate. Subclasses set the class attributes and implement `planned` and `decide`."""

    name: ClassVar[str]  # opens its verdicts' names ("beats" -> "beats:…")
    test: ClassVar[str]  # its gate test's function name under tests/gate (kept stable for `-k`)
    # The `[[gates.<table>]]` array its gates are declared in; None for a kind the configs imply.
    table: ClassVar[str | None] = None
    # One `[[gates.<table>]]` entry the JSON Schema generator parses to learn its fields; "{speculative}"
    # and "{reference}" are filled with a deployment's config names.
    example: ClassVar[dict[str, Any] | None] = None

    def parse(self, g: Table, configs: dict[str, ServerConfig], workload: Workload) -> Any:
        """One `[[gates.<table>]]` entry, checked: raise `g.error(field, why)` for what is wrong."""
        raise NotImplementedError(f"gate kind {self.name!r} declares table {self.table!r} but parses nothing")

    @abstractmethod
    def planned(self, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
        """The gates of this kind the deployment asks for; `unbooted` configs are not measured
        this run (a reference taken from the stored baseline) and have no gate of their own."""

    @abstractmethod
    def decide(self, judge: Any, gate: PlannedGate) -> Any:
        """The gate's verdict (`specgate.verdicts.gates.Verdict`), named as `gate` and of its config;
        the judge (`specgate.verdicts.judge.Judge`) measures what it asks and keeps the verdict."""

    def describe(self, dep: Deployment) -> list[str]:
        """`specgate check`'s lines for this kind's gates."""
        return []

    def vacuities(self, dep: Deployment) -> list[Any]:
        """Thresholds of the deployment under which a gate of this kind cannot fail
        (`specgate.verdicts.vacuity.Vacuity`)."""
        return []


@cache
def kinds() -> tuple[GateKind, ...]:
    """Every gate kind, in KIND_MODULES's order, each checked (GateKindError names its module)."""
    found: dict[str, GateKind] = {}
    for module in KIND_MODULES:
        where = f"specgate/verdicts/{module}.py (named in specgate/gate_kinds.py KIND_MODULES)"
        try:
            loaded = importlib.import_module(f"specgate.verdicts.{module}")
        except (Exception, SystemExit) as exc:  # a kind's module that cannot load names itself, not a traceback
            raise GateKindError(f"{where} cannot be imported: {type(exc).__name__}: {exc}") from exc
        kind = getattr(loaded, "KIND", None)
        if isinstance(kind, type) and issubclass(kind, GateKind):
            raise GateKindError(f"{where}: KIND is the class {kind.__name__}; expected an instance: KIND = {kind.__name__}()")
        if kind is None:
            raise GateKindError(f"{where} defines no KIND (an instance of a GateKind subclass)")
        if not isinstance(kind, GateKind):
            raise GateKindError(f"{where}: KIND is a {type(kind).__name__}, not an instance of a GateKind subclass")
        if problems := _problems(kind):
            raise GateKindError(f"{where}: {problems[0]}")
        for other_module, other in found.items():
            for attribute in ("name", "test", "table"):
                mine = getattr(kind, attribute)
                if mine is not None and mine == getattr(other, attribute):
                    raise GateKindError(
                        f"{where} and specgate/verdicts/{other_module}.py are both gate kinds with {attribute} {mine!r}: "
                        "each kind's name, test and table are its own"
                    )
        found[module] = kind
    return tuple(found.values())


def _problems(kind: GateKind) -> list[str]:
    out = []
    if not isinstance(getattr(kind, "name", None), str) or not _NAME.match(kind.name):
        out.append(f"its name {getattr(kind, 'name', None)!r} must be lower case letters, digits and '_'")
    test = getattr(kind, "test", None)
    if not isinstance(test, str) or not re.match(r"^test_\w+$", test):
        out.append(f"its test {test!r} must be a name starting 'test_' (pytest collects no other)")
    table = kind.table
    if table is not None:
        if not isinstance(table, str) or not _NAME.match(table):
            out.append(f"its table {table!r} must be lower case letters, digits and '_'")
        elif table in GATE_SETTINGS:
            out.append(f"its table {table!r} is a [gates] setting, not a table of gates; have another name")
        if kind.example is None:
            out.append(f"it declares table {table!r} but no example (the JSON Schema learns the table's fields from it)")
        if type(kind).parse is GateKind.parse:
            out.append(f"it declares table {table!r} but does not define parse")
    return out


def where(kind: GateKind) -> str:
    """A kind as messages name it: its name and its module's file."""
    return f"gate kind {kind.name!r} ({type(kind).__module__.replace('.', '/')}.py)"


@contextmanager
def calling(kind: GateKind, what: str) -> Iterator[None]:
    """A kind's method raising anything but specgate's own errors is a defect of the kind, named."""
    try:
        yield
    except SpecgateError:
        raise
    except Exception as exc:
        raise GateKindError(f"{where(kind)} raised in {what}: {type(exc).__name__}: {exc}") from exc


def kind_named(name: str) -> GateKind:
    return next(k for k in kinds() if k.name == name)


def kind_of_test(test: str) -> GateKind | None:
    return next((k for k in kinds() if k.test == test), None)


def declared_kinds() -> tuple[GateKind, ...]:
    """The kinds declared in `[[gates.<table>]]` arrays."""
    return tuple(k for k in kinds() if k.table is not None)


# What each kind planned for a deployment (by identity) and an unbooted set: asked once and kept,
# so the gate tests pytest parametrizes, the NOT RUN rows and the judge read one answer. A kind
# whose answer moved between calls lost a gate between planning and judging. The kind is kept in
# the entry (its id stays its own); an entry goes with its deployment.
_answers: dict[tuple[int, int, frozenset[str]], tuple[GateKind, list[PlannedGate]]] = {}


def _forget(dep_id: int) -> None:
    for key in [k for k in _answers if k[1] == dep_id]:
        del _answers[key]


def planned_of(kind: GateKind, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
    """`kind.planned`, asked once per deployment and unbooted set (`_answers`), each gate checked:
    a kind's own, named "<kind>:…", of configs the deployment has."""
    key = (id(kind), id(dep), frozenset(unbooted))
    if key in _answers:
        return list(_answers[key][1])
    gates = _asked(kind, dep, unbooted)
    if not any(k[1] == id(dep) for k in _answers):
        weakref.finalize(dep, _forget, id(dep))
    _answers[key] = (kind, gates)
    return list(gates)


def _asked(kind: GateKind, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
    """`kind.planned` asked now, its gates checked."""
    with calling(kind, "planned"):
        gates = kind.planned(dep, unbooted)
    if not isinstance(gates, list):
        raise GateKindError(f"{where(kind)}: planned must return a list of PlannedGate, not {gates!r:.80}")
    for gate in gates:
        if not isinstance(gate, PlannedGate):
            raise GateKindError(f"{where(kind)}: planned returned {type(gate).__name__}, not a PlannedGate")
        if gate.kind != kind.name or not gate.name.startswith(f"{kind.name}:"):
            raise GateKindError(
                f"{where(kind)}: planned gate {gate.name!r} (kind {gate.kind!r}) must be of kind {kind.name!r} "
                f"and be named {kind.name + ':…'!r}"
            )
        unknown = [c for c in (gate.config, *gate.needs) if c not in dep.configs]
        if unknown:
            raise GateKindError(f"{where(kind)}: planned gate {gate.name!r} names configs not in the deployment: {unknown}")
        if type(gate.concurrency) is not int or gate.concurrency < 1:
            raise GateKindError(
                f"{where(kind)}: planned gate {gate.name!r} has concurrency {gate.concurrency!r}: expected an integer "
                ">= 1, the concurrency it judges at (its speed row's)"
            )
        if gate.name == f"{kind.name}:" or not isinstance(gate.test_id, str) or not _TEST_ID.match(gate.test_id):
            raise GateKindError(
                f"{where(kind)}: planned gate {gate.name!r} has test id {gate.test_id!r}: a gate needs a name after "
                f"{kind.name + ':'!r} and an id of ASCII letters, digits and '_.+-' (what -k and a node id select)"
            )
    return gates


def run_gates(kind: GateKind, dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
    """The gates of `kind` a run judges: those the kind planned, then the same planned for each
    context bucket (`workload.context_buckets`), judged at concurrency 1 on the bucket's requests
    and named with the bucket ("beats:…@8K"). A gate declared at another concurrency has no
    bucket version: buckets are measured single-stream."""
    from specgate.deployment import bucket_label, bucket_test_id, bucket_view

    out = planned_of(kind, dep, unbooted)
    for tokens in dep.workload.context_buckets:
        label = bucket_label(tokens)
        for gate in planned_of(kind, bucket_view(dep, tokens), unbooted):
            if not _has_bucket_version(gate):
                continue
            out.append(
                replace(gate, name=f"{gate.name}@{label}", test_id=bucket_test_id(gate.test_id, tokens), context=tokens)
            )
    return out


def _has_bucket_version(gate: PlannedGate) -> bool:
    """Whether `gate` is judged in the context buckets too: buckets are measured single-stream,
    so a gate declared at another concurrency is judged on the short workload alone."""
    return gate.concurrency == 1


# Why a gate has no bucket version, as `check` and the report both say it beside the gates' names.
UNBUCKETED_WHY = "declared at another concurrency; buckets are single-stream"


def unbucketed_gates(dep: Deployment) -> list[str]:
    """The names of the declared gates that no context bucket judges (see _has_bucket_version):
    `check` and the report name them, so that a bucket is never believed gated by a gate that skips it."""
    from specgate.deployment import bucket_view

    if not dep.workload.context_buckets:
        return []
    view = bucket_view(dep, dep.workload.context_buckets[0])
    return [g.name for kind in kinds() for g in planned_of(kind, view, set()) if not _has_bucket_version(g)]


def planned_gates(dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
    """Every gate of the run, kind by kind (context buckets' included: run_gates)."""
    return [gate for kind in kinds() for gate in run_gates(kind, dep, unbooted)]


def timing_gates(dep: Deployment) -> set[str]:
    """The names of the gates decided on decode timing across boots (`PlannedGate.timing`)."""
    return {gate.name for gate in planned_gates(dep, set()) if gate.timing}


def check_planned(dep: Deployment) -> None:
    """Two gates of one name would share a verdict and a test id: the second is refused, by its table."""
    for kind in kinds():
        named: dict[str, PlannedGate] = {}
        planned = planned_of(kind, dep, set())
        again = _asked(kind, dep, set())  # asked afresh: the answer must follow from the deployment alone
        if [_identity(g) for g in again] != [_identity(g) for g in planned]:
            raise GateKindError(
                f"{where(kind)}: planned answered differently when asked again for the same deployment "
                f"({[g.name for g in planned]} then {[g.name for g in again]}): its gates must follow from the "
                "deployment alone, or a gate the run planned is lost before it is judged"
            )
        for gate in planned:
            for said in (gate.name, gate.test_id):
                first = named.get(said)
                if first is not None and kind.table is None:  # planned from the configs: the kind's own doing
                    raise GateKindError(f"{where(kind)}: planned two gates both {said!r}")
                if first is not None:
                    entries = dep.gates.of(kind.table or "")
                    at = [i for i, e in enumerate(entries) if e is first.spec or e is gate.spec]
                    raise DeploymentError(
                        dep.path,
                        f"gates.{kind.table}[{at[-1]}]" if len(at) == 2 else f"gates.{kind.table}",
                        f"names the same gate as gates.{kind.table}[{at[0]}], {said!r}: the same comparison (its configs "
                        "and concurrency) under another bar is one gate, so keep the stricter; or rename a config "
                        "whose name makes two gates read alike",
                    )
                named[said] = gate
        # What `specgate check` and the vacuity warnings will ask of the kind, asked once now.
        _described(kind, dep)
        with calling(kind, "vacuities"):
            found = kind.vacuities(dep)
        if not isinstance(found, list) or not all(hasattr(v, "field") and hasattr(v, "why") for v in found):
            raise GateKindError(f"{where(kind)}: vacuities must return a list of Vacuity, not {found!r:.80}")


def _identity(gate: PlannedGate) -> tuple[Any, ...]:
    """What makes a planned gate the gate it is (its spec aside: a kind may build it anew each time)."""
    return (gate.kind, gate.name, gate.config, gate.needs, gate.test_id, gate.timing, gate.concurrency)


def _described(kind: GateKind, dep: Deployment) -> list[str]:
    with calling(kind, "describe"):
        lines = kind.describe(dep)
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise GateKindError(f"{where(kind)}: describe must return a list of lines (str), not {lines!r:.80}")
    return lines


def descriptions(dep: Deployment) -> list[str]:
    """`specgate check`'s lines of every kind."""
    return [line for kind in kinds() for line in _described(kind, dep)]

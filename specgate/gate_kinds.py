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
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from specgate.deployment import Deployment, ServerConfig, Workload
    from specgate.tomlcheck import Table

# The modules of specgate.verdicts that define the kinds, in the order their gates are listed
# (deployment errors, the check, the report's gate table). Named, not imported, here: the kinds
# judge with what the layers above the deployment provide, and the deployment parser reads their
# declarations through this list, as pytest's core loads its built-in plugins by name.
KIND_MODULES = ("beats_gate", "accept_gate", "regression_gate")


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
        """The gate's verdict (`specgate.verdicts.gates.Verdict`), recorded by the judge
        (`judge._record`); the judge (`specgate.verdicts.judge.Judge`) measures what it asks."""

    def describe(self, dep: Deployment) -> list[str]:
        """`specgate check`'s lines for this kind's gates."""
        return []

    def vacuities(self, dep: Deployment) -> list[Any]:
        """Thresholds of the deployment under which a gate of this kind cannot fail
        (`specgate.verdicts.vacuity.Vacuity`)."""
        return []


@cache
def kinds() -> tuple[GateKind, ...]:
    """Every gate kind, in KIND_MODULES's order."""
    found = []
    for module in KIND_MODULES:
        kind = getattr(importlib.import_module(f"specgate.verdicts.{module}"), "KIND", None)
        if not isinstance(kind, GateKind):
            raise TypeError(f"specgate.verdicts.{module} is listed in KIND_MODULES but defines no KIND (a GateKind)")
        found.append(kind)
    names = [k.name for k in found]
    if len(set(names)) != len(names):
        raise TypeError(f"two gate kinds share a name: {names}")
    return tuple(found)


def kind_named(name: str) -> GateKind:
    return next(k for k in kinds() if k.name == name)


def kind_of_test(test: str) -> GateKind | None:
    return next((k for k in kinds() if k.test == test), None)


def declared_kinds() -> tuple[GateKind, ...]:
    """The kinds declared in `[[gates.<table>]]` arrays."""
    return tuple(k for k in kinds() if k.table is not None)


def planned_gates(dep: Deployment, unbooted: set[str]) -> list[PlannedGate]:
    """Every gate of the run, kind by kind."""
    return [gate for kind in kinds() for gate in kind.planned(dep, unbooted)]

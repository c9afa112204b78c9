"""A chaos schedule: a seeded random series of faults over the nodes, as plain perturbation tables.

A manifest's `[chaos]` table (docs/scenarios.md, "Chaos") asks for faults drawn at random
from `actions` - kill -9 and restart, SIGSTOP and SIGCONT, a clean stop and restart, a
partition that cuts some nodes off; each action once per round, in a shuffled order -
one after another over the load, each on a random
minority of the nodes (at most (n - 1) // 2 of them: the rest keep a majority, so the
chain goes on and finality with it), each lasting `for_s` and followed by a quiet `gap_s`
in which the victims come back. Once, at `kill_all_at_s` (default: the load's middle),
every node is killed at the same time, for `kill_all_for_s`. No fault begins in the last
`quiet_end_s` of the load: the nodes must converge on one chain while the load goes on.
`judge_resources` (default true) says whether the run's verdict judges `resources_flat`
(qmemo.scenario.invariants): a run too short for any process life to be judged turns it
off, and the runner then says the check was left out.

`schedule()` is pure: the same plan, node count and duration always give the same
faults, so a run that failed is replayed with its seed (`--set chaos.seed=N`; the runner
prints it). It returns raw perturbation tables, exactly what a manifest's
`[[perturbations]]` would hold, so the parser checks them like hand-written ones.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from qmemo.errors import ConfigError
from qmemo.scenario import fields

CHAOS_ACTIONS = ("kill", "pause", "restart", "partition")


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    seed: int
    actions: tuple[str, ...]            # some of CHAOS_ACTIONS: each once per round, rounds shuffled
    for_s: tuple[float, float]          # a fault lasts between these (uniform)
    gap_s: tuple[float, float]          # quiet after a fault ends, before the next begins
    start_s: float                      # the first fault begins at or after this
    quiet_end_s: float                  # no fault begins in the load's last quiet_end_s
    kill_all_at_s: float | None         # the one kill of every node (None: the load's middle)
    kill_all_for_s: float
    # resources_flat in the verdict. False only for a run too short to judge any process
    # life (which would fail it): the check is left out, and the runner says so.
    judge_resources: bool


def minority(nodes: int) -> int:
    """The most nodes a fault may take while the others keep a strict majority."""
    return (nodes - 1) // 2


def schedule(plan: ChaosPlan, nodes: int, duration_s: float) -> list[dict[str, Any]]:
    """The faults of `plan` over `nodes` nodes and a load of `duration_s`, in time order:
    `[[perturbations]]` tables (at_s, action, nodes or groups, for_s). Faults never
    overlap, so at most a minority is hit at any moment, except by the one kill of all."""
    rng = random.Random(plan.seed)
    last_start_s = duration_s - plan.quiet_end_s
    kill_all_s = duration_s / 2 if plan.kill_all_at_s is None else plan.kill_all_at_s
    faults: list[dict[str, Any]] = []
    kill_all_done = kill_all_s >= last_start_s      # outside the window: not scheduled (the parser says so)
    t = plan.start_s
    bag: list[str] = []
    while t < last_start_s:
        length = round(rng.uniform(*plan.for_s), 1)
        gap = round(rng.uniform(*plan.gap_s), 1)
        if not kill_all_done and t + length + gap > kill_all_s:
            # The kill of every node comes next, alone: the fault drawn would run into it.
            faults.append({"at_s": round(kill_all_s, 1), "action": "kill", "nodes": list(range(nodes)),
                           "for_s": plan.kill_all_for_s})
            kill_all_done = True
            t = kill_all_s + plan.kill_all_for_s + gap
            continue
        if not bag:         # every action once per round, in a random order: none is left out by chance
            bag = rng.sample(plan.actions, len(plan.actions))
        action = bag.pop()
        victims = sorted(rng.sample(range(nodes), rng.randint(1, minority(nodes))))
        fault: dict[str, Any] = {"at_s": round(t, 1), "action": action, "for_s": length}
        if action == "partition":
            fault["groups"] = [victims, [i for i in range(nodes) if i not in victims]]
        else:
            fault["nodes"] = victims
        faults.append(fault)
        t += length + gap
    return faults


def parse_chaos(table: dict[str, Any], nodes: int, duration_s: float) -> ChaosPlan:
    """The `[chaos]` table, checked: every error names its key."""
    where = "chaos."
    fields.unknown(table, where, {"seed", "actions", "for_s", "gap_s", "start_s", "quiet_end_s", "kill_all_at_s",
                                  "kill_all_for_s", "judge_resources"})
    actions = table.get("actions", list(CHAOS_ACTIONS))
    if not isinstance(actions, list) or not actions or not all(a in CHAOS_ACTIONS for a in actions):
        raise ConfigError(f"{where}actions: must list some of {', '.join(CHAOS_ACTIONS)}, got {actions!r}")
    if minority(nodes) < 1:
        raise ConfigError(f"{where}: chaos needs at least 3 nodes (a fault takes a minority), got {nodes}")

    def span(key: str, default: list[float]) -> tuple[float, float]:
        value = table.get(key, default)
        if not (isinstance(value, list) and len(value) == 2 and
                all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
                and 0 < value[0] <= value[1]):
            raise ConfigError(f"{where}{key}: must be [least, most] seconds, 0 < least <= most, got {value!r}")
        return float(value[0]), float(value[1])

    plan = ChaosPlan(seed=fields.integer(table, "seed", where, 1), actions=tuple(actions),
                     for_s=span("for_s", [5.0, 20.0]), gap_s=span("gap_s", [15.0, 30.0]),
                     start_s=fields.number(table, "start_s", where, 10.0),
                     quiet_end_s=fields.number(table, "quiet_end_s", where, 60.0),
                     kill_all_at_s=fields.optional(table, "kill_all_at_s", where),
                     kill_all_for_s=fields.number(table, "kill_all_for_s", where, 5.0, strict=True),
                     judge_resources=fields.boolean(table, "judge_resources", where, default=True))
    kill_all_s = duration_s / 2 if plan.kill_all_at_s is None else plan.kill_all_at_s
    if not plan.start_s <= kill_all_s < duration_s - plan.quiet_end_s:
        raise ConfigError(f"{where}kill_all_at_s: {kill_all_s:g} s must fall between start_s ({plan.start_s:g}) "
                          f"and the load's last fault-free {plan.quiet_end_s:g} s (the load lasts {duration_s:g} s)")
    return plan

"""The headline of a devnet run, defined once: where it saturates and how much of C survives.

Four figures answer the question qMEMO asks, and the report's first screen, the README's
results block and the dashboard all take them from here:

- **committed TPS at saturation**: the committed rate of the highest sweep stage that no
  verdict limited (qmemo.load.summary: 90% of the offered rate committed, p99 inclusion
  within three block intervals, the generator on its schedule), with the stage above it
  that was limited and why. A run that was never limited has no saturation: "held at X
  TPS, saturation not reached", and its rate is a lower bound that draws no verdict. A
  stage above whose only verdict is the generator's says nothing about the chain either.
- **survival against C** (`survival_against_c`): that committed rate over the single-core
  verify rate of the C code the nodes actually run - the fast verifier's with its key
  cached when they run it, else liboqs's - from the same C baseline. 1.0 would mean the
  whole devnet (every node verifying every transaction, the generator beside them, on
  this machine's cores) commits as fast as one core verifies signatures in C.
- **p99 intended -> final** at that stage (counted from when the schedule meant to send).
- **the verifier's timing**: constant-time or variable-time hash-to-point, because a
  verify speed compared without it misleads (docs/methodology.md, "The headline").

Every figure is a `Cited`: its value with the file and the JSON key it was read from,
so a reader (and tests/integration/test_report_headline.py) can check the file holds it.
Pure: from records already read (a DevnetRun, a node-stages file, a C baseline); it opens
no file, reads no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qmemo.bench.c_baseline import CBaseline
from qmemo.analysis.devnet import DevnetRun, SweepPoint, held_and_limit, limited
from qmemo.errors import ConfigError, UnknownScheme
from qmemo.load.node_stages import NodeStagesFile

# What a run's headline says of its saturation (one name each, used in every reader).
SATURATED = "saturated"            # a held stage, and the stage above it limited by the chain
NOT_REACHED = "not reached"        # nothing limited the run: its rate is a lower bound
GENERATOR_BOUND = "generator bound"  # the stage above was limited by the generator only
LIMITED = "limited"                # the run (or a sweep's first stage) was itself limited

# The hash-to-point each node verifier runs (qmemo node --verifier), and each C library's verify.
VERIFIER_TIMING = {"fast": "variable-time hash-to-point", "liboqs": "constant-time hash-to-point"}
LIBRARY_TIMING = {"liboqs": "constant-time (liboqs)", "libsecp256k1": "variable-time (public inputs)",
                  "libsodium": "variable-time (public inputs)"}
C_FAST = "the fast verifier with its key cached"
C_LIBOQS = "liboqs's verify"

Key = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Cited:
    """A figure and where it was read: the file and the JSON key path inside it."""

    value: float | str | bool
    source: Path
    key: Key

    @property
    def pointer(self) -> str:
        """The key as a reader types it: `rows[3].committed_tps`."""
        out = ""
        for part in self.key:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out


@dataclass(frozen=True, slots=True)
class Limit:
    """The stage above the headline's (or the run itself, when it was limited): what it was
    offered and committed, and its verdicts in words."""

    offered_tps: Cited
    committed_tps: Cited
    why: Cited
    by_chain: bool             # throughput or latency, not only the generator's schedule
    throughput_saturated: bool


@dataclass(frozen=True, slots=True)
class CReference:
    """The C single-core verify rate the nodes are set against: their own verifier's."""

    row: str                   # C_FAST or C_LIBOQS (or the library for another scheme)
    timing: str                # "variable-time hash-to-point", ...
    verify_per_s: Cited


@dataclass(frozen=True, slots=True)
class Headline:
    run_id: str
    outcome: str               # SATURATED, NOT_REACHED, GENERATOR_BOUND or LIMITED
    offered_tps: Cited         # the headline stage's (or run's) target
    committed_tps: Cited       # ... and what it committed per second
    p99_final_ms: Cited | None  # intended -> final (committed), None when nothing committed
    limit: Limit | None        # the stage above (SATURATED, GENERATOR_BOUND) or the run (LIMITED)
    verifier: Cited | None     # the nodes' verifier, from their node-stages.json
    reference: CReference | None

    @property
    def survival(self) -> float | None:
        """Committed TPS over the C single-core rate of the nodes' verifier (see the module text)."""
        if self.reference is None:
            return None
        return survival_against_c(float(self.committed_tps.value), float(self.reference.verify_per_s.value))

    @property
    def is_capacity(self) -> bool:
        """Whether the committed rate is the chain's capacity (a verdict may be drawn from it),
        not a lower bound of it: a held stage below a stage the chain could not carry, or a
        run whose throughput itself fell short."""
        if self.outcome == SATURATED:
            return True
        return self.outcome == LIMITED and self.limit is not None and self.limit.throughput_saturated

    @property
    def timing(self) -> str:
        if self.reference is not None:
            return self.reference.timing
        verifier = str(self.verifier.value) if self.verifier else ""
        return VERIFIER_TIMING.get(verifier, "verifier not recorded")

    def citations(self) -> list[Cited]:
        """Every figure the headline states, for a reader (or a test) to check against its file."""
        found: list[Cited | None] = [self.offered_tps, self.committed_tps, self.p99_final_ms, self.verifier]
        if self.limit:
            found += [self.limit.offered_tps, self.limit.committed_tps, self.limit.why]
        if self.reference:
            found.append(self.reference.verify_per_s)
        return [c for c in found if c is not None]

    def saturation_text(self) -> str:
        """One sentence on saturation, figures rounded as the report prints them."""
        committed, offered = float(self.committed_tps.value), float(self.offered_tps.value)
        if self.outcome == SATURATED and self.limit:
            also = (" (the machine the nodes and the generator share was at its limit)"
                    if "generator fell behind" in str(self.limit.why.value) else "")
            return (f"saturates at {committed:,.0f} TPS committed (the highest stage no verdict limited, "
                    f"{offered:,.0f} offered); the next stage, {float(self.limit.offered_tps.value):,.0f} TPS "
                    f"offered, was limited: {self.limit.why.value}{also}")
        if self.outcome == GENERATOR_BOUND and self.limit:
            return (f"held at {committed:,.0f} TPS, saturation not reached: at "
                    f"{float(self.limit.offered_tps.value):,.0f} TPS offered the generator fell behind its "
                    "schedule, so the generator, not the chain, set the rate")
        if self.outcome == LIMITED and self.limit:
            return (f"limited at {offered:,.0f} TPS offered ({self.limit.why.value}), {committed:,.0f} committed: "
                    "saturation lies at or below that rate (a sweep from a lower rate finds it)")
        return f"held at {committed:,.0f} TPS, saturation not reached"

    def survival_text(self) -> str:
        survival = self.survival
        if survival is None or self.reference is None:
            return "no survival figure: " + ("the nodes' verifier was not recorded (no node-stages.json)"
                                             if self.verifier is None else "the C baseline has no rate for it")
        bound = "" if self.is_capacity else "at least "
        return (f"{bound}{survival:.3f} of one C core: {float(self.committed_tps.value):,.0f} TPS / "
                f"{float(self.reference.verify_per_s.value):,.0f} verifies/s ({self.reference.row}, "
                f"{self.reference.timing})")


def survival_against_c(committed_tps: float, c_verify_per_s: float) -> float | None:
    """The one survival figure: committed TPS / the C single-core verify rate of the nodes' verifier."""
    return committed_tps / c_verify_per_s if c_verify_per_s > 0 else None


# --- building it ---------------------------------------------------------------------------

def headline(run: DevnetRun, stages: NodeStagesFile | None = None, stages_source: Path | None = None,
             baseline: CBaseline | None = None) -> Headline:
    """The run's headline. `stages` is the node-stages.json beside the run's summary (the
    headline stage's, for a sweep) at `stages_source`: it names the nodes' verifier."""
    verifier, scheme = _verifier(stages, stages_source)
    # No verifier recorded, no survival: never a guessed verifier's C rate in its place.
    reference = c_reference(baseline, scheme, str(verifier.value)) if baseline and verifier else None
    if run.sweep and run.sweep_source is not None:
        return _sweep_headline(run, run.sweep_source, verifier, reference)
    return _run_headline(run, verifier, reference)


def _run_headline(run: DevnetRun, verifier: Cited | None, reference: CReference | None) -> Headline:
    source = run.source
    p99 = run.latency_ms.get("intended_to_committed", {}).get("p99")
    p99_cited = Cited(p99, source, ("latency_ms", "intended_to_committed", "percentiles_ms", "p99")) \
        if p99 is not None else None
    offered, committed = Cited(run.target_tps, source, ("target_tps",)), Cited(run.committed_tps, source, ("committed_tps",))
    if not limited(run):
        return Headline(run.run_id, NOT_REACHED, offered, committed, p99_cited, None, verifier, reference)
    limit = Limit(offered, committed, Cited(run.why, source, ("why",)),
                  run.throughput_saturated or run.latency_saturated, run.throughput_saturated)
    return Headline(run.run_id, LIMITED if limit.by_chain else GENERATOR_BOUND, offered, committed, p99_cited,
                    limit, verifier, reference)


def _sweep_headline(run: DevnetRun, sweep_file: Path, verifier: Cited | None,
                    reference: CReference | None) -> Headline:
    top, above = held_and_limit(run.sweep)

    def row(point: SweepPoint, key: str, value: float | str | None) -> Cited | None:
        return None if value is None else Cited(value, sweep_file, ("rows", point.index, key))

    def cited(point: SweepPoint, key: str, value: float | str) -> Cited:
        return Cited(value, sweep_file, ("rows", point.index, key))

    limit = None
    if above is not None:
        limit = Limit(cited(above, "target_tps", above.target_tps),
                      cited(above, "committed_tps", above.committed_tps),
                      cited(above, "why", above.why), above.throughput_saturated or above.latency_saturated,
                      above.throughput_saturated)
    stage = top if top is not None else above
    if stage is None:       # load_devnet_run refuses a sweep without stages; a hand-made run may have none
        raise ConfigError(f"{sweep_file} holds no stage to take a headline from")
    if limit is None:
        outcome = NOT_REACHED
    elif not limit.by_chain:
        outcome = GENERATOR_BOUND
    else:
        outcome = SATURATED if top is not None else LIMITED
    return Headline(run.run_id, outcome, cited(stage, "target_tps", stage.target_tps),
                    cited(stage, "committed_tps", stage.committed_tps), row(stage, "p99_ms", stage.p99_ms),
                    limit, verifier, reference)


def _verifier(stages: NodeStagesFile | None, source: Path | None) -> tuple[Cited | None, str | None]:
    """The nodes' verifier (cited to the first node that names one) and scheme; a file whose
    nodes ran different verifiers has no one verifier to set against C."""
    if stages is None or source is None or not stages.nodes:
        return None, None
    verifiers = {node.verifier for node in stages.nodes}
    scheme = stages.nodes[0].scheme
    if len(verifiers) != 1 or None in verifiers:
        return None, scheme
    return Cited(stages.nodes[0].verifier, source, ("nodes", 0, "verifier")), scheme   # type: ignore[arg-type]


def c_reference(baseline: CBaseline, scheme: str | None, verifier: str | None) -> CReference | None:
    """The C single-core verify rate of the verifier the nodes ran, cited into the baseline's
    summary.json: the fast verifier's with its key cached (nodes on `fast`, when the run
    measured it), else the scheme's own library's (liboqs for Falcon on `liboqs`). None
    when the baseline does not have that rate: never another verifier's in its place."""
    scheme = scheme or "Falcon-512"
    summary, path = baseline.summary, baseline.path
    if verifier == "fast":
        for i, row in enumerate(summary.verify_implementations or ()):
            if row is baseline.fast_verifier(scheme) and row.ops_per_s:
                return CReference(C_FAST, VERIFIER_TIMING["fast"],
                                  Cited(row.ops_per_s, path, ("verify_implementations", i, "ops_per_s")))
        return None
    try:
        scheme_row = baseline.scheme(scheme)
    except UnknownScheme:
        return None
    timing = VERIFIER_TIMING["liboqs"] if scheme.startswith("Falcon") else \
        LIBRARY_TIMING.get(scheme_row.library, f"{scheme_row.library} (timing not recorded)")
    label = C_LIBOQS if scheme_row.library == "liboqs" else scheme_row.library
    entry = summary.single_core_verify.get(scheme_row.scheme)
    if entry is not None and entry.statistical is not None:
        return CReference(label, timing, Cited(entry.statistical.ops_per_s, path,
                                               ("single_core_verify", scheme_row.scheme, "ops_per_s")))
    key = next((k for k, v in baseline.schemes.items() if v is scheme_row), None)
    if key is None or scheme_row.verify_per_s is None:
        return None
    return CReference(label, timing, Cited(scheme_row.verify_per_s, path, ("schemes", key, "verify_per_s")))

"""The report's section on the Python side's own benchmarks: `qmemo bench core` (what the
chain core costs per transaction next to verification) and `qmemo bench node` (one
node's admission rate against the C single-core verify rate).

Laid out from the result files' figures (qmemo.analysis.py_bench), each table naming its
file; a benchmark that has not run is said so, with the command that runs it.
"""

from __future__ import annotations

from qmemo.analysis.markdown import Section, num, percent, source_note, table, times
from qmemo.analysis.py_bench import CORE_STEPS, CoreBench, NodeBench, NodeHeadline, PyBenches
from qmemo.analysis.results import display_path

TITLE = "Python chain core and node"


def _core(core: CoreBench | None) -> list[str]:
    if core is None:
        return ["### Chain core per transaction\n\nNo `qmemo bench core` result in results/: "
                "run `.venv/bin/qmemo bench core` (or name one with `--core-bench FILE`)."]
    names = [s.scheme for s in core.schemes]
    rows = [(label.strip(), *(num(s.median_us[key], 2) for s in core.schemes)) for key, label in CORE_STEPS]
    rows.append(("transaction size (bytes)", *(num(s.transaction_bytes) for s in core.schemes)))
    rows.append(("verification's share of cold apply_block", *(percent(s.verify_share_of_cold_validation)
                                                                for s in core.schemes)))
    return [
        "### Chain core per transaction",
        f"Median microseconds per transaction over {core.repeat} timed passes on a block of {core.transactions:,} "
        "transactions, one core, in Python (\"of which\" rows are parts of the decode above them).",
        table(("step (µs per transaction)", *names), rows),
        source_note(display_path(core.source)),
    ]


def _node(node: NodeBench | None) -> list[str]:
    if node is None:
        return ["### One node's admission\n\nNo `qmemo bench node` result in results/: "
                "run `.venv/bin/qmemo bench node` (or name one with `--node-bench FILE`)."]
    rows = [(r.threads, num(r.admitted_per_s), num(r.node_cores_busy, 2), num(r.admitted_per_cpu_s),
             num(r.node_cpu_us_per_tx, 1), percent(r.ratio_to_c_single_core, 0)) for r in node.runs]
    steps = [(step, num(us, 1)) for step, us in node.breakdown_us_per_tx.items()]
    return [
        "### One node's admission",
        f"{node.transactions:,} {node.scheme} transactions admitted over loopback HTTP by one node; "
        f"C single-core verify rate: {num(node.c_verify_per_s)}/s, {node.c_baseline_note}. "
        f"Two verify threads against one: {times(node.speedup_2_vs_1_threads, 2)}.",
        table(("verify threads", "admitted tx/s", "node CPU cores", "tx per node CPU-s", "node CPU µs/tx",
               "per CPU-s vs C 1-core"), rows),
        *_headline(node.headline),
        table(("admission step, in-process", "µs/tx"), steps),
        source_note(display_path(node.source), node.c_source or ""),
    ]


def _headline(head: NodeHeadline | None) -> list[str]:
    """The same-run ratio (the figure the node benchmark is held to) and, where the file has it,
    its ceiling in that run."""
    if head is None:
        return []
    threads = "one verify thread" if head.threads == 1 else f"{head.threads} verify threads"
    text = (f"Same run, {threads} ({head.verifier} verifier): the node admitted {num(head.ratio, 2)} of its "
            f"verifier's native-loop rate per CPU-second ({num(head.same_run_verify_per_s)} verifies/s, "
            f"`{head.reference}`).")
    if head.ceiling is not None:
        text += (f" Its ceiling in that run is {num(head.ceiling, 2)}: verify {num(head.ceiling_verify_us, 1)} µs over "
                 f"verify plus the admission kernel's native decoding and hashing ({num(head.ceiling_decode_hash_us, 1)} "
                 "µs: the signing digest and the id, without which no transaction is admitted), what a node on "
                 "this kernel doing nothing else would reach.")
    return [text]


def python_benches_section(benches: PyBenches) -> Section:
    unread = [f"Passed over (the newest of its kind, unreadable): {reason}" for reason in benches.unread]
    return Section(TITLE, "\n\n".join([*_core(benches.core), *_node(benches.node), *unread]))

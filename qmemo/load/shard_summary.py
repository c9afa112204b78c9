"""A sharded run's figures in `summary.json`: cross-shard transfers, each shard's counts, and
the invariants checked from every shard's final state.

    cross_shard  planned, committed (debited: final on the source), credited (final on the
                 destination), lost (debited, not credited by the end) and the latency from
                 the intended send to the credit (the honest one: no coordinated omission)
    shards       per shard: its nodes, planned, committed, its transfers to other shards and
                 the receipts credited to it, committed TPS, intra-shard p99, and verifies per
                 committed transaction measured on its nodes beside the model (1 + the
                 share of transfers it receives from other shards)
    invariants   supply_conserved: every shard's balances together, plus what is debited and
                 not yet credited, equal what they were before the run; credited_exactly_once:
                 every debited cross-shard transfer is credited, and every account holds
                 exactly what the run's final transactions and credits make it hold (a double
                 credit, or a debit without its transaction, shows there)

Pure: numbers in, records out (qmemo.records writes them, with the rest of the summary).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from qmemo.records import OMIT_NONE


@dataclass(frozen=True, slots=True)
class CrossShard:
    planned: int
    committed: int                    # final on the source shard: debited
    credited: int                     # its receipt credited by a final block of the destination
    lost: int                         # debited, not credited by the end of the run
    p50_ms_intended_to_credited: float | None
    p99_ms_intended_to_credited: float | None
    max_ms_intended_to_credited: float | None
    p99_ms_committed_to_credited: float | None     # from final on the source to final on the destination


@dataclass(frozen=True, slots=True)
class ShardCounts:
    shard: int
    chain_id: int
    nodes: tuple[str, ...]
    planned: int
    committed: int
    cross_planned: int                # its transfers to other shards
    credited_in: int                  # receipts of other shards' transfers credited on it
    committed_tps: float              # committed in the measured window / its length
    p99_ms_intra: float | None        # intended -> committed of its transfers within the shard
    # Signatures its nodes verified per transaction their chain committed (transactions and
    # receipts verified again; headers not counted), mean over its nodes; None: no figures.
    verifies_per_committed_tx: float | None
    modelled_verifies_per_tx: float   # the research's 1 + cross-shard share, with the share received


@dataclass(frozen=True, slots=True)
class Invariants:
    supply_conserved: bool
    credited_exactly_once: bool
    supply_before: int                # every shard's accounts (funded and validators) before the run
    supply_after: int                 # the same after it
    in_flight: int                    # amounts debited by a source shard and not (yet) credited
    not_credited: int                 # debited cross-shard transfers without a final credit
    accounts_off: int                 # accounts whose balance is not what the run's transfers make it
    # Every shard was quiet when its state was read (no transaction pending or held, no
    # receipt pooled, the last ones final): else the balances may be read mid-change.
    # None (absent) in the first sharded summaries, which did not wait for it.
    settled: bool | None = field(default=None, metadata=OMIT_NONE)

    @property
    def hold(self) -> bool:
        return self.supply_conserved and self.credited_exactly_once


@dataclass(frozen=True, slots=True)
class Transfer:
    """A planned transfer the run saw final (committed) on its source shard."""

    sender: bytes
    recipient: bytes
    amount: int
    fee: int
    cross: bool
    credited: bool        # cross: credited by a final block of its destination


def invariants(before: Mapping[bytes, int], after: Mapping[bytes, int], transfers: Iterable[Transfer],
               funded: Iterable[bytes], settled: bool = True) -> Invariants:
    """The invariants from every shard's accounts before and after (address -> balance, each
    address in its own shard; validators included), the run's final transfers, and the
    funded accounts whose balances only the run's transfers move (validators earn fees)."""
    expected = dict(before)
    in_flight = not_credited = 0
    for transfer in transfers:
        expected[transfer.sender] = expected.get(transfer.sender, 0) - transfer.amount - transfer.fee
        if not transfer.cross or transfer.credited:
            expected[transfer.recipient] = expected.get(transfer.recipient, 0) + transfer.amount
        else:
            in_flight += transfer.amount
            not_credited += 1
    off = sum(1 for address in funded if after.get(address, 0) != expected.get(address, 0))
    supply_before, supply_after = sum(before.values()), sum(after.values())
    return Invariants(supply_conserved=supply_after + in_flight == supply_before,
                      credited_exactly_once=not_credited == 0 and off == 0,
                      supply_before=supply_before, supply_after=supply_after, in_flight=in_flight,
                      not_credited=not_credited, accounts_off=off, settled=settled)

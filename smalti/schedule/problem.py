"""A collective matmul to schedule, and the orders in which its devices may visit their peers.

all_gather_matmul: every device holds an A shard [m, k] and B [k, n]; its output
[devices * m, n] is all_gather(A) @ B. At step s device `me` multiplies the shard of source
`sources(me)[s]` (its own first), fetched chunk by chunk over NVLink.

matmul_reduce_scatter: every device holds A [devices * m, k] (its K shard) and B [k, n];
device `me` outputs rows block `me` of the sum over devices of A @ B. At step s device `me`
computes the partial of block `sources(me)[s]` (its own last) and publishes it; the block's
owner pulls it over NVLink and adds it.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_GATHER_MATMUL = "all_gather_matmul"
MATMUL_REDUCE_SCATTER = "matmul_reduce_scatter"
KINDS = (ALL_GATHER_MATMUL, MATMUL_REDUCE_SCATTER)

# Bytes of one operand element, per dtype name (the dialect's spelling).
OPERAND_BYTES: dict[str, int] = {"bf16": 2, "f16": 2, "f8E4M3FN": 1}
FP8 = "f8E4M3FN"
# FP8 operands carry one f32 scale per SCALE_BLOCK elements of K in each A row (1 x 128 block
# scales); they travel with A and are counted in its bytes. B's scales stay local.
SCALE_BLOCK = 128
SCALE_BYTES = 4
PARTIAL_BYTES = 4  # reduce-scatter partial sums are f32 accumulators
ROW_QUANTUM = 64  # wgmma's M per warpgroup: chunks are whole multiples of it
MAX_TILE_N = 256  # wgmma's largest N: one CTA tile is 64 x (at most 256) outputs

RING_FORWARD = "ring_forward"
RING_BACKWARD = "ring_backward"
XOR = "xor"
NAIVE = "naive"
OFFSETS = "offsets"  # a hand-written source_offsets that is none of the named orders
ORDERS = (RING_FORWARD, RING_BACKWARD, XOR, NAIVE)


@dataclass(frozen=True)
class CollectiveMatmulProblem:
    """One collective matmul: its kind, per-device sizes, operand dtype and CTAs per device."""

    kind: str
    m: int  # rows per shard (all-gather) or per output block (reduce-scatter)
    n: int
    k: int
    devices: int
    dtype: str = "bf16"
    ctas: int = 1  # CTAs of the kernel on each device (each on its own SM)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown collective matmul kind {self.kind!r} "
                             f"(known: {', '.join(KINDS)})")
        if self.dtype not in OPERAND_BYTES:
            raise ValueError(f"unknown operand dtype {self.dtype!r} "
                             f"(known: {', '.join(OPERAND_BYTES)})")
        if isinstance(self.devices, bool) or not isinstance(self.devices, int) \
                or self.devices < 1:
            raise ValueError(f"devices must be a positive integer, got {self.devices!r}")
        for name in ("m", "n", "k", "ctas"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.m % ROW_QUANTUM:
            raise ValueError(f"m = {self.m} rows is not a multiple of {ROW_QUANTUM} (wgmma's M "
                             "per warpgroup): chunks must be whole multiples of it")

    def a_row_bytes(self) -> float:
        """Bytes of one A row of K elements, with its FP8 block scales."""
        row = self.k * OPERAND_BYTES[self.dtype]
        if self.dtype == FP8:
            row += -(-self.k // SCALE_BLOCK) * SCALE_BYTES
        return float(row)

    def describe(self) -> str:
        """One line naming the problem."""
        if self.kind == ALL_GATHER_MATMUL:
            shapes = f"A shard [{self.m}, {self.k}] x B [{self.k}, {self.n}] -> " \
                     f"[{self.devices * self.m}, {self.n}]"
        else:
            shapes = f"A [{self.devices * self.m}, {self.k}] x B [{self.k}, {self.n}] -> " \
                     f"block [{self.m}, {self.n}]"
        ctas = "CTA" if self.ctas == 1 else "CTAs"
        return (f"{self.kind} on {self.devices} device(s), per device {shapes}, {self.dtype}, "
                f"{self.ctas} {ctas}")


def order_sources(order: str, kind: str, devices: int, me: int) -> tuple[int, ...]:
    """The peer (all-gather: source shard; reduce-scatter: block) of each step on `me`."""
    d = devices
    gather = kind == ALL_GATHER_MATMUL
    if order == RING_FORWARD:
        return tuple((me + s + (0 if gather else 1)) % d for s in range(d))
    if order == RING_BACKWARD:
        return tuple((me - s - (0 if gather else 1)) % d for s in range(d))
    if order == XOR:
        if d & (d - 1):
            raise ValueError(f"the xor order needs a power-of-2 device count, got {d}")
        return tuple(me ^ (s if gather else d - 1 - s) for s in range(d))
    if order == NAIVE:
        return tuple(range(d))
    raise ValueError(f"unknown order {order!r} (known: {', '.join(ORDERS)})")


def order_table(order: str, kind: str, devices: int) -> tuple[tuple[int, ...], ...]:
    """`order_sources` for every device."""
    return tuple(order_sources(order, kind, devices, me) for me in range(devices))


def offsets_table(offsets: tuple[int, ...], devices: int) -> tuple[tuple[int, ...], ...]:
    """The sources of every device when step s visits `(me + offsets[s]) % devices`."""
    return tuple(tuple((me + o) % devices for o in offsets) for me in range(devices))


def table_offsets(table: tuple[tuple[int, ...], ...]) -> tuple[int, ...] | None:
    """The source_offsets that produce `table`, or None when no fixed offsets do."""
    devices = len(table)
    offsets = tuple(source % devices for source in table[0])
    return offsets if offsets_table(offsets, devices) == table else None


def check_offsets(problem: CollectiveMatmulProblem, offsets: tuple[int, ...]) -> None:
    """A ValueError unless `offsets` visits every peer once, in the kind's convention."""
    d = problem.devices
    if len(offsets) != d or sorted(offsets) != list(range(d)):
        raise ValueError(f"source_offsets {list(offsets)} must be a permutation of "
                         f"0..{d - 1} (one step per device)")
    if problem.kind == ALL_GATHER_MATMUL and offsets[0] != 0:
        raise ValueError(f"all_gather_matmul source_offsets {list(offsets)} must start with "
                         "0: a device multiplies its own shard first, while the first peer "
                         "chunk is fetched")
    if problem.kind == MATMUL_REDUCE_SCATTER and offsets[-1] != 0:
        raise ValueError(f"matmul_reduce_scatter source_offsets {list(offsets)} must end with "
                         "0: a device computes its own block last, while the peers' partials "
                         "arrive")


def named_orders(problem: CollectiveMatmulProblem) -> tuple[str, ...]:
    """The named orders that apply to `problem`, without duplicates of the same table."""
    seen: set[tuple[tuple[int, ...], ...]] = set()
    names = []
    for order in ORDERS:
        if order == XOR and problem.devices & (problem.devices - 1):
            continue
        table = order_table(order, problem.kind, problem.devices)
        if table not in seen:
            seen.add(table)
            names.append(order)
    return tuple(names)


def order_name(problem: CollectiveMatmulProblem, table: tuple[tuple[int, ...], ...]) -> str:
    """The first named order with this table, or "offsets"."""
    for order in named_orders(problem):
        if order_table(order, problem.kind, problem.devices) == table:
            return order
    return OFFSETS


def chunk_choices(problem: CollectiveMatmulProblem) -> tuple[int, ...]:
    """Chunk heights the search tries: multiples of 64 rows that divide m."""
    return tuple(rows for rows in range(ROW_QUANTUM, problem.m + 1, ROW_QUANTUM)
                 if problem.m % rows == 0)

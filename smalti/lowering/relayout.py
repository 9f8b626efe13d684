"""Relayouts in registers: the tiling's shuffle plan (`plan_shuffles`) as PTX.

The value's registers are viewed as .b32 words (16-bit registers paired with `mov.b32`),
each round is one `shfl.sync.bfly`, and every word (sent or kept) is gathered from whole
registers or with one `prmt` per pair of registers it draws bytes from. What differs
between lanes (which register, which bytes, which partner) is a table over the few
thread-index bits that decide it, read with `selp` on those bits; equal tables are built
once per kernel.
"""

from __future__ import annotations

import numpy as np

from smalti.lowering.context import LoweringContext
from smalti.lowering.values import (
    FragmentedArray,
    elements_per_register,
    fragment_geometry,
    register_bits,
    register_type,
)
from smalti.ptx import Immediate, Register, VectorOperand
from smalti.ptx.module import Operand
from smalti.tiling import WARPGROUP_SIZE, Layout
from smalti.tiling.shuffles import plan_shuffles

THREAD_BITS = WARPGROUP_SIZE.bit_length() - 1
WORD_BITS = 32


def relayout_in_registers(ctx: LoweringContext, source: FragmentedArray, target: Layout
                          ) -> FragmentedArray:
    """`source` in the `target` layout; raises LayoutError when some element must cross a
    warp (the relayout needs shared memory)."""
    element, shape = source.element, source.shape
    count, length = fragment_geometry(target, shape)
    pack = elements_per_register(element, length)
    word_type = "f32" if source.register_type == "f32" else "b32"
    words, src_table = source_words(ctx, source, word_type)
    dst_bits = register_bits(element, pack)
    dst_table = _word_table(target, shape, pack, element.bits, dst_bits)
    plan = plan_shuffles(src_table, dst_table)
    gather = Gatherer(ctx, element.bytes, word_type)
    b = ctx.builder
    received = []
    for k in range(plan.rounds):
        sent = gather.word(words, plan.sends[k])
        partner = gather.by_thread(plan.lane_xor[k][:, None], lambda row: row[0])
        received.append(b.compute("shfl.sync.bfly.b32", word_type, sent, partner, 0x1F, -1))
    registers = words + received
    built = [gather.word(registers, plan.gathers[j]) for j in range(dst_table.shape[1])]
    flat = split_words(ctx, built, count * (length // pack), register_type(element, pack),
                        dst_bits)
    per_vector = length // pack
    vectors = tuple(tuple(flat[r * per_vector:(r + 1) * per_vector]) for r in range(count))
    return FragmentedArray(target, shape, element, vectors, length)


def _word_table(layout: Layout, shape: tuple[int, ...], pack: int, bits: int,
                reg_bits: int) -> np.ndarray:
    """[thread, word, position] of the flat elements in the .b32 words that a layout's
    registers (`pack` elements, `reg_bits` wide) form: 16-bit registers two to a word."""
    index = layout.element_index(shape)
    flat = np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), shape)
    return pack_words(flat.reshape(flat.shape[0], -1, pack), bits, reg_bits)


def pack_words(per_register: np.ndarray, bits: int, reg_bits: int) -> np.ndarray:
    """[thread, word, position] of the entries of `per_register` [thread, register, slot]
    in the .b32 words the registers (`reg_bits` wide) form: narrower registers two to a
    word, each in its half (-1: no entry)."""
    threads, registers, pack = per_register.shape
    per_word = WORD_BITS // bits
    if reg_bits == WORD_BITS:
        return per_register
    table = np.full((threads, -(-registers // 2), per_word), -1, dtype=np.int64)
    for r in range(registers):
        half = (r % 2) * (per_word // 2)
        table[:, r // 2, half:half + pack] = per_register[:, r]
    return table


def source_words(ctx: LoweringContext, source: FragmentedArray, word_type: str
                  ) -> tuple[list[Register], np.ndarray]:
    """The source registers as .b32 words, and their word table."""
    registers = [r for vector in source.vectors for r in vector]
    reg_bits = register_bits(source.element, source.pack)
    table = _word_table(source.layout, source.shape, source.pack, source.element.bits,
                        reg_bits)
    if reg_bits == WORD_BITS:
        return registers, table
    words = []
    for i in range(0, len(registers), 2):
        low = registers[i]
        high = registers[i + 1] if i + 1 < len(registers) else low
        word = ctx.builder.reg(word_type)
        ctx.builder.emit("mov.b32", word, VectorOperand((low, high)))
        words.append(word)
    return words, table


def split_words(ctx: LoweringContext, words: list[Register], registers: int, ptx_type: str,
                 reg_bits: int) -> list[Register]:
    """The destination registers: the words themselves, or their 16-bit halves."""
    if reg_bits == WORD_BITS:
        return words[:registers]
    halves = []
    for word in words:
        low, high = ctx.builder.reg(ptx_type), ctx.builder.reg(ptx_type)
        ctx.builder.emit("mov.b32", VectorOperand((low, high)), word)
        halves.extend((low, high))
    return halves[:registers]


class Gatherer:
    """Builds words from registers, position by position, with per-thread choices."""

    def __init__(self, ctx: LoweringContext, element_bytes: int, word_type: str) -> None:
        self.ctx, self.element_bytes, self.word_type = ctx, element_bytes, word_type

    def word(self, registers: list[Register], spec: np.ndarray) -> Register:
        """The word whose position c holds, in thread t, position spec[t, c, 1] of register
        spec[t, c, 0] (-1: anything)."""
        regs, positions = spec[..., 0], spec[..., 1]
        used = regs >= 0
        if not used.any():
            return registers[0]
        per_thread = [sorted(set(row[row >= 0].tolist())) for row in regs]
        in_place = ((positions == np.arange(spec.shape[1])) | ~used).all()
        if in_place and all(len(r) <= 1 for r in per_thread):
            choice = np.array([r[0] if r else -1 for r in per_thread])
            return self.register(registers, choice)
        if any(len(r) > 2 for r in per_thread):
            return self._in_two_parts(registers, spec, per_thread)
        roles = _roles(per_thread)
        first = self.register(registers, roles[:, 0])
        second = self.register(registers, roles[:, 1]) if (roles[:, 1] >= 0).any() else first
        size = self.element_bytes
        nibbles = np.full((spec.shape[0], spec.shape[1] * size), -1, dtype=np.int64)
        for t in range(spec.shape[0]):
            for c in np.flatnonzero(used[t]):
                offset = 4 if regs[t, c] == roles[t, 1] else 0
                for byte in range(size):
                    nibbles[t, c * size + byte] = offset + positions[t, c] * size + byte
        selector = self.by_thread(nibbles, lambda row: sum(n << (4 * i)
                                                           for i, n in enumerate(row)))
        return self.ctx.builder.compute("prmt.b32", "b32", first, second, selector)

    def _in_two_parts(self, registers: list[Register], spec: np.ndarray,
                      per_thread: list[list[int]]) -> Register:
        """Positions from each thread's first two registers, the rest, then both merged."""
        first_two = np.array([[*r, -1, -1][:2] for r in per_thread])
        mine = (spec[..., 0][..., None] == first_two[:, None, :]).any(-1) & (spec[..., 0] >= 0)
        rest = (spec[..., 0] >= 0) & ~mine
        part_a = np.where(mine[..., None], spec, -1)
        part_b = np.where(rest[..., None], spec, -1)
        parts = [self.word(registers, part_a), self.word(registers, part_b)]
        merge = np.full(spec.shape, -1, dtype=np.int64)
        positions = np.broadcast_to(np.arange(spec.shape[1]), mine.shape)
        merge[..., 0] = np.where(mine, 0, np.where(rest, 1, -1))
        merge[..., 1] = np.where(mine | rest, positions, -1)
        return self.word(parts, merge)

    def register(self, registers: list[Register], choice: np.ndarray) -> Register:
        """registers[choice[t]] in thread t (-1: any)."""
        bits, rows = _decide(choice[:, None])
        return self._select(bits, tuple(registers[max(row[0], 0)] for row in rows),
                            self.word_type)

    def by_thread(self, table: np.ndarray, value) -> Operand | int:
        """value(row) of thread t's row of `table` [thread, part] (-1 parts: anything): an
        immediate when every thread agrees, else selected on thread-index bits."""
        bits, rows = _decide(table)
        options = tuple(Immediate(value(row)) for row in rows)
        if not bits:
            return options[0].value
        return self._select(bits, options, "b32")

    def _select(self, bits: tuple[int, ...], options: tuple, ptx_type: str):
        """options[i] in the threads whose `bits` of the thread index spell i (low first)."""
        if not bits:
            return options[0]
        key = ("thread_select", bits, options)
        cache = self.ctx.cache
        if key not in cache:
            predicate = self._thread_bit(bits[0])
            b = self.ctx.builder
            level = []
            for low, high in zip(options[::2], options[1::2], strict=True):
                level.append(low if low == high
                             else b.compute(f"selp.{ptx_type}", ptx_type, high, low, predicate))
            cache[key] = self._select(bits[1:], tuple(level), ptx_type)
        return cache[key]

    def _thread_bit(self, bit: int) -> Register:
        key = ("thread_bit", bit)
        if key not in self.ctx.cache:
            b = self.ctx.builder
            masked = b.compute("and.b32", "b32", self.ctx.thread_index(), 1 << bit)
            self.ctx.cache[key] = b.compute("setp.ne.b32", "pred", masked, 0)
        return self.ctx.cache[key]  # type: ignore[return-value]


def _roles(per_thread: list[list[int]]) -> np.ndarray:
    """[thread, 2]: the registers a thread's prmt reads as a and b (-1: any), lined up with
    the most common pair so that threads differ in as few operands as possible."""
    pairs = [tuple(r) for r in per_thread if len(r) == 2]
    common = max(set(pairs), key=pairs.count) if pairs else (-1, -1)
    roles = np.full((len(per_thread), 2), -1, dtype=np.int64)
    for t, regs in enumerate(per_thread):
        if len(regs) == 2:
            roles[t] = regs
        elif len(regs) == 1:
            roles[t, 1 if regs[0] == common[1] else 0] = regs[0]
    return roles


def _decide(table: np.ndarray) -> tuple[tuple[int, ...], list[list[int]]]:
    """(the fewest thread-index bits, tried from the top, that determine every row of
    `table` [thread, part] where its parts are not -1; per value of those bits, low bit
    first, the row with -1 parts filled from the other threads sharing them, or 0)."""
    bits = list(range(THREAD_BITS))
    for bit in reversed(range(THREAD_BITS)):
        trial = [b for b in bits if b != bit]
        if _rows(table, trial) is not None:
            bits = trial
    rows = _rows(table, bits)
    assert rows is not None  # every bit together names each thread
    return tuple(bits), rows


def _rows(table: np.ndarray, bits: list[int]) -> list[list[int]] | None:
    """Per value of `bits`, the merged row of the threads with it; None on a clash."""
    threads = np.arange(table.shape[0])
    keys = sum(((threads >> bit) & 1) << i for i, bit in enumerate(bits))
    rows = [[-1] * table.shape[1] for _ in range(1 << len(bits))]
    for key, row in zip(np.broadcast_to(keys, threads.shape).tolist(), table.tolist(),
                        strict=True):
        merged = rows[key]
        for i, value in enumerate(row):
            if value < 0:
                continue
            if merged[i] >= 0 and merged[i] != value:
                return None
            merged[i] = value
    return [[max(v, 0) for v in row] for row in rows]

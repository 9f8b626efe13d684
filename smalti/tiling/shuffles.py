"""Which 32-bit words the threads of a warp exchange to relayout a value without memory.

A relayout in registers runs in rounds of one `shfl.sync` each: in a round every lane reads
one word from one lane of its warp (a matching of receivers to senders) and every lane
sends the word its reader needs, assembled from its own source words. The words a receiver
needs from a sender are its elements held there, packed 32 bits at a time; the rounds are
an edge colouring of the bipartite multigraph of those words, which by Kőnig's theorem
needs exactly its maximum degree of colours. No exchange moves fewer words per lane, so the
plan is minimal in shuffles. A thread takes the elements it holds itself from its own
registers, unless reading them from its own lane costs no extra round: then every lane's
words come from shuffles alike, and the code that assembles them varies less by lane.

Tables are numpy arrays over the warpgroup's threads: a word table [thread, word, position]
names the flat element in each position of each .b32 word (-1: none), positions being
element-sized slots, lowest bits first.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from smalti.tiling.layouts import WARP_SIZE, LayoutError


@dataclass(frozen=True, eq=False)
class ShufflePlan:
    """A relayout as rounds of shuffles, then per destination word a gather.

    `lane_xor[k, t]`: the receiver's lane XOR its sender's lane in round k (the operand of
    `shfl.sync.bfly`), -1 where thread t receives nothing. `sends[k, t, c]`: the (source
    word, position) thread t puts in position c of the word it sends in round k, -1 where
    no one needs it. `gathers[j, t, c]`: the (register, position) that position c of
    destination word j takes, a register below `sources` being a source word and
    `sources + k` the word received in round k; -1 where the word has no element.
    """

    sources: int
    lane_xor: np.ndarray
    sends: np.ndarray
    gathers: np.ndarray

    @property
    def rounds(self) -> int:
        return self.lane_xor.shape[0]


# One needed element: (destination word, position, sender, source word, position).
Need = tuple[int, int, int, int, int]


def plan_shuffles(src: np.ndarray, dst: np.ndarray) -> ShufflePlan:
    """The plan moving the elements of word table `src` to where `dst` wants them; raises
    LayoutError when some thread needs an element no thread of its warp holds."""
    needs = _needs(src, dst)
    direct = _plan(needs, src.shape, dst.shape, through_self=False)
    if direct.rounds == 0:
        return direct
    routed = _plan(needs, src.shape, dst.shape, through_self=True)
    return routed if routed.rounds <= direct.rounds else direct


def _needs(src: np.ndarray, dst: np.ndarray) -> list[list[Need]]:
    """Per receiving thread, where each of its destination elements comes from: its own
    copy if it holds one, else a holder in its warp (one it already reads from if any)."""
    holders: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for t, words in enumerate(src.tolist()):
        for w, word in enumerate(words):
            for c, element in enumerate(word):
                if element >= 0:
                    holders[element].append((t, w, c))
    needs: list[list[Need]] = []
    for t, words in enumerate(dst.tolist()):
        mine: list[Need] = []
        senders: set[int] = set()
        for j, word in enumerate(words):
            for c, element in enumerate(word):
                if element < 0:
                    continue
                near = [h for h in holders[element] if h[0] // WARP_SIZE == t // WARP_SIZE]
                if not near:
                    raise LayoutError(f"thread {t} needs element {element}, which no thread "
                                      "of its warp holds")
                own = [h for h in near if h[0] == t]
                known = [h for h in near if h[0] in senders]
                p, w, pos = (own or known or near)[0]
                senders.add(p)
                mine.append((j, c, p, w, pos))
        needs.append(mine)
    return needs


def _plan(needs: list[list[Need]], src_shape: tuple[int, ...], dst_shape: tuple[int, ...],
          through_self: bool) -> ShufflePlan:
    threads, sources, per_word = src_shape
    gathers = np.full((dst_shape[1], threads, per_word, 2), -1, dtype=np.int64)
    edges: list[tuple[int, int, list[Need]]] = []  # (receiver, sender, its elements)
    ranks: list[int] = []
    for t, mine in enumerate(needs):
        by_sender: dict[int, list[Need]] = defaultdict(list)
        for need in mine:
            j, c, p, w, pos = need
            if p == t and not through_self:
                gathers[j, t, c] = (w, pos)
            else:
                by_sender[p].append(need)
        words = []
        for elements in by_sender.values():
            elements.sort(key=lambda n: (n[3], n[4]))  # source order: whole words stay whole
            words.extend(elements[i:i + per_word] for i in range(0, len(elements), per_word))
        words.sort(key=lambda word: min((n[0], n[1]) for n in word))
        for rank, word in enumerate(words):
            edges.append((t, word[0][2], word))
            ranks.append(rank)
    order = sorted(range(len(edges)), key=lambda e: (ranks[e], edges[e][0]))
    colours = _colour([(edges[e][0], edges[e][1]) for e in order])
    rounds = max(colours, default=-1) + 1
    lane_xor = np.full((rounds, threads), -1, dtype=np.int64)
    sends = np.full((rounds, threads, per_word, 2), -1, dtype=np.int64)
    for e, k in zip(order, colours, strict=True):
        t, p, word = edges[e]
        lane_xor[k, t] = (t ^ p) % WARP_SIZE
        for i, (j, c, _, w, pos) in enumerate(word):
            sends[k, p, i] = (w, pos)
            gathers[j, t, c] = (sources + k, i)
    return ShufflePlan(sources, lane_xor, sends, gathers)


def _colour(edges: list[tuple[int, int]]) -> list[int]:
    """A colour per (receiver, sender) edge, no colour twice at a node, using the maximum
    degree many: first fit in the given order, and where that fails Kőnig's exchange of two
    colours along an alternating path."""
    if not edges:
        return []
    degree = max(max(Counter(r for r, _ in edges).values()),
                 max(Counter(s for _, s in edges).values()))
    at: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)  # node -> colour -> edge
    colours = [-1] * len(edges)

    def nodes(e: int) -> tuple[tuple[int, int], tuple[int, int]]:
        return (0, edges[e][0]), (1, edges[e][1])

    def paint(e: int, colour: int) -> None:
        colours[e] = colour
        for node in nodes(e):
            at[node][colour] = e

    for e in range(len(edges)):
        receiver, sender = nodes(e)
        common = next((c for c in range(degree)
                       if c not in at[receiver] and c not in at[sender]), None)
        if common is not None:
            paint(e, common)
            continue
        a = next(c for c in range(degree) if c not in at[receiver])
        b = next(c for c in range(degree) if c not in at[sender])
        path, node, colour = [], sender, a
        while colour in at[node]:  # sender -a- receiver -b- sender -a- ...: never `receiver`
            step = at[node][colour]
            path.append(step)
            node = next(n for n in nodes(step) if n != node)
            colour = b if colour == a else a
        for step in path:
            for n in nodes(step):
                del at[n][colours[step]]
        for step in path:
            paint(step, b if colours[step] == a else a)
        paint(e, a)
    return colours

"""Reading back what a program's debug_prints printed, and holding it against the reference.

smalti prints each `smalti.debug_print` as `file:line: [block (x, y, z), ...] p<label> =
<array>` (numpy's array2string, every element's shortest unique form), per block in launch
order (smalti.runtime.simulate.debug_print_lines). The array is reassembled from the
registers through the value's layout, so a printed value checks the debug buffer and the
layout's element map, apart from the numbers stored to memory.
"""

from __future__ import annotations

import re

import numpy as np

from tests.differential.compare import wrong_elements
from tests.differential.dtypes import DTYPES
from tests.differential.numerics import Tracked, round_to
from tests.differential.program import Print, Program, walk

_RECORD = re.compile(r"^\S.*?:\d+: (?:\[(?P<tags>[^\]]*)\] )?p(?P<label>\d+) = (?P<value>.*)$",
                     re.DOTALL)
_BLOCK = re.compile(r"block \((\d+), (\d+), (\d+)\)")


def split_records(text: str) -> list[str]:
    """Captured stderr as one string per printed record (arrays span lines that start with
    a space)."""
    records: list[str] = []
    for line in text.splitlines():
        if line.startswith((" ", "[")) and records:
            records[-1] += "\n" + line
        elif line.strip():
            records.append(line)
    return records


def parse_prints(program: Program, types: dict, records: list[str]
                 ) -> dict[tuple[int, int], np.ndarray] | str:
    """(label, block) -> the printed array; or a description of an unreadable record."""
    shapes = {s.label: types[s.value] for s in walk(program.body) if isinstance(s, Print)}
    printed: dict[tuple[int, int], np.ndarray] = {}
    for record in records:
        match = _RECORD.match(record)
        if match is None:
            continue  # not one of ours
        label = int(match["label"])
        if label not in shapes:
            return f"a print p{label} that the program does not have: {record[:200]}"
        block = 0
        tag = _BLOCK.search(match["tags"] or "")
        if tag is not None:
            x, y, _ = (int(g) for g in tag.groups())
            block = x * program.grid[1] + y if len(program.grid) == 2 else x
        vtype = shapes[label]
        tokens = match["value"].replace("[", " ").replace("]", " ").split()
        dtype = DTYPES[vtype.dtype]
        try:
            if dtype.is_bool:
                values = np.array([t == "True" for t in tokens])
            elif dtype.is_int:
                values = np.array([int(t) for t in tokens], np.int64).astype(dtype.numpy)
            else:
                values = round_to(np.array([float(t) for t in tokens]), dtype)
            printed[label, block] = values.reshape(vtype.shape)
        except ValueError:
            return f"p{label} of block {block}: unreadable ({len(tokens)} elements for " \
                   f"{vtype}): {record[:200]}"
    return printed


def compare_prints(program: Program, types: dict, records: list[str],
                   want: dict[tuple[int, int], Tracked]) -> str | None:
    """None if every print printed what the reference printed, else a description."""
    printed = parse_prints(program, types, records)
    if isinstance(printed, str):
        return f"wrong debug_print: {printed}"
    problems = []
    for key in sorted(set(printed) | set(want)):
        label, block = key
        if key not in printed or key not in want:
            problems.append(f"p{label} of block {block}: "
                            f"{'not printed' if key not in printed else 'printed, not run'}")
            continue
        dtype = DTYPES[types[next(s.value for s in walk(program.body)
                                  if isinstance(s, Print) and s.label == label)].dtype]
        bad = wrong_elements(printed[key], want[key], dtype.is_float)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            problems.append(f"p{label} of block {block}: {int(bad.sum())} of {bad.size} "
                            f"elements wrong, e.g. [{','.join(map(str, i))}] printed "
                            f"{printed[key][i]!r}, expected {want[key].val[i]!r}")
    if not problems:
        return None
    return f"wrong debug_print in {len(problems)} print(s)\n" + "\n".join(problems)


__all__ = ["compare_prints", "parse_prints", "split_records"]

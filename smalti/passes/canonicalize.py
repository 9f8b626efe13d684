"""The canonicalization smalti runs: upstream `canonicalize` without the patterns that change
what a program computes.

Canonicalization must not change numbers: the layout inference and the lowering are checked
against numpy on the program as written. Upstream's arith patterns are exact except the two
below, which fold a double rounding into a single one (LLVM PR #139925):
`truncf(sitofp(x : i32) : f32) : bf16` becomes `sitofp(x) : bf16`, and x = -547356703 then
gives -549453824 instead of numpy's -545259520 (`x.astype(float32).astype(bfloat16)`).

`canonicalize{disable-patterns=...}` takes patterns by debug name; a pattern declared in
TableGen (ArithCanonicalization.td) has the C++ type name of its generated class, which is
in an anonymous namespace. The names are the same in jaxlib 0.10.2 and 0.12 (found with
`strings libjax_common.so | grep 'DesiredTypeName = (anonymous namespace)::'`);
tests/test_canonicalize.py checks on every jaxlib that upstream still applies each pattern
and that smalti's canonicalization does not, so a rename cannot pass unnoticed.

What canonicalization may still create is lowered: conversions from narrower integers (i1
included: `sitofp(extsi(i1))` becomes `sitofp(i1)`, exact), and non-splat constants folded
from splat ones (`insert_strided_slice` of constants). Constant folding of `math` ops on
constants computes with the host's libm, so such a constant is at least as accurate as the
.approx instruction the op would lower to (it differs from the kernel's own result by at most
that instruction's error).
"""

from __future__ import annotations

# Debug name of each disabled pattern -> what it does.
NUMERICS_CHANGING_PATTERNS: dict[str, str] = {
    "(anonymous namespace)::TruncFSIToFPToSIToFP":
        "truncf(sitofp(x)) -> sitofp(x): one rounding where the program rounds twice",
    "(anonymous namespace)::TruncFUIToFPToUIToFP":
        "truncf(uitofp(x)) -> uitofp(x): one rounding where the program rounds twice",
}

CANONICALIZE = ("canonicalize{disable-patterns={"
                + ",".join(NUMERICS_CHANGING_PATTERNS) + "}}")
"""The upstream pass with its options, as a pass-pipeline element."""

ALIASES: dict[str, tuple[str, str]] = {
    "smalti-canonicalize": (
        CANONICALIZE,
        "Canonicalize without the upstream patterns that change numbers (double to single "
        "rounding)"),
}
"""Pipeline names that stand for an upstream pass with options: name -> (element, help)."""

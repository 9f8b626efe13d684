"""A differential tester of smalti: seeded random kernels, as .mlir text and as DSL programs,
compiled, run in the PTX simulator and held against a numpy reference; failures are
minimised into standalone files.

    python -m tests.differential --seed 0 --count 200 [--kind mlir|dsl] [--out DIR]

Modules, each with one job: `program` (the representation), `dtypes` and `ops` (the tables
of element types and ops), `typecheck`, `generator`, `emit_mlir` and `emit_dsl` (the two
ways of writing a program), `inputs`, `numerics` and `reference` (the numpy interpreter with
error bounds), `compare`, `allowlist` (documented limitations, filed findings), `runner`
(one program through smalti), `minimise`, `findings` (finding files: writing and replaying
them), `campaign` (many programs in worker processes) and `__main__` (the command line).
"""

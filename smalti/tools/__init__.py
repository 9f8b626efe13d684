"""Command-line drivers: `smalti-opt`, `smalti-translate` and `smalti-sim` (mlir-opt conventions)."""

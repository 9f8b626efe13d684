"""Command-line drivers: `smalti-opt`, `smalti-translate`, `smalti-sim` (mlir-opt conventions)."""

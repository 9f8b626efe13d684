"""The pass registry and pipeline runner shared by `smalti-opt`, `smalti-translate` and the
runtime: every step of the pipeline in DESIGN.md is a named pass here."""

from smalti.passes.registry import (
    DEFAULT_PIPELINE,
    REGISTRY,
    PassInfo,
    build_pass_manager,
    run_pipeline,
    split_pipeline,
)

__all__ = [
    "DEFAULT_PIPELINE", "REGISTRY", "PassInfo", "build_pass_manager", "run_pipeline",
    "split_pipeline",
]

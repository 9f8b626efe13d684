# ruff: noqa
# FINDING: mismatch: wrong numbers in N output(s)
#   wrong numbers in 1 output(s)
#   out0 (f32[128, 128]): 217 of 16384 elements wrong: [0,95] got -0.0 want -4.983136449508517e-39, [2,5] got -0.0 want -7.15283132155199e-39, [2,43] got 0.0 want 1.0020246711967433e-38, [2,52] got -0.0 want -1.1349940226063716e-38
# Replay: python -m tests.differential.findings dsl_subnormal_flush.py
# PROGRAM: {"@":"Program","kind":"dsl","seed":7,"grid":[1],"refs":[{"@":"Ref","name":"in0","shape":[128,128],"dtype":"f32","output":false},{"@":"Ref","name":"out0","shape":[128,128],"dtype":"f32","output":true}],"body":[{"@":"Load","out":"v1","ref":"in0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}],"type":{"@":"VType","shape":[128,128],"dtype":"f32"}},{"@":"Const","out":"k2","type":{"@":"VType","shape":[128,128],"dtype":"f32"},"value":7.52316384526264e-37,"literal":true},{"@":"Apply","out":"v3","op":"mulf","args":["v1","k2"]},{"@":"Store","value":"v3","ref":"out0","starts":[{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0},{"@":"Affine","const":0,"block":0,"counters":[],"dynamic":0}]}],"dynamic":null}
import jax
import jax.numpy as jnp

import smalti.dsl as sd


@sd.kernel(grid=(1,), out_shape=(jax.ShapeDtypeStruct((128, 128), jnp.float32),))
def kernel(in0, out0):
    b = sd.program_id(0)
    v1 = in0[0:128, 0:128]
    k2 = sd.full((128, 128), 7.52316384526264e-37, jnp.float32)
    v3 = (v1 * 7.52316384526264e-37)
    out0[0:128, 0:128] = v3


if __name__ == "__main__":  # replay, with the repository that holds this file importable
    import sys
    from pathlib import Path

    sys.path[:0] = [str(p) for p in Path(__file__).resolve().parents
                    if (p / "tests" / "differential").is_dir()][:1]
    from tests.differential.findings import main

    main([__file__])

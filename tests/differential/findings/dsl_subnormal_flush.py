# ruff: noqa
# FINDING: mismatch: wrong numbers in N output(s)
#   wrong numbers in 1 output(s)
#   out1 (f32[64, 128]): 4 of 8192 elements wrong: [36,106] got 0.0 want 7.996813768436327e-39 ±7.33e-39, [37,10] got 0.0 want 1.1264929053426987e-38 ±1.03e-38, [57,0] got -0.0 want -1.1419022839056466e-38 ±3.85e-39, [60,116] got -0.0 want -1.0434931565216612e-38 ±7.45e-39
# XFAIL: smalti/runtime/cpu_target.py (simulator and runtime owners): the simulator runs inside XLA's CPU custom call, on a thread with x86 FTZ/DAZ set, so f32 subnormal results (and operands) become zeros; run_simulated outside JAX keeps them, as PTX's non-.ftz div.rn/mul.rn do
# Replay: python -m tests.differential.findings dsl_subnormal_flush.py
# PROGRAM: {"@":"Program","kind":"dsl","seed":1150,"grid":[1],"refs":[{"@":"Ref","name":"in1","shape":[64,128],"dtype":"f32","output":false},{"@":"Ref","name":"in0","shape":[64,128],"dtype":"f32","output":false},{"@":"Ref","name":"out1","shape":[64,128],"dtype":"f32","output":true}],"body":[{"@":"Load","out":"v18","ref":"in1","starts":[{"@":"Affine","const":0,"block":0,"counters":[]},{"@":"Affine","const":0,"block":0,"counters":[]}],"type":{"@":"VType","shape":[64,128],"dtype":"f32"}},{"@":"Apply","out":"v22","op":"exp","args":["v18"]},{"@":"Load","out":"v24","ref":"in0","starts":[{"@":"Affine","const":0,"block":0,"counters":[]},{"@":"Affine","const":0,"block":0,"counters":[]}],"type":{"@":"VType","shape":[64,128],"dtype":"f32"}},{"@":"Apply","out":"v25","op":"divf","args":["v22","v24"]},{"@":"Store","value":"v25","ref":"out1","starts":[{"@":"Affine","const":0,"block":0,"counters":[]},{"@":"Affine","const":0,"block":0,"counters":[]}]}]}
import jax
import jax.numpy as jnp

import smalti.dsl as sd


@sd.kernel(grid=(1,), out_shape=(jax.ShapeDtypeStruct((64, 128), jnp.float32),))
def kernel(in1, in0, out1):
    b = sd.program_id(0)
    v18 = in1[0:64, 0:128]
    v22 = sd.exp(v18)
    v24 = in0[0:64, 0:128]
    v25 = (v22 / v24)
    out1[0:64, 0:128] = v25


if __name__ == "__main__":  # replay, with the repository that holds this file importable
    import sys
    from pathlib import Path

    sys.path[:0] = [str(p) for p in Path(__file__).resolve().parents
                    if (p / "tests" / "differential").is_dir()][:1]
    from tests.differential.findings import main

    main([__file__])

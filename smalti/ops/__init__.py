"""Kernels users call from JAX, written in the public smalti.dsl: drop-in replacements for
jax's own functions, callable inside jax.jit and differentiable with jax.grad."""

from smalti.ops.attention import dot_product_attention, dot_product_attention_with_lse
from smalti.ops.matmul import matmul
from smalti.ops.norms import layer_norm, rms_norm
from smalti.ops.paged_attention import paged_attention
from smalti.ops.quantized_matmul import quantized_matmul
from smalti.ops.ragged_dot import ragged_dot
from smalti.ops.row_softmax import softmax

__all__ = ["dot_product_attention", "dot_product_attention_with_lse", "layer_norm", "matmul",
           "paged_attention", "quantized_matmul", "ragged_dot", "rms_norm", "softmax"]

"""smalti: Hopper (sm_90a) GPU kernels with tiled register layouts, lowered to PTX."""

__version__ = "0.1.0"

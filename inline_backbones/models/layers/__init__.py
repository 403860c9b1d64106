"""Layers the blocks and mixers build from: linears with the bias in the GEMM (:mod:`.fused_linear`) and the
LayerNorm whose output feeds a GEMM (:mod:`.layer_norm`)."""

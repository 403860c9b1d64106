"""InLine attention, its forms together (as fla-org keeps an op's naive and fused forms): the module
(:mod:`.attention`), its plain reference, the spec every fast path is tested against (:mod:`.reference`), the one
decision of which form runs (:mod:`.paths`), the GPU inference forms on the Triton kernels (:mod:`.gpu`) and the GPU
training path's written-out backward (:mod:`.autograd`)."""

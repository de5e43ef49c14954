"""The numerator's per-sequence ``log P_b`` as a differentiable function of the network
output, for tests: the value and the occupancies of one pass of
:func:`paravg.chain.numerator.num_forward_backward` (``∂ log P_b / ∂ x`` is its
occupancies of sequence ``b``), joined as ``chain_objective`` joins them."""

import torch

from paravg.chain.numerator import NumeratorGraph, num_forward_backward


def numerator_logprob(graph: NumeratorGraph, x: torch.Tensor) -> torch.Tensor:
    """``log P_b`` (B,) of ``x`` (T, B, P), whose gradient is the numerator occupancies."""
    logp, occ = num_forward_backward(graph, x)
    return logp + (occ * (x - x.detach())).sum(dim=(0, 2))

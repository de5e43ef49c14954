"""Kaldi's ``GeneralDropoutComponent`` with ``continuous=true`` and time-period 0
(``src/nnet3/nnet-general-component.cc``): the dropout of every ``tdnnf-layer`` and of
``relu-batchnorm-dropout-layer ... dropout-per-dim=true dropout-per-dim-continuous=true``.

With proportion p, each sequence n (here: each eg of the minibatch) draws one scale per
dimension, shared by all its time steps ("per-dim" dropout):

    s_{n,d} = 1 + 2p · U_{n,d},   U ~ Uniform[−1, 1]   (mean 1; p = 0.5 gives U[0, 2]),

and y_{n,t,d} = s_{n,d} · x_{n,t,d}. Kaldi draws it as 4p·Uniform[0,1] + 1 − 2p, which
is what :meth:`GeneralDropout.forward` computes. Test mode, or p = 0: the identity.
p is not a trained parameter and not saved: each job sets it from
``trainer.dropout_schedule`` (:mod:`paravg.nnet.dropout_schedule`), as Kaldi's scripts
edit it into the model (``set-dropout-proportion``) at the start of every iteration.
The draws come from a generator seeded by :meth:`GeneralDropout.reset` (the job's seed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


class GeneralDropout(nn.Module):
    """Continuous per-dimension dropout of ``dim`` units (module docstring)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = int(dim)
        self.proportion = 0.0
        self._generator: torch.Generator | None = None

    def reset(self, seed: Sequence[int]) -> None:
        """Seed the draws (start of a training job)."""
        state = np.random.SeedSequence(list(seed)).generate_state(1, np.uint64)[0]
        self._generator = torch.Generator().manual_seed(int(state) % 2**63)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.proportion
        if not self.training or p == 0.0:
            return x
        if self._generator is None:
            raise RuntimeError("GeneralDropout with p > 0 in training needs reset(seed) first")
        u = torch.rand((x.shape[0], 1, self.dim), generator=self._generator, dtype=torch.float32)
        scale = (4.0 * p) * u + (1.0 - 2.0 * p)
        return x * scale.to(device=x.device, dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, continuous=True, proportion={self.proportion}"

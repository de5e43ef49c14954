"""BMUF's parameters and its per-job learning-rate factor (torch-free: the plan reads them).

See :mod:`paravg.sync.bmuf` for the update. Defaults bm = 1 − 1/N (CNTK), η_b = 1,
Nesterov; per-job lr = N · ε · (1 − bm) / η_b.
"""

from __future__ import annotations

from dataclasses import dataclass

from paravg.errors import ConfigError


def default_block_momentum(num_jobs: int) -> float:
    """CNTK's default bm = 1 − 1/N."""
    if num_jobs < 1:
        raise ConfigError(f"BMUF needs at least one job, got {num_jobs}")
    return 1.0 - 1.0 / num_jobs


@dataclass(frozen=True)
class BmufParams:
    """Block momentum bm ∈ [0, 1), block learning rate η_b > 0, Nesterov or classic."""

    block_momentum: float
    block_lr: float = 1.0
    nesterov: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.block_momentum < 1.0:
            raise ConfigError(
                f"sync.bmuf.block_momentum must be in [0, 1), got {self.block_momentum}"
            )
        if not self.block_lr > 0.0:
            raise ConfigError(f"sync.bmuf.block_lr must be > 0, got {self.block_lr}")

    @classmethod
    def from_config(cls, bmuf_cfg: dict, num_jobs: int) -> BmufParams:
        """From ``sync.bmuf`` (``block_momentum: null`` → 1 − 1/N)."""
        bm = bmuf_cfg.get("block_momentum")
        return cls(
            block_momentum=default_block_momentum(num_jobs) if bm is None else float(bm),
            block_lr=float(bmuf_cfg.get("block_lr", 1.0)),
            nesterov=bool(bmuf_cfg.get("nesterov", True)),
        )


def job_learning_rate_scale(params: BmufParams) -> float:
    """Factor on Kaldi's per-job lr (N · ε) under BMUF: (1 − bm) / η_b."""
    return (1.0 - params.block_momentum) / params.block_lr

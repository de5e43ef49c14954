"""BMUF's parameters and its per-job learning-rate factor (torch-free: the plan reads them).

See :mod:`paravg.sync.bmuf` for the update. Defaults: CNTK's form (``form: cntk``,
BlockMomentumSGD.h), bm = 1 − 1/N, η_b = 1, Nesterov, a warm-up of one filter time
constant ⌈1/(1 − bm)⌉ blocks (N at the default bm). Per-job lr: ε under ``cntk`` (the
workers keep the single-learner rate, as in CNTK), N · ε · (1 − bm) / η_b under
``textbook`` (equal at the defaults).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from paravg.errors import ConfigError

FORMS = ("cntk", "textbook")


def default_block_momentum(num_jobs: int) -> float:
    """CNTK's default bm = 1 − 1/N."""
    if num_jobs < 1:
        raise ConfigError(f"BMUF needs at least one job, got {num_jobs}")
    return 1.0 - 1.0 / num_jobs


def default_warmup_blocks(block_momentum: float) -> int:
    """One time constant of the block filter, ⌈1/(1 − bm)⌉ blocks (N at bm = 1 − 1/N).

    The small tolerance keeps 1/(1 − (1 − 1/N)) from rounding up to N + 1."""
    return math.ceil(1.0 / (1.0 - block_momentum) - 1e-9)


@dataclass(frozen=True)
class BmufParams:
    """Block momentum bm ∈ [0, 1), block learning rate η_b > 0, Nesterov or classic, the
    form (``cntk`` | ``textbook``), the warm-up (blocks of plain averaging) and N (the jobs
    of the block: CNTK's gain is on their *summed* displacement)."""

    block_momentum: float
    block_lr: float = 1.0
    nesterov: bool = True
    form: str = "textbook"
    warmup_blocks: int = 0
    num_jobs: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.block_momentum < 1.0:
            raise ConfigError(
                f"sync.bmuf.block_momentum must be in [0, 1), got {self.block_momentum}"
            )
        if not self.block_lr > 0.0:
            raise ConfigError(f"sync.bmuf.block_lr must be > 0, got {self.block_lr}")
        if self.form not in FORMS:
            raise ConfigError(f"sync.bmuf.form must be one of {FORMS}, got {self.form!r}")
        if self.warmup_blocks < 0:
            raise ConfigError(f"sync.bmuf.warmup_blocks must be >= 0, got {self.warmup_blocks}")
        if self.num_jobs < 1:
            raise ConfigError(f"BMUF needs at least one job, got {self.num_jobs}")

    @classmethod
    def from_config(cls, bmuf_cfg: dict, num_jobs: int) -> BmufParams:
        """From ``sync.bmuf`` (``block_momentum: null`` → 1 − 1/N; ``warmup_blocks: null``
        → :func:`default_warmup_blocks`)."""
        bm = bmuf_cfg.get("block_momentum")
        bm = default_block_momentum(num_jobs) if bm is None else float(bm)
        warmup = bmuf_cfg.get("warmup_blocks")
        return cls(
            block_momentum=bm,
            block_lr=float(bmuf_cfg.get("block_lr", 1.0)),
            nesterov=bool(bmuf_cfg.get("nesterov", True)),
            form=str(bmuf_cfg.get("form", "cntk")),
            warmup_blocks=default_warmup_blocks(bm) if warmup is None else int(warmup),
            num_jobs=num_jobs,
        )

    def in_warmup(self, iteration: int) -> bool:
        """Whether the block over ``iteration``'s jobs (block iteration + 1) is plain averaging."""
        return iteration < self.warmup_blocks


def job_learning_rate_scale(params: BmufParams) -> float:
    """Factor on Kaldi's per-job lr (N · ε) under BMUF: 1/N under ``cntk`` (every job at ε,
    CNTK's per-worker rate), (1 − bm)/η_b under ``textbook`` (ε at the defaults)."""
    if params.form == "cntk":
        return 1.0 / params.num_jobs
    return (1.0 - params.block_momentum) / params.block_lr


#: ``sync.bmuf`` keys added by issue 37, at the values that reproduce the form before it
PRE_ISSUE_37 = {"form": "textbook", "warmup_blocks": 0}


def fingerprint_section(bmuf_cfg: dict, is_bmuf: bool) -> dict:
    """``sync.bmuf`` as it enters the plan's fingerprint: without the keys of
    :data:`PRE_ISSUE_37` for another method (they change no start model) or where they hold
    those values, so every run made before these keys existed keeps its fingerprint."""
    return {
        k: v
        for k, v in bmuf_cfg.items()
        if k not in PRE_ISSUE_37 or (is_bmuf and v != PRE_ISSUE_37[k])
    }

"""NG-SGD's options (``trainer.ngsgd``), validated in one place; torch-free.

The defaults and bounds are the schema's (``config/config.schema.yaml``, read through
:mod:`paravg.schema`), which are Kaldi's: the defaults of ``OnlineNaturalGradient`` and of
``NaturalGradientAffineComponent`` (``src/nnet3/natural-gradient-online.{h,cc}``,
``nnet-simple-component.cc``; ``update_period`` 4 as every Kaldi component that uses it)
and the asserts of ``OnlineNaturalGradient::InitDefault``: 0 < num_samples_history ≤ 1e6,
alpha ≥ 0, 0 < epsilon ≤ 1e-5, 0 < delta ≤ 1e-2. :class:`NgsgdOptions` is built at
start-up for every experiment (:func:`paravg.config.validate_config`) and again by every
model builder and preconditioner (:mod:`paravg.optim.ngsgd`, :mod:`paravg.nnet.ng_affine`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from paravg import schema
from paravg.errors import ConfigError

__all__ = ["SECTION", "NgsgdOptions"]

SECTION = "trainer.ngsgd"
_DEFAULTS = schema.defaults(SECTION)


@dataclass(frozen=True)
class NgsgdOptions:
    """The ``trainer.ngsgd`` config section, validated (:meth:`check`) when built.

    ``rank_in``/``rank_out`` are upper bounds: a layer uses min(rank_in, (in_dim+1)//2)
    and min(rank_out, (out_dim+1)//2), as Kaldi's ``NaturalGradientAffineComponent``
    defaults do. ``num_minibatches_history`` (0 = unused) is Kaldi's alternative way of
    setting η; it is not a config key (Kaldi's bound: 0, or in (1, 1e6)).
    """

    enabled: bool = _DEFAULTS["enabled"]
    rank_in: int = _DEFAULTS["rank_in"]
    rank_out: int = _DEFAULTS["rank_out"]
    alpha: float = _DEFAULTS["alpha"]
    num_samples_history: float = _DEFAULTS["num_samples_history"]
    update_period: int = _DEFAULTS["update_period"]
    epsilon: float = _DEFAULTS["epsilon"]
    delta: float = _DEFAULTS["delta"]
    num_minibatches_history: float = 0.0

    def __post_init__(self) -> None:
        self.check(asdict(self))

    @staticmethod
    def check(values: Mapping[str, Any], where: str = SECTION) -> None:
        """Raise :class:`ConfigError` naming the first option of ``values`` (a config
        section or some of its keys) outside its bound, and the bound; ``where`` is the
        config path the message names."""
        values = dict(values)
        history = values.pop("num_minibatches_history", 0.0)
        schema.check(SECTION, values, where)
        ok = isinstance(history, numbers.Real) and not isinstance(history, bool)
        if not (ok and (history == 0 or 1 < history < 1.0e6)):
            raise ConfigError(
                f"{where}.num_minibatches_history = {history!r}: expected 0 (unused) or a "
                "number in (1, 1e+06)"
            )

    @classmethod
    def from_config(
        cls, cfg: Mapping[str, Any] | NgsgdOptions | None, where: str = SECTION
    ) -> NgsgdOptions:
        """From a config dict (missing keys take the defaults; unknown keys and values out
        of bounds are errors naming ``where``, the section's config path)."""
        if cfg is None:
            return cls()
        if isinstance(cfg, NgsgdOptions):
            return cfg
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown option(s) {unknown}; known: {sorted(known)}")
        cls.check(cfg, where)
        return cls(**dict(cfg))

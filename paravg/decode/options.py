"""The search options (Kaldi's ``LatticeFasterDecoderConfig`` names), validated in one place.

Defaults and bounds are the schema's ``decode`` section (``config/config.schema.yaml``,
read through :mod:`paravg.schema`): ``steps/nnet3/decode.sh``'s beam 15, lattice-beam 8,
max-active 7000, min-active 200, acoustic-scale 0.1, and the bounds of
``LatticeFasterDecoderConfig::Check`` (``src/decoder/lattice-faster-decoder.h``): beam > 0,
lattice_beam > 0, max_active > 1, min_active <= max_active. The ``export`` section holds
the same options for vosk's ``conf/model.conf`` with its own defaults:
:func:`check_search_options` checks either section (at start-up, from
:func:`paravg.graph.settings.check_recognition_config`), and :class:`SearchOptions` the
options paravg's decoder searches with (:mod:`paravg.decode.search`). Torch- and
numpy-free: the snakemake process imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from paravg import schema
from paravg.errors import ConfigError

__all__ = [
    "CHAIN_SCALE_KEYS",
    "SEARCH_KEYS",
    "SearchOptions",
    "check_search_options",
    "recorded_options",
]

_DEFAULTS = schema.defaults("decode")


def check_search_options(values: Mapping[str, Any], where: str = "decode") -> None:
    """Raise :class:`ConfigError` naming the key when a search option of config section
    ``where`` (``decode`` or ``export``; ``values`` may be the whole section: its other
    keys are not looked at) is outside the section's schema bounds, or when min_active
    exceeds max_active."""
    schema.check(where, {k: v for k, v in values.items() if k in SEARCH_KEYS})
    if values["min_active"] > values["max_active"]:
        raise ConfigError(
            f"{where}.min_active ({values['min_active']}) must not exceed {where}.max_active "
            f"({values['max_active']}): Kaldi's decoders "
            "(LatticeFasterDecoderConfig::Check) and vosk refuse it"
        )


@dataclass(frozen=True)
class SearchOptions:
    """The options of paravg's lattice search (``decode`` section), validated when built."""

    acoustic_scale: float = _DEFAULTS["acoustic_scale"]
    beam: float = _DEFAULTS["beam"]
    lattice_beam: float = _DEFAULTS["lattice_beam"]
    max_active: int = _DEFAULTS["max_active"]
    min_active: int = _DEFAULTS["min_active"]
    # write determinised CompactLattices (LatticeFasterDecoderConfig::determinize_lattice),
    # pruned at determinize_beam (None: lattice_beam; lattice-determinize-pruned --beam)
    determinize_lattice: bool = _DEFAULTS["determinize_lattice"]
    determinize_beam: float | None = _DEFAULTS["determinize_beam"]

    @property
    def determinize_at(self) -> float:
        """The determinisation's beam: ``determinize_beam``, else ``lattice_beam``."""
        return self.lattice_beam if self.determinize_beam is None else self.determinize_beam

    def __post_init__(self) -> None:
        check_search_options(asdict(self), "decode")


SEARCH_KEYS = tuple(f.name for f in fields(SearchOptions))
#: the ``decode`` keys of a chain model's search (``decode.sh --acwt``,
#: ``--post-decode-acwt``), in rule decode_split's options of a chain experiment only
CHAIN_SCALE_KEYS = ("chain_acoustic_scale", "chain_post_decode_acwt")
DETERMINIZE_KEYS = ("determinize_lattice", "determinize_beam")


def recorded_options(values: Mapping[str, Any]) -> dict:
    """The options a decode is known by (rule decode_split's params, from which its
    script builds the :class:`SearchOptions`; its JSON's ``options``; the results table's
    check) from the ``decode`` section or a :class:`SearchOptions`' fields:
    :data:`SEARCH_KEYS`, without ``determinize_beam`` while ``determinize_lattice`` is
    off (a beam that is not used reruns nothing). ``determinize_lattice`` itself is always
    there: the script's :class:`SearchOptions` must not fall back on its default (on)."""
    keep = values.get("determinize_lattice", False)
    return {k: values[k] for k in SEARCH_KEYS if keep or k != "determinize_beam"}

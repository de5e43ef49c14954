"""Kaldi's minibatch-size rules (``nnet3-merge-egs --minibatch-size``), torch-free.

Mirrors ``ExampleMergingConfig`` in ``src/nnet3/nnet-example-utils.cc`` and
``halve_minibatch_size_str`` of ``steps/libs/nnet3/train/common.py``:

* a rule string is ``/``-separated rules; a rule is ``E=SET`` (for egs of size E) or, when
  it is the only rule, just ``SET``; SET is comma-separated ranges ``a`` or ``a:b``
  (1 ≤ a ≤ b). ``"256"``, ``"256,128"``, ``"1:64"``, ``"128=64/256=32"``;
* an eg's size is the largest number of indexes of its inputs/outputs
  (``GetNnetExampleSize``): for a frame-level eg the stored input window, lc + F + rc;
* the rule whose E is closest to the eg size applies (the first on a tie);
* while egs keep coming, a minibatch is written whenever the largest size of the SET is
  reached; when the input ends, the rest is merged greedily into the largest size each
  range allows (``LargestValueInRange``) until none fits, and what is left is discarded.
  ``"256"`` thus drops a final partial minibatch, ``"256,128"`` turns a final 128..255
  egs into one of 128, ``"1:64"`` uses every eg;
* on iteration 0 every number of every SET is halved (at least 1), E kept.

An integer ``B`` is the rule ``"B"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from paravg.errors import ConfigError

Ranges = tuple[tuple[int, int], ...]
_RANGE = re.compile(r"^([0-9]+)(?::([0-9]+))?$")


def _parse_set(text: str, where: str) -> Ranges:
    ranges = []
    for part in text.split(","):
        m = _RANGE.match(part)
        lo, hi = (int(m.group(1)), int(m.group(2) or m.group(1))) if m else (0, 0)
        if not m or not 1 <= lo <= hi:
            raise ConfigError(
                f"{where}: {part!r} is not a minibatch size or range a:b with 1 <= a <= b"
            )
        ranges.append((lo, hi))
    return tuple(ranges)


@dataclass(frozen=True)
class MinibatchRule:
    """A parsed ``--minibatch-size`` string: ``rules`` = ((eg size E or 0, ranges), …)."""

    text: str
    rules: tuple[tuple[int, Ranges], ...]

    @classmethod
    def parse(cls, value: int | str, where: str = "trainer.minibatch_size") -> MinibatchRule:
        """Parse an integer or a rule string; a malformed one is a :class:`ConfigError`."""
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ConfigError(f"{where}: {value!r}; expected an integer or a string like '256,128'")
        text = str(value).strip()
        parts = text.split("/")
        rules = []
        for part in parts:
            size_text, eq, set_text = part.rpartition("=")
            if eq and not size_text.isdigit():
                raise ConfigError(f"{where}: {part!r} in {text!r}; expected E=SIZES")
            if not eq and len(parts) > 1:
                raise ConfigError(
                    f"{where}: {text!r}: with more than one rule every rule needs its eg "
                    "size (E=SIZES/E=SIZES)"
                )
            rules.append((int(size_text) if eq else 0, _parse_set(set_text, where)))
        sizes = [e for e, _ in rules]
        if len(set(sizes)) != len(sizes):
            raise ConfigError(f"{where}: {text!r} repeats an eg size")
        return cls(text, tuple(rules))

    def halved(self) -> MinibatchRule:
        """Every number of every SET halved (minimum 1): Kaldi's iteration-0 minibatch."""

        def half(n: int) -> int:
            return max(1, n // 2)

        rules = tuple(
            (e, tuple((half(lo), half(hi)) for lo, hi in ranges)) for e, ranges in self.rules
        )
        text = "/".join(
            (f"{e}=" if e else "")
            + ",".join(f"{lo}" if lo == hi else f"{lo}:{hi}" for lo, hi in ranges)
            for e, ranges in rules
        )
        return MinibatchRule(text, rules)

    def ranges_for(self, eg_size: int) -> Ranges:
        """The SET of the rule whose eg size is closest to ``eg_size`` (first on a tie)."""
        best = min(range(len(self.rules)), key=lambda i: abs(eg_size - self.rules[i][0]))
        return self.rules[best][1]

    def sizes(self, eg_size: int, num_egs: int) -> list[int]:
        """The sizes of the minibatches ``nnet3-merge-egs`` makes of ``num_egs`` egs of
        size ``eg_size``, in order (the egs beyond their sum are discarded)."""
        ranges = self.ranges_for(eg_size)
        largest = max(hi for _, hi in ranges)
        out = [largest] * (num_egs // largest)
        left = num_egs - largest * len(out)
        while left > 0:
            fit = max((min(hi, left) for lo, hi in ranges if left >= lo), default=0)
            if fit == 0:
                break
            out.append(fit)
            left -= fit
        return out

    def __str__(self) -> str:
        return self.text

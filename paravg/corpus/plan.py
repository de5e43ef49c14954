"""Who says what: speakers (base voice x variant), the train/test split and time budgets.

* A speaker is a base voice (:data:`~paravg.corpus.engines.ALL_VOICES`) with a variant:
  speed-perturbation factor ``a`` (:data:`SPEED_FACTORS`, the first five as Kaldi's
  ``sox speed`` recipes use them), an engine tempo (duration stretch) drawn from
  ``U(0.9, 1.12)`` and, for espeak, a pitch drawn from ``35..65``.
* ``variants`` counts variants per voice for the full set of 12 voices. When fewer voices
  are installed (no libespeak-ng: 6), every voice gets ``ceil(variants * 12 / voices)``
  variants, so the speaker count stays at about ``12 * variants`` (60 by default, never
  below 40 with the default 5 variants).
* The split is by *source*: every speaker of a held-out source voice is in the test set
  (or the dev set). flite ``slt`` and festival ``slt`` (HTS) are the same human and share
  one source. The held-out sources are taken in :data:`HELD_OUT_ORDER` (one per engine
  first): the test set's first, as many as ``ceil(test_fraction * sources)`` (at least
  one, never all), then, when ``dev_fraction`` > 0, the dev set's, as many as
  ``round(dev_fraction * sources)`` (at least one, and one source always trains). Dev and
  test voices are distinct, and neither trains: LMWT and WIP are tuned on dev and
  applied to test, as a paper reports.
* ``minutes`` of audio are split ``(1 - test_fraction - dev_fraction) : test_fraction :
  dev_fraction`` between the sets and evenly among each set's speakers; a speaker speaks
  until its budget is reached. The test set does not depend on ``dev_fraction``.
* Sentences: disjoint train/test/dev pools (:func:`~paravg.corpus.text.sentence_pools`);
  each speaker reads its set's pool in its own seeded order.

All randomness comes from ``default_rng([seed, crc32(speaker id), ...])``: a speaker's
parameters and sentences do not depend on which other speakers exist or on scheduling.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from paravg.corpus.engines import ALL_VOICES, Voice
from paravg.corpus.text import sentence_pools
from paravg.errors import ConfigError

#: Speed-perturbation factor of variant ``v`` is ``SPEED_FACTORS[v % 20]``.
SPEED_FACTORS = (
    1.00, 1.08, 0.93, 1.12, 0.88, 1.04, 0.96, 1.16, 0.90, 1.06,
    0.98, 1.14, 0.86, 1.10, 0.94, 1.02, 0.91, 1.18, 0.89, 1.07,
)  # fmt: skip
TEMPO_RANGE = (0.9, 1.12)
PITCH_RANGE = (35, 65)
#: Sources held out for the test set, in this order.
HELD_OUT_ORDER = (
    "rms", "ked", "espeak_f4", "espeak_m7", "awb", "kal",
    "espeak_m1", "slt", "espeak_klatt2", "espeak_f2", "espeak_m3",
)  # fmt: skip
#: Sentences in each pool at least, and per expected second of a speaker's budget.
MIN_POOL = 300


@dataclass(frozen=True)
class SpeakerPlan:
    """Everything a worker needs to build one speaker's utterances."""

    speaker: str
    voice: Voice
    subset: str
    speed: float
    tempo: float
    pitch: int
    budget_seconds: float
    sentences: tuple[str, ...]
    seed: int


def speaker_seed(seed: int, speaker: str) -> list[int]:
    """Seed sequence of a speaker: ``[seed, crc32(speaker)]`` (stable across runs)."""
    return [seed, zlib.crc32(speaker.encode())]


def variants_per_voice(variants: int, num_voices: int) -> int:
    """``ceil(variants * 12 / num_voices)``: keeps about ``12 * variants`` speakers."""
    if variants < 1 or num_voices < 1:
        raise ValueError(f"need >= 1 variant and voice, got {variants} and {num_voices}")
    return max(variants, math.ceil(variants * len(ALL_VOICES) / num_voices))


def held_out_split(
    voices: Sequence[Voice], test_fraction: float, dev_fraction: float = 0.0
) -> dict[str, list[str]]:
    """The sources whose speakers form the test set and the dev set (empty when
    ``dev_fraction`` is 0)."""
    sources = list(dict.fromkeys(v.source for v in voices))
    if len(sources) < 2:
        raise ConfigError(
            f"demo: a train/test split by voice needs >= 2 source voices, the installed "
            f"voices give {sources}; install more flite/festival voices, or libespeak-ng "
            "with demo.use_espeak: true"
        )
    order = [s for s in HELD_OUT_ORDER if s in sources]
    order += [s for s in sources if s not in order]
    count = min(max(1, math.ceil(test_fraction * len(sources) - 1e-9)), len(sources) - 1)
    dev = 0
    if dev_fraction > 0:
        dev = max(1, round(dev_fraction * len(sources)))
        if count + dev > len(sources) - 1:
            raise ConfigError(
                f"demo.dev_fraction {dev_fraction} with demo.test_fraction {test_fraction}: "
                f"the {len(sources)} installed source voices cannot give {count} test, {dev} "
                "dev and at least one training source; lower demo.dev_fraction (0: no dev "
                "set) or demo.test_fraction, or install more voices (libespeak-ng with "
                "demo.use_espeak: true)"
            )
    return {"test": order[:count], "dev": order[count : count + dev]}


def plan_speakers(
    voices: Sequence[Voice],
    minutes: float,
    test_fraction: float,
    variants: int,
    seed: int,
    dev_fraction: float = 0.0,
) -> list[SpeakerPlan]:
    """Plans of all speakers, sorted by speaker id."""
    if minutes <= 0:
        raise ConfigError(f"demo.minutes must be > 0, got {minutes}")
    if not 0 < test_fraction < 1:
        raise ConfigError(f"demo.test_fraction must be in (0, 1), got {test_fraction}")
    if not 0 <= dev_fraction < 1 - test_fraction:
        raise ConfigError(
            f"demo.dev_fraction must be in [0, 1 - demo.test_fraction) = [0, "
            f"{1 - test_fraction:g}) (the train set needs the rest), got {dev_fraction}"
        )
    per_voice = variants_per_voice(variants, len(voices))
    held_out = held_out_split(voices, test_fraction, dev_fraction)
    subset_of_source = {src: name for name, srcs in held_out.items() for src in srcs}
    ids = {
        (v, k): f"{v.name}-{k:02d}" for v in voices for k in range(per_voice)
    }  # speaker ids sort like (voice, variant)
    subset_of = {key: subset_of_source.get(key[0].source, "train") for key in ids}
    fractions = {"train": 1 - test_fraction - dev_fraction, "test": test_fraction}
    if dev_fraction > 0:
        fractions["dev"] = dev_fraction
    counts = {s: sum(1 for x in subset_of.values() if x == s) for s in fractions}
    budget = {s: 60.0 * minutes * fractions[s] / counts[s] for s in fractions}
    pool_size = {s: max(MIN_POOL, math.ceil(budget[s]) + 50) for s in fractions}
    pools = dict(zip(fractions, sentence_pools(seed, *pool_size.values()), strict=True))

    plans = []
    for (voice, k), speaker in ids.items():
        subset = subset_of[(voice, k)]
        rng = np.random.default_rng([*speaker_seed(seed, speaker), 0])
        tempo = round(float(rng.uniform(*TEMPO_RANGE)), 4)
        pitch = int(rng.integers(PITCH_RANGE[0], PITCH_RANGE[1] + 1))
        order = rng.permutation(len(pools[subset]))
        plans.append(
            SpeakerPlan(
                speaker=speaker,
                voice=voice,
                subset=subset,
                speed=SPEED_FACTORS[k % len(SPEED_FACTORS)],
                tempo=tempo,
                pitch=pitch,
                budget_seconds=budget[subset],
                sentences=tuple(pools[subset][i] for i in order),
                seed=seed,
            )
        )
    return sorted(plans, key=lambda p: p.speaker)

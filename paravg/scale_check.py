"""Start-up warnings for settings that do not scale to a real corpus.

The demo's settings (``egs.samples_per_iter: 2500``) make a small corpus train for
a few hundred iterations; on 1,000 hours they give 18,001 archives and 172,809
iterations where Kaldi's ``--samples-per-iter 400000`` (``steps/nnet3/get_egs.sh``)
gives 113 archives and 452 iterations. Nothing fails, the run is just 400 times
longer, so the plan says so when the run starts (the main snakemake only, once per
process), naming the option and the figure:

* an experiment's schedule has more than :data:`MAX_ITERS` iterations;
* the archive count is more than ``ARCHIVE_FACTOR`` (10) times off the count
  Kaldi's 400,000 would give for the egs' frames
  (:func:`paravg.egs.plan.archive_count_warning`, also logged by the egs job);
* a job (one archive) trains no minibatch, or its minibatch rule leaves more than a fifth
  of the archive's egs unused (:func:`job_size_warning`): small jobs, a few minibatches
  per archive, need a rule that uses the rest (Kaldi's ``nnet3-merge-egs`` drops it).

The settings for 100-1,000 h: ``config/experiments/kaldi_scale.yaml``
(docs/kaldi-scale.md, "Settings for real corpora").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from paravg.egs.minibatch import MinibatchRule
from paravg.egs.plan import archive_count_warning

#: More iterations than this and the plan warns (Kaldi's wsj schedule at 1,000 h: 452).
MAX_ITERS = 5_000

log = logging.getLogger("paravg.plan")
_warned: set[str] = set()


def iterations_warning(name: str, num_iters: int, samples_per_iter: int) -> str | None:
    """A warning when experiment ``name``'s schedule has more than :data:`MAX_ITERS`
    iterations (each iteration's jobs read one archive of ``samples_per_iter`` egs)."""
    if num_iters <= MAX_ITERS:
        return None
    return (
        f"experiment {name!r}: the schedule has {num_iters:,} iterations (more than "
        f"{MAX_ITERS:,}): egs.samples_per_iter = {samples_per_iter} egs per archive and "
        "iteration; Kaldi's 400000 makes the archives, and the iterations, fewer "
        "(trainer.num_epochs sets the passes: config/experiments/kaldi_scale.yaml)"
    )


def scale_warnings(num_iters: Mapping[str, int], egs_info: Mapping) -> list[str]:
    """The warnings of a run: ``num_iters`` is experiment -> its schedule's iterations,
    ``egs_info`` the egs ``info.json`` (num_frames, frames_per_eg, samples_per_iter)."""
    spi = int(egs_info.get("samples_per_iter", 400_000))
    found = [iterations_warning(name, n, spi) for name, n in num_iters.items()]
    if "num_frames" in egs_info:
        found.append(archive_count_warning(egs_info["num_frames"], egs_info["frames_per_eg"], spi))
    return [w for w in found if w]


#: A job whose minibatch rule leaves more than this fraction of its archive's egs unused warns.
MAX_UNUSED = 0.2


def archive_egs(egs_info: Mapping) -> int:
    """Egs of one training archive, on average: the train egs over the archives (the
    nominal ``egs_per_archive`` where ``num_train_egs`` is absent)."""
    if egs_info.get("num_train_egs") and egs_info.get("num_archives"):
        return int(egs_info["num_train_egs"]) // int(egs_info["num_archives"])
    return int(egs_info.get("egs_per_archive", 0))


def eg_window(egs_info: Mapping) -> int:
    """An eg's size as the minibatch rule sees it (``GetNnetExampleSize``): its stored
    input window (:attr:`paravg.egs.info.EgsInfo.window`); frames_per_eg for an info
    without the contexts (only rules keyed by eg size, ``E=…``, tell the two apart)."""
    from paravg.egs.info import EgsInfo
    from paravg.errors import DataError

    try:
        return EgsInfo.from_dict(dict(egs_info)).window
    except DataError:
        return int(egs_info.get("frames_per_eg", 1))


def job_size_warning(name: str, rule: MinibatchRule, eg_size: int, num_egs: int) -> str | None:
    """A warning when a job of experiment ``name``, one archive of about ``num_egs`` egs
    of size ``eg_size``, trains no minibatch under the minibatch rule ``rule`` or leaves
    more than :data:`MAX_UNUSED` of the egs unused (``nnet3-merge-egs`` drops what no
    size of the rule fits): with jobs of a few minibatches a rule like "16,8" trains on
    a fraction of the data, where a range "1:16" uses every eg."""
    if num_egs <= 0:
        return None
    sizes = rule.sizes(eg_size, num_egs)
    unused = num_egs - sum(sizes)
    if sizes and unused <= MAX_UNUSED * num_egs:
        return None
    largest = max(hi for _, hi in rule.ranges_for(eg_size))
    what = "trains no minibatch" if not sizes else f"leaves {unused} of its {num_egs} egs unused"
    return (
        f"experiment {name!r}: a job {what}: an archive of about {num_egs} egs "
        f"(egs.samples_per_iter) makes minibatches of {sizes} under the minibatch rule "
        f"{rule.text!r} (trainer.minibatch_size; trainer.num_chunk_per_minibatch for chunk "
        f"egs), which drops the rest; a range such as '1:{largest}' uses every eg "
        "(docs/sync-methods.md, 'Jobs of a few minibatches')"
    )


def warn_once(warnings: list[str]) -> list[str]:
    """Log each warning not yet logged by this process; returns those logged."""
    new = [w for w in warnings if w not in _warned]
    for w in new:
        _warned.add(w)
        log.warning("%s", w)
    return new

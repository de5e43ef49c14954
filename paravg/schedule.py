"""Kaldi's training schedule as pure functions, shared by the Snakefile and the package.

Mirrors ``steps/libs/nnet3/train/common.py`` and ``steps/nnet3/train_dnn.py``
(kaldi-recipe.md §4.3-4.5, §4.8). Iterations are numbered as in Kaldi: ``<t>.pt`` is the
model at the start of iteration t; the jobs of iteration t write ``<t+1>/job<j>.pt``.
Jobs are numbered 0..N-1 here (Kaldi: 1..N).

With A archives, F frames per eg, E epochs, jobs ramping J0 → J1:

    num_archives_to_process = int(E · A · F)
    num_iters               = int(num_archives_to_process · 2 / (J0 + J1))
    num_jobs(t)             = int(0.5 + J0 + (J1 − J0) · t / num_iters)
    archives_processed(t)   = Σ_{s<t} num_jobs(s)
    effective_lr(t)         = lr0 · exp(P(t) · ln(lr1/lr0) / num_archives_to_process),
                              with P(t) = archives_processed(t); lr1 on the last iteration
    per-job lr(t)           = num_jobs(t) · effective_lr(t)

At a low frame rate (``model.frame_subsampling_factor`` f) F is the number of *output*
frames of an eg, ⌈frames_per_eg / f⌉ (:func:`output_frames_per_eg`): Kaldi's egs made with
``--frame-subsampling-factor f`` have output indexes t = 0, f, 2f, … , and its chain
training counts ``num_archives_expanded`` = archives × f the same way (one pass of the
eg per frame shift). Job frame k' of the schedule is eg frame f·k' (:mod:`paravg.plan`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from paravg.errors import ConfigError


def output_frames_per_eg(frames_per_eg: int, frame_subsampling_factor: int = 1) -> int:
    """⌈frames_per_eg / f⌉: the eg frames k = 0, f, 2f, … < frames_per_eg a model of
    frame-subsampling-factor f has outputs at (all of them at f = 1)."""
    return -(-frames_per_eg // frame_subsampling_factor)


def num_archives_to_process(num_epochs: float, num_archives: int, frames_per_eg: int) -> int:
    """``int(num_epochs · num_archives · frames_per_eg)``: an epoch reads every frame once."""
    return int(num_epochs * num_archives * frames_per_eg)


def num_iters(
    num_epochs: float, num_archives: int, frames_per_eg: int, jobs_initial: int, jobs_final: int
) -> int:
    """Number of iterations: archives to process divided by the average job count."""
    to_process = num_archives_to_process(num_epochs, num_archives, frames_per_eg)
    return int(to_process * 2 / (jobs_initial + jobs_final))


def num_jobs(
    iteration: int, total_iters: int, jobs_initial: int, jobs_final: int, step: int = 1
) -> int:
    """Kaldi's ``get_current_num_jobs`` (``--trainer.optimization.num-jobs-step``): the
    ideal ramp J0 + (J1 − J0)·t/T rounded to the nearest multiple of ``step``,
    ``int(0.5 + ideal / step) · step``, or to the nearest integer while ideal < step."""
    ideal = jobs_initial + (jobs_final - jobs_initial) * iteration / total_iters
    if ideal < step:
        return int(0.5 + ideal)
    return int(0.5 + ideal / step) * step


def archive_and_frame(
    archives_processed: int, job: int, num_archives: int, frames_per_eg: int
) -> tuple[int, int]:
    """0-based archive index and frame index of job ``job`` (0-based) of an iteration.

    Kaldi (1-based job n): k = processed + n − 1, archive = k % A + 1,
    frame = (k // A + archive) % F. Returned archive is 0-based (Kaldi's minus one);
    the frame uses Kaldi's 1-based archive number so frames match Kaldi exactly.
    """
    k = archives_processed + job
    archive_1based = k % num_archives + 1
    frame = (k // num_archives + archive_1based) % frames_per_eg
    return archive_1based - 1, frame


@dataclass(frozen=True)
class Schedule:
    """The whole schedule of one experiment, derived from egs and trainer settings."""

    num_archives: int
    frames_per_eg: int
    num_epochs: float
    jobs_initial: int
    jobs_final: int
    initial_effective_lrate: float
    final_effective_lrate: float
    max_models_combine: int = 20
    num_jobs_step: int = 1

    def __post_init__(self) -> None:
        if self.num_jobs_step < 1:
            raise ConfigError(f"trainer.num_jobs_step must be >= 1, got {self.num_jobs_step}")
        if self.jobs_final > self.num_archives:
            raise ConfigError(
                f"trainer.num_jobs_final ({self.jobs_final}) must be <= the number of egs "
                f"archives ({self.num_archives}): lower it or lower egs.samples_per_iter"
            )
        if self.num_iters < 1:
            raise ConfigError(
                f"the schedule has no iterations (num_epochs={self.num_epochs}, "
                f"num_archives={self.num_archives}): raise trainer.num_epochs"
            )

    @classmethod
    def from_config(
        cls, trainer: dict, num_archives: int, frames_per_eg: int, max_models_combine: int = 20
    ) -> Schedule:
        """Build from a ``trainer`` config section and the egs geometry."""
        return cls(
            num_archives=num_archives,
            frames_per_eg=frames_per_eg,
            num_epochs=trainer["num_epochs"],
            jobs_initial=trainer["num_jobs_initial"],
            jobs_final=trainer["num_jobs_final"],
            initial_effective_lrate=trainer["initial_effective_lrate"],
            final_effective_lrate=trainer["final_effective_lrate"],
            max_models_combine=max_models_combine,
            num_jobs_step=trainer.get("num_jobs_step", 1),
        )

    @cached_property
    def num_archives_to_process(self) -> int:
        return num_archives_to_process(self.num_epochs, self.num_archives, self.frames_per_eg)

    @cached_property
    def num_iters(self) -> int:
        return num_iters(
            self.num_epochs,
            self.num_archives,
            self.frames_per_eg,
            self.jobs_initial,
            self.jobs_final,
        )

    @cached_property
    def jobs_per_iter(self) -> tuple[int, ...]:
        return tuple(
            num_jobs(t, self.num_iters, self.jobs_initial, self.jobs_final, self.num_jobs_step)
            for t in range(self.num_iters)
        )

    @cached_property
    def archives_processed_before(self) -> tuple[int, ...]:
        """archives_processed(t) for t = 0..num_iters (the last entry is the total)."""
        out = [0]
        for n in self.jobs_per_iter:
            out.append(out[-1] + n)
        return tuple(out)

    def num_jobs(self, t: int) -> int:
        self._check(t)
        return self.jobs_per_iter[t]

    def data_fraction(self, t: int) -> float:
        """x_t = archives processed before iteration t / archives to process, ≤ 1: where
        a per-iteration schedule (the dropout schedule) is evaluated
        (``train_rnn.py``/``train_dnn.py``: ``data_fraction``)."""
        self._check(t)
        return min(1.0, self.archives_processed_before[t] / self.num_archives_to_process)

    def effective_lrate(self, t: int) -> float:
        """Exponential in archives processed; exactly the final rate on the last iteration."""
        self._check(t)
        if t + 1 >= self.num_iters:
            return self.final_effective_lrate
        ratio = math.log(self.final_effective_lrate / self.initial_effective_lrate)
        return self.initial_effective_lrate * math.exp(
            self.archives_processed_before[t] * ratio / self.num_archives_to_process
        )

    def learning_rate(self, t: int) -> float:
        """Per-job learning rate: num_jobs(t) × effective lr (averaging divides the step by N)."""
        return self.num_jobs(t) * self.effective_lrate(t)

    def archive_and_frame(self, t: int, job: int) -> tuple[int, int]:
        """0-based archive and frame index read by job ``job`` of iteration ``t``."""
        self._check(t)
        if not 0 <= job < self.jobs_per_iter[t]:
            raise ValueError(f"iteration {t} has {self.jobs_per_iter[t]} jobs; no job {job}")
        return archive_and_frame(
            self.archives_processed_before[t], job, self.num_archives, self.frames_per_eg
        )

    def models_to_combine(self) -> list[int]:
        """Kaldi's ``get_model_combine_iters``: the model indices offered to combination."""
        approx_iters_per_epoch_final = self.num_archives * self.frames_per_eg / self.jobs_final
        n0 = min(int(approx_iters_per_epoch_final / 2) + 1, int(self.num_iters / 2))
        last = self.num_iters
        if n0 > self.max_models_combine:
            factor = int(n0 / self.max_models_combine)
            models = set(range(last - n0 + 1, last + 1, factor)) | {last}
        else:
            n = min(self.max_models_combine, self.num_iters // 2)
            models = set(range(last - n + 1, last + 1))
        models = {m for m in models if m >= 1} or {last}
        return sorted(models)

    def _check(self, t: int) -> None:
        if not 0 <= t < self.num_iters:
            raise ValueError(f"iteration {t} outside 0..{self.num_iters - 1}")

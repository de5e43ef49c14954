"""Kaldi's schedule: values from steps/libs/nnet3/train/common.py and its worked examples."""

import itertools
import math

import pytest

from paravg import schedule
from paravg.schedule import Schedule


def test_num_jobs_ramp_matches_kaldi_unit_test():
    # common.py's own self-test: 12 iterations, 2 -> 9 jobs.
    got = [schedule.num_jobs(t, 12, 2, 9) for t in range(12)]
    assert got == [2, 3, 3, 4, 4, 5, 6, 6, 7, 7, 8, 8]


def test_num_jobs_step_rounds_to_multiples():
    got = [schedule.num_jobs(t, 10, 2, 8, step=2) for t in range(10)]
    assert all(n % 2 == 0 for n in got)
    assert got[0] == 2 and got[-1] == 8


def wsj_like():
    # 300 h example of kaldi-recipe.md §4.5: 34 archives, 3 epochs, 2 -> 10 jobs.
    return Schedule(
        num_archives=34,
        frames_per_eg=8,
        num_epochs=3,
        jobs_initial=2,
        jobs_final=10,
        initial_effective_lrate=0.0015,
        final_effective_lrate=0.00015,
    )


def test_worked_example_iterations_and_rates():
    s = wsj_like()
    assert s.num_archives_to_process == 816
    assert s.num_iters == 136
    assert s.num_jobs(0) == 2 and s.learning_rate(0) == pytest.approx(0.003)
    assert s.num_jobs(68) == 6
    assert s.effective_lrate(68) == pytest.approx(7.0e-4, rel=0.03)
    assert s.num_jobs(134) == 10
    assert s.effective_lrate(134) == pytest.approx(1.6e-4, rel=0.03)
    # the last iteration uses the final rate exactly
    assert s.effective_lrate(135) == 0.00015
    assert s.learning_rate(135) == pytest.approx(10 * 0.00015)


def test_learning_rate_is_exponential_in_archives_processed():
    s = wsj_like()
    for t in (1, 50, 100):
        frac = s.archives_processed_before[t] / s.num_archives_to_process
        assert s.effective_lrate(t) == pytest.approx(0.0015 * math.exp(frac * math.log(0.1)))
    rates = [s.effective_lrate(t) for t in range(s.num_iters)]
    assert all(a >= b for a, b in itertools.pairwise(rates))


def test_archive_and_frame_of_jobs():
    s = wsj_like()
    # Kaldi iteration 0: archives 1, 2 (1-based) with frames 1, 2.
    assert s.archive_and_frame(0, 0) == (0, 1)
    assert s.archive_and_frame(0, 1) == (1, 2)
    # every (archive, frame) pair is visited equally often over the run
    seen = {}
    for t in range(s.num_iters):
        for j in range(s.num_jobs(t)):
            a, f = s.archive_and_frame(t, j)
            assert 0 <= a < 34 and 0 <= f < 8
            seen[a, f] = seen.get((a, f), 0) + 1
    assert len(seen) == 34 * 8
    assert max(seen.values()) - min(seen.values()) <= 1


def test_frame_offset_advances_when_counter_wraps():
    # k = processed + job; frame = (k // A + archive_1based) % F
    assert schedule.archive_and_frame(0, 0, 4, 8) == (0, 1)
    assert schedule.archive_and_frame(4, 0, 4, 8) == (0, 2)
    assert schedule.archive_and_frame(3, 0, 4, 8) == (3, 4)


def test_models_to_combine_worked_example():
    assert wsj_like().models_to_combine() == list(range(117, 137))


def test_models_to_combine_subsamples_long_runs():
    s = Schedule(
        num_archives=400,
        frames_per_eg=8,
        num_epochs=4,
        jobs_initial=2,
        jobs_final=8,
        initial_effective_lrate=1e-3,
        final_effective_lrate=1e-4,
    )
    models = s.models_to_combine()
    assert models[-1] == s.num_iters
    assert len(models) <= 21
    assert all(1 <= m <= s.num_iters for m in models)


def test_bad_schedules_are_refused_with_a_message():
    with pytest.raises(ValueError, match="num_jobs_final"):
        Schedule(
            num_archives=3,
            frames_per_eg=8,
            num_epochs=1,
            jobs_initial=1,
            jobs_final=4,
            initial_effective_lrate=1e-3,
            final_effective_lrate=1e-4,
        )
    s = wsj_like()
    with pytest.raises(ValueError, match="iteration"):
        s.learning_rate(s.num_iters)
    with pytest.raises(ValueError, match="no job"):
        s.archive_and_frame(0, 2)

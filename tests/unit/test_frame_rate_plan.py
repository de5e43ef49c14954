"""The training schedule of a low-frame-rate experiment: ⌈frames_per_eg / f⌉ output
frames per eg (archives to process, iterations and learning rates follow), job frame k'
is eg frame f·k'; an experiment without ``model.frame_subsampling_factor`` plans exactly
as before (the schema gives the key no default)."""

import pytest
import yaml

from paravg.config import REPO_CONFIG, deep_merge, resolved_experiments, validate_config
from paravg.errors import ConfigError
from paravg.plan import experiment_plans
from paravg.schedule import Schedule, output_frames_per_eg

INFO = {"num_archives": 12, "frames_per_eg": 8, "num_frames": 123456}


def config(experiments):
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    return validate_config(deep_merge(cfg, {"experiments": experiments}))


def test_output_frames_per_eg():
    assert [output_frames_per_eg(8, f) for f in (1, 2, 3, 4, 8, 9)] == [8, 4, 3, 2, 1, 1]
    assert output_frames_per_eg(25, 3) == 9  # Kaldi's chain egs: t = 0, 3, ..., 24


def test_a_factor_3_experiment_trains_eg_frames_0_3_6_on_a_shorter_schedule():
    cfg = config({"full": {}, "lfr": {"model": {"frame_subsampling_factor": 3}}})
    plans = experiment_plans(cfg, INFO)
    full, lfr = plans["full"], plans["lfr"]
    epochs = full.trainer["num_epochs"]
    assert full.schedule.num_archives_to_process == int(epochs * 12 * 8)
    assert lfr.schedule.num_archives_to_process == int(epochs * 12 * 3)
    assert lfr.schedule == Schedule.from_config(lfr.trainer, 12, 3)
    assert lfr.num_iters < full.num_iters
    frames = {
        lfr.job_params(t, j)["frame"] for t in range(lfr.num_iters) for j in range(lfr.num_jobs(t))
    }
    assert frames == {0, 3, 6}
    for t in range(lfr.num_iters):
        for j in range(lfr.num_jobs(t)):
            assert lfr.job_params(t, j)["frame"] == 3 * lfr.schedule.archive_and_frame(t, j)[1]
    full_frames = {
        full.job_params(t, j)["frame"]
        for t in range(full.num_iters)
        for j in range(full.num_jobs(t))
    }
    assert full_frames == set(range(8))
    # the learning rates run their whole course over the shorter schedule
    assert lfr.learning_rates[-1] / lfr.num_jobs(lfr.num_iters - 1) == pytest.approx(
        full.learning_rates[-1] / full.num_jobs(full.num_iters - 1)
    )
    assert lfr.fingerprint(1) != full.fingerprint(1)


def test_without_the_key_nothing_changes():
    """No default in the schema: the resolved model config has no key, so the model files'
    headers and the fingerprints stay those of every run before it; an explicit 1 plans
    the same jobs."""
    cfg = config({"a": {}, "one": {"model": {"frame_subsampling_factor": 1}}})
    for exp in resolved_experiments(cfg).values():
        assert exp["model"].get("frame_subsampling_factor", 1) == 1
    assert "frame_subsampling_factor" not in resolved_experiments(cfg)["a"]["model"]
    plans = experiment_plans(cfg, INFO)
    a, one = plans["a"], plans["one"]
    assert a.schedule == one.schedule
    assert [a.job_params(t, 0) for t in range(a.num_iters)] == [
        one.job_params(t, 0) for t in range(one.num_iters)
    ]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3"])
def test_the_schema_takes_an_integer_factor_of_at_least_1(bad):
    with pytest.raises(ConfigError, match="frame_subsampling_factor"):
        config({"x": {"model": {"frame_subsampling_factor": bad}}})

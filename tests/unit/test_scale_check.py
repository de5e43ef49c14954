"""The start-up warnings of settings that do not scale (paravg.scale_check): a schedule of
more than 5,000 iterations, an archive count 10x off Kaldi's samples_per_iter=400,000."""

import logging

import pytest

from paravg import scale_check
from paravg.egs.plan import archive_count_warning
from tests.unit.test_dag import Checkpoints, dag_of

FRAMES_1000H = 360_000_000  # 1,000 h at 100 frames/s


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    monkeypatch.setattr(scale_check, "_warned", set())


def test_the_demo_archive_size_on_1000_hours_warns_naming_the_option_and_the_figures():
    w = archive_count_warning(FRAMES_1000H, 8, 2500)
    assert w is not None
    assert "egs.samples_per_iter = 2500" in w
    assert "18,001 archives" in w and "113" in w and "400000" in w


@pytest.mark.parametrize(
    "frames, spi",
    [(FRAMES_1000H, 400_000), (FRAMES_1000H, 100_000), (96_000, 2500), (1, 2500)],
)
def test_archive_counts_within_10x_of_kaldis_do_not_warn(frames, spi):
    # 113 vs 451 archives; the demo's 16 minutes: 5 archives vs Kaldi's 1
    assert archive_count_warning(frames, 8, spi) is None


class Info(Checkpoints):
    def __init__(self, info):
        super().__init__()
        self.info = info

    def egs_info(self):
        return self.info


LONG = {"num_archives": 700, "frames_per_eg": 8, "num_frames": 700 * 8 * 2500,
        "samples_per_iter": 2500}  # fmt: skip


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_plan_warns_once_at_start_up_when_the_schedule_passes_5000_iterations(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="paravg.plan")
    dag, _ = dag_of(tmp_path, checkpoints=Info(LONG))
    assert dag.plan("default").num_iters > scale_check.MAX_ITERS
    dag.plan("default")
    dag_of(tmp_path, checkpoints=Info(LONG))[0].plan("default")  # the same process again
    (w,) = [m for m in warnings_of(caplog) if "iterations" in m]
    assert "experiment 'default'" in w and "egs.samples_per_iter = 2500" in w
    assert f"{dag.plan('default').num_iters:,} iterations" in w
    # 701 archives for 14M frames where Kaldi's 400000 gives 5: warned as well
    (a,) = [m for m in warnings_of(caplog) if "archives for" in m]
    assert "701 archives" in a and "would give 5 " in a


def test_a_job_process_does_not_warn(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="paravg.plan")
    dag, _ = dag_of(tmp_path, checkpoints=Info(LONG), target_jobs=[{"rule": "train"}])
    dag.plan("default")
    assert warnings_of(caplog) == []


def test_a_kaldi_size_schedule_does_not_warn(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="paravg.plan")
    info = {"num_archives": 113, "frames_per_eg": 8, "num_frames": FRAMES_1000H,
            "samples_per_iter": 400_000}  # fmt: skip
    dag_of(tmp_path, checkpoints=Info(info))[0].plan("default")
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    "rule, num_egs, warns",
    [
        ("16,8", 97, None),  # sync_paper_lstm.yaml: 6 x 16, 1 chunk unused
        ("16,8", 31, "leaves 7 of its 31 egs unused"),  # 16 + 8: jobs of two minibatches
        ("1:16", 31, None),  # 16 + 15
        ("16", 15, "trains no minibatch"),
        ("1:16", 15, None),  # one minibatch of 15
        ("256", 2500, None),  # the demo: 9 x 256, 196 (7.8 %) unused
    ],
)
def test_a_job_that_drops_much_of_its_archive_warns_naming_the_options(rule, num_egs, warns):
    from paravg.egs.minibatch import MinibatchRule

    w = scale_check.job_size_warning("e", MinibatchRule.parse(rule), 48, num_egs)
    if warns is None:
        assert w is None
        return
    assert warns in w and "egs.samples_per_iter" in w and "trainer.minibatch_size" in w
    assert "'1:16'" in w and f"{rule!r}" in w


def test_the_plan_warns_when_an_archive_holds_less_than_one_minibatch(tmp_path, caplog):
    """70 egs per archive against the demo's minibatch_size 256: the jobs train nothing."""
    caplog.set_level(logging.WARNING, logger="paravg.plan")
    info = {"num_archives": 5, "frames_per_eg": 8, "num_frames": 5 * 8 * 70,
            "samples_per_iter": 70, "egs_per_archive": 70}  # fmt: skip
    dag_of(tmp_path, checkpoints=Info(info))[0].plan("default")
    (w,) = [m for m in warnings_of(caplog) if "minibatch" in m]
    assert "experiment 'default': a job trains no minibatch" in w and "'256'" in w
    assert scale_check.archive_egs({**info, "num_train_egs": 330}) == 66

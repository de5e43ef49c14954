"""The layout's reader methods: a reader given a directory reaches every file through
:class:`~paravg.layout.Layout`, never by composing a path (issue 24)."""

import os
from pathlib import Path

import pytest

from paravg.layout import Layout


def test_data_files_of_readers():
    L = Layout("res")
    assert L.text("test") == "res/data/test/text" == L.data_file("test", "text")
    assert L.targets_scp("dev") == "res/data/dev/targets.scp"
    assert L.targets_scp("{set}") == "res/data/{set}/targets.scp"  # a pattern, as every method


def test_files_of_the_export_and_of_tools_beside_the_run():
    L = Layout("res")
    assert L.kaldi_file("e", "conf/model.conf") == "res/exp/e/kaldi/conf/model.conf"
    assert L.kaldi_file("e", "am/final.mdl").startswith(L.kaldi_dir("e") + "/")
    assert L.tool_dir("bench_sync_paper") == "res/bench_sync_paper"


def test_eval_of_another_final_model_and_log_dirs():
    L = Layout("res", "lg")
    assert L.eval_model_result("e", "ema", "test") == L.eval_ema_result("e", "test")
    assert L.eval_model_result("e", "swa", "dev") == "res/exp/e/eval/swa/dev.json"
    assert L.log_dir("train_job") == "lg/train_job"
    assert L.log_dir("train_job", "e") == "lg/train_job/e"
    assert L.log("train_job", "e/1/job0").startswith(L.log_dir("train_job", "e") + "/")


@pytest.mark.parametrize(
    ("exp_dir", "results"),
    [
        ("results/exp/default", "results"),
        ("results/exp/default/", "results"),
        ("/srv/run 1/results/exp/a-b", "/srv/run 1/results"),
        ("exp/default", "."),
        ("results/exp/other/../default", "results"),
    ],
)
def test_from_exp_dir_is_the_layout_of_that_directory(exp_dir, results):
    L = Layout.from_exp_dir(exp_dir)
    assert L.results == results
    name = Path(exp_dir).name
    assert Path(L.exp_dir(name)) == Path(os.path.normpath(exp_dir))
    assert Path(L.final_summary(name)) == Path(os.path.normpath(exp_dir), "final.json")
    assert Layout.from_exp_dir(Path(exp_dir)) == L  # a Path as well as a string


def test_from_exp_dir_of_a_bare_name_resolves_it(tmp_path, monkeypatch):
    (tmp_path / "results" / "exp").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "results" / "exp")
    L = Layout.from_exp_dir("default")
    assert L.results == str(tmp_path / "results")
    with pytest.raises(ValueError, match="not an experiment directory"):
        Layout.from_exp_dir("..")  # results/ itself
    with pytest.raises(ValueError, match="not an experiment directory"):
        Layout.from_exp_dir("results/runs/default")  # not <results>/exp/<name>


def test_from_exp_root():
    assert Layout.from_exp_root("results/exp") == Layout("results")
    assert Layout.from_exp_root(Path("/a/b/exp")).decode_scores("e", "t") == (
        "/a/b/exp/e/decode/t/scores.json"
    )
    with pytest.raises(ValueError, match="not the experiments directory"):
        Layout.from_exp_root("results/experiments")


def test_in_workdir():
    layout = Layout.in_workdir("/tmp/ws")
    assert layout == Layout("/tmp/ws/results", "/tmp/ws/logs")
    assert Layout.in_workdir("/tmp/ws", "out").egs_info() == "/tmp/ws/out/egs/info.json"
    assert Layout.in_workdir("/tmp/ws", "/data/r").results == "/data/r"  # absolute: as is


def touch(path: str, text: str = "{}") -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Path(path).write_text(text)


def test_existing_files_by_their_indices_and_names(tmp_path):
    L = Layout(str(tmp_path / "r [1]"))  # glob characters in the root are no wildcards
    for t in (0, 2, 10):
        touch(L.diag("e", t))
    touch(L.diag("other", 5))
    touch(f"{L.exp_dir('e')}/diag/.3.json.abc.tmp")  # an atomic write in flight
    touch(f"{L.exp_dir('e')}/diag/notes.json")  # no index: not a diag file
    os.makedirs(L.diag("e", 4))  # a directory is no file
    assert L.existing("diag", "e") == {(0,): L.diag("e", 0), (2,): L.diag("e", 2),
                                       (10,): L.diag("e", 10)}  # fmt: skip
    assert L.existing("diag", "nothing") == {}
    assert list(L.existing("diag")) == [("e", 0), ("e", 2), ("e", 10), ("other", 5)]

    for t, j in ((1, 0), (1, 1), (2, 0)):
        touch(L.job_stats("e", t, j))
    touch(L.job_model("e", 1, 0))
    touch(L.sync_summary("e", 1))  # sync/1.json: no job file
    assert L.existing("job_stats", "e") == {
        (1, 0): L.job_stats("e", 1, 0),
        (1, 1): L.job_stats("e", 1, 1),
        (2, 0): L.job_stats("e", 2, 0),
    }
    assert list(L.existing("job_stats", "e", 1)) == [(0,), (1,)]  # leading arguments fixed
    assert list(L.existing("job_stats", "e", job=0)) == [(1,), (2,)]  # or by keyword

    touch(L.eval_result("e", "test"))
    touch(L.eval_result("e", "dev"))
    touch(L.eval_model_result("e", "ema", "test"))
    assert list(L.existing("eval_result", "e")) == [("dev",), ("test",)]
    assert L.existing("eval_model_result", "e") == {("ema", "test"): L.eval_ema_result("e", "test")}

    for it, ext in ((0, "npz"), (3, "npz"), (3, "json")):
        touch(L.ubm(it, ext))
    assert list(L.existing("ubm")) == [(0,), (3,)]  # ext keeps its default, npz
    assert list(L.existing("ubm", ext="json")) == [(3,)]

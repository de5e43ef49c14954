"""The live progress view renders whatever has finished, beside a running pipeline."""

import json
from pathlib import Path

import pytest
import yaml
from matplotlib.image import imread
from plots_synth import JOBS, write_run

from paravg.layout import Layout
from paravg.plots import FIGURES
from paravg.plots.runs import load_run
from paravg.progress import main, render_progress, status_line


def test_progress_on_a_half_finished_run(half_run, tmp_path, capsys):
    out = tmp_path / "progress"
    assert main([str(half_run), "--out", str(out)]) == 0
    for name in FIGURES:
        png = out / "running" / f"{name}.png"
        assert png.read_bytes()[:4] == b"\x89PNG" and imread(png).shape[0] > 300
    index = (out / "index.html").read_text()
    assert "running/objective.png" in index and "http-equiv='refresh'" not in index
    printed = capsys.readouterr().out
    assert "running: 8 iterations synced; iteration 8: 2 jobs finished" in printed
    assert "model 7: valid" in printed and "; finished" not in printed.split("\n")[0]
    # nothing was written into the experiment directory
    assert not (half_run / "report").exists() and not (half_run / "progress").exists()


def test_progress_grows_with_the_run(tmp_path):
    """Re-rendering after more files appear draws them; an iteration with one job is fine."""
    exp = tmp_path / "exp" / "default"
    write_run(exp, JOBS, stop_at=(0, 0))  # only init.json: nothing trained yet
    out = tmp_path / "p"
    runs = render_progress([exp], out)
    assert runs[0].iterations == [] and (out / "default" / "objective.png").is_file()
    write_run(exp, JOBS, stop_at=(3, 1))
    runs = render_progress([exp], out)
    assert runs[0].completed_iterations == [0, 1, 2] and sorted(runs[0].jobs[3]) == [0]


def test_progress_with_config_shows_the_plan(half_run, tmp_path, capsys):
    cfg = tmp_path / "my.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "experiments": {"running": {}},
                "trainer": {"num_epochs": 1.5, "num_jobs_initial": 1, "num_jobs_final": 4},
            }
        )
    )
    info = Path(Layout.from_exp_dir(half_run).egs_info())
    info.parent.mkdir()
    info.write_text(json.dumps({"num_archives": 4, "frames_per_eg": 8}))
    out = tmp_path / "progress"
    assert main([str(half_run), "--out", str(out), "--config", str(cfg)]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    # 1.5 epochs x 4 archives x 8 frames = 48 archive-passes over (1+4)/2 jobs: 19 iterations
    assert line.startswith("running: 8/19 iterations synced; iteration 8: 2/2 jobs finished")


def test_several_experiments_and_a_watch_that_ends(full_run, half_run, tmp_path, capsys):
    out = tmp_path / "progress"
    assert main([str(full_run), str(half_run), "--out", str(out)]) == 0
    assert (out / "comparison.png").is_file() and (out / "results.html").is_file()
    assert "comparison.png" in (out / "index.html").read_text()
    printed = capsys.readouterr().out
    assert "default: 12 iterations synced" in printed and "finished (eval accuracy: test" in printed
    # --watch stops by itself once every experiment has final.json
    assert main([str(full_run), "--out", str(out), "--watch", "0.01"]) == 0


def test_progress_skips_an_unreadable_file(half_run, tmp_path, capsys):
    (half_run / "diag" / "2.json").write_text("{")
    assert main([str(half_run), "--out", str(tmp_path / "p")]) == 0
    assert "1 unreadable files skipped" in capsys.readouterr().out


def test_missing_experiment_dir_is_an_error(tmp_path):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "exp" / "typo"), "--out", str(tmp_path / "p")])


def test_a_dir_outside_a_layout_is_an_error(tmp_path, capsys):
    copy = write_run(tmp_path / "backup" / "default", JOBS[:2])
    with pytest.raises(SystemExit):
        main([str(copy), "--out", str(tmp_path / "p")])
    assert "not an experiment directory" in capsys.readouterr().err


def test_status_line_of_a_finished_run(full_run):
    line = status_line(load_run(full_run))
    assert line.startswith("default: 12 iterations synced; model 12: valid")
    assert "2 jobs rejected" in line and line.endswith("finished (eval accuracy: test 45.0%)")


def test_load_config_merges_files_and_overlays_in_order(tmp_path):
    from paravg.config import REPO_CONFIG
    from paravg.progress import load_config

    mine = tmp_path / "my.yaml"
    mine.write_text(yaml.safe_dump({"results": "out", "trainer": {"num_epochs": 2.0}}))
    config = load_config([REPO_CONFIG, mine, {"trainer": {"num_jobs_final": 3}}])
    assert config["results"] == "out" and config["trainer"]["num_epochs"] == 2.0
    assert config["trainer"]["num_jobs_final"] == 3  # a dict is an overlay, merged last

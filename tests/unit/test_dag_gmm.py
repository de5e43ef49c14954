"""The GMM stage's DAG answers (data.targets: gmm): fan-out/fan-in per EM iteration, the
alignment each iteration reads, gmm-est's mixup schedule, and the cross-key checks."""

import pytest

from paravg.errors import ConfigError, DataError
from paravg.gmm.stages import mix_up_target
from tests.unit.test_dag import dag_of

GMM = {
    "data": {"targets": "gmm"},
    "gmm": {
        "nj": 3,
        "mono": {"num_iters": 6, "totgauss": 200, "max_iter_inc": 4, "realign_iters": [1, 2, 4, 9]},
        "tri": {"num_leaves": 80, "tot_gauss": 300, "num_iters": 5, "realign_iters": [3]},
    },
}


def gmm_dag(tmp_path, **overrides):
    cfg = {**GMM, **overrides}
    return dag_of(tmp_path, cfg)[0]


def test_a_run_on_the_sets_own_targets_has_no_gmm_stage(tmp_path):
    dag, _ = dag_of(tmp_path, {"data": {"targets": "data"}})
    assert not dag.gmm.enabled
    assert dag.data.source_dir("train") == dag.layout.demo_file("train")
    assert "num_pdfs" not in dag.egs.source_files()


def test_each_set_is_prepared_from_its_gmm_targets_dir(tmp_path):
    dag = gmm_dag(tmp_path)
    root = f"{tmp_path}/results/gmm"
    assert dag.data.source_dir("test") == f"{root}/data/test"
    assert dag.data.source_inputs("test") == [
        f"{root}/data/test/wav.scp",
        f"{root}/data/test/utt2spk",
        f"{root}/data/test/targets.ark",
    ]
    # the GMM stage itself reads the demo corpus's set
    assert dag.gmm.source_dir("test") == dag.layout.demo_file("test")
    assert dag.gmm.set_inputs("test") == dag.data.original_inputs("test")
    # the egs take the network's output dimension from the tree
    assert dag.egs.source_files()["num_pdfs"] == f"{root}/tri/num_pdfs"
    # decoded on the GMM stage's own word graph, without the (monophone) phone graph
    assert dag.recognition.enabled and dag.recognition.why_not is None
    assert list(dag.recognition.graph_dirs()) == ["words"]


def test_with_speed_perturbation_the_gmm_stage_trains_on_the_source_set(tmp_path):
    """data.perturb: the network's training set is the copies (train_sp, made from the
    prepared train set, itself from the GMM targets), the GMM stage's is the source."""
    dag = gmm_dag(tmp_path, data={**GMM["data"], "perturb": {"speed": [0.9, 1.0, 1.1]}})
    assert dag.train_set == "train_sp" and dag.source_train_set == "train"
    root = f"{tmp_path}/results/gmm"
    assert dag.gmm.acc_inputs("mono", 1, 1)["feats"] == f"{root}/feats/train/feats.1.scp"
    assert dag.gmm.realign_inputs("tri", 3, 2)["feats"] == f"{root}/feats/train/feats.2.scp"
    assert dag.gmm.demo_dict_sources()["text"] == dag.layout.demo_file("train/text")


def test_a_users_graph_is_not_decoded_with_gmm_targets(tmp_path):
    from paravg.graph.settings import decoding_enabled

    dag = gmm_dag(tmp_path)
    config = {**dag.config, "graph": {**dag.config["graph"], "source": "hclg"}}
    enabled, why = decoding_enabled(config)
    assert not enabled and "graph.source hclg" in why and "not the tree's" in why


def test_accumulation_fans_out_per_job_and_reads_the_latest_alignment(tmp_path):
    gmm = gmm_dag(tmp_path).gmm
    assert list(gmm.jobs()) == [1, 2, 3]
    # realignments at or beyond num_iters are ignored, as train_mono.sh ignores them
    assert gmm.realign_iters("mono") == [1, 2, 4]
    alis = [gmm.acc_inputs("mono", x, 2)["ali"].rsplit("/", 1)[1] for x in range(6)]
    assert alis == ["ali.equal.2.ark", "ali.1.2.ark", "ali.2.2.ark", "ali.2.2.ark",
                    "ali.4.2.ark", "ali.4.2.ark"]  # fmt: skip
    # tri starts from mono's alignment converted to the tree
    alis = [gmm.acc_inputs("tri", x, 1)["ali"].rsplit("/", 1)[1] for x in range(1, 5)]
    assert alis == ["ali.convert.1.ark", "ali.convert.1.ark", "ali.3.1.ark", "ali.3.1.ark"]
    # ... unless train_deltas.sh realigns at its first iteration
    gmm.settings["tri"]["realign_iters"] = [1, 3]
    assert gmm.realign_iters("tri") == [1, 3]
    assert gmm.acc_inputs("tri", 2, 1)["ali"].endswith("/tri/ali.1.1.ark")
    assert gmm.acc_inputs("tri", 2, 1)["model"].endswith("/gmm/tri/2.mdl")


def test_the_estimate_is_the_fan_in_of_every_jobs_accumulator(tmp_path):
    gmm = gmm_dag(tmp_path).gmm
    inputs = gmm.est_inputs("mono", 3)
    assert inputs["model"].endswith("/mono/2.mdl")
    assert [a.rsplit("/", 1)[1] for a in inputs["accs"]] == ["2.1.acc", "2.2.acc", "2.3.acc"]
    assert inputs["first"].endswith("/mono/0.mdl")
    assert "first" not in gmm.est_inputs("tri", 3)
    assert gmm.est_params("mono", 1)["first"] is True
    assert gmm.est_params("mono", 2)["first"] is False
    tri = gmm.est_params("tri", 4)
    assert (tri["x"], tri["n0"], tri["totgauss"]) == (3, 80, 300)
    assert gmm.final_model("mono").endswith("/mono/6.mdl")
    assert gmm.final_model("tri").endswith("/tri/5.mdl")


def test_the_first_monophone_realignment_uses_the_initial_beam(tmp_path):
    gmm = gmm_dag(tmp_path).gmm
    assert gmm.realign_params("mono", 1)["beam"] == 6.0
    assert gmm.realign_params("mono", 2)["beam"] == 10.0
    assert gmm.realign_params("tri", 3) == {"boost_silence": 1.25, "beam": 10.0, "retry_beam": 40.0}


def test_the_mixup_schedule_is_train_mono_shs():
    """numgauss = n0 for the first two estimates, then += incgauss while x <= max_iter_inc
    (train_mono.py's loop, step by step)."""
    n0, tot, inc_iters, num_iters = 127, 1000, 30, 40
    incgauss = (tot - n0) // inc_iters
    numgauss, expected = n0, [n0]
    for x in range(1, num_iters):
        expected.append(numgauss)
        if x <= inc_iters:
            numgauss += incgauss
    assert [mix_up_target(n0, tot, inc_iters, x) for x in range(num_iters)] == expected


def test_gmm_targets_refuse_a_fixed_num_targets(tmp_path):
    with pytest.raises(ConfigError, match=r"data\.num_targets must be 0"):
        gmm_dag(tmp_path, data={"targets": "gmm", "num_targets": 40})


def test_tot_gauss_below_num_leaves_is_an_error_naming_both_keys(tmp_path):
    gmm = {**GMM["gmm"], "tri": {"num_leaves": 500, "tot_gauss": 100}}
    with pytest.raises(ConfigError, match=r"gmm\.tri\.tot_gauss \(100\).*gmm\.tri\.num_leaves"):
        gmm_dag(tmp_path, gmm=gmm)


def test_own_data_needs_a_dict_dir_and_a_text_per_set(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    data = {"targets": "gmm", "sets": {"train": str(own)}}
    with pytest.raises(ConfigError, match=r"gmm\.dict_dir"):
        gmm_dag(tmp_path, data=data, eval_sets=[])
    gmm = {**GMM["gmm"], "dict_dir": str(tmp_path / "nodict")}
    with pytest.raises(DataError, match=r"gmm\.dict_dir = .*nodict: the dict directory"):
        gmm_dag(tmp_path, data=data, gmm=gmm, eval_sets=[])
    (tmp_path / "dict").mkdir()
    gmm["dict_dir"] = str(tmp_path / "dict")
    with pytest.raises(DataError, match=r"data.sets.train: .*own/text does not exist"):
        gmm_dag(tmp_path, data=data, gmm=gmm, eval_sets=[])
    (own / "text").write_text("u1 hello\n")
    dag = gmm_dag(tmp_path, data=data, gmm=gmm, eval_sets=[])
    assert dag.gmm.dict_files()[0] == f"{tmp_path}/dict/lexiconp.txt"
    assert dag.gmm.text("train") == f"{own}/text"


def test_the_schema_names_a_bad_gmm_key(tmp_path):
    with pytest.raises(ConfigError, match="num_leaves"):
        gmm_dag(tmp_path, gmm={"tri": {"num_leaves": 0}})
    with pytest.raises(ConfigError, match="targets"):
        dag_of(tmp_path, {"data": {"targets": "kaldi"}})


def test_egs_of_other_targets_are_rebuilt_before_the_plans(tmp_path):
    """Egs made before the switch to data.targets: gmm (or of a tree of another size) are
    stale: the DAG plans after the egs checkpoint reruns, not on the old info.json."""
    from paravg.dag.gmm_paths import egs_of_other_targets

    dag = gmm_dag(tmp_path)
    info = {"num_targets": 40}
    assert egs_of_other_targets(dag.config, info) == ["num_targets"]  # no tree yet
    pdfs = tmp_path / "results/gmm/tri/num_pdfs"
    pdfs.parent.mkdir(parents=True)
    pdfs.write_text("72\n")
    assert egs_of_other_targets(dag.config, info) == ["num_targets"]
    assert egs_of_other_targets(dag.config, {"num_targets": 72}) == []
    assert egs_of_other_targets(dag_of(tmp_path)[0].config, info) == []

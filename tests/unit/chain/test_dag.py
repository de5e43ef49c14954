"""The chain stage in the DAG (paravg/dag/chain.py): a chain experiment's train jobs,
diagnostics and combination read the den graph and their egs' supervision; a
cross-entropy experiment's inputs are unchanged; chain experiments share one
supervision."""

import pytest

from paravg.errors import ConfigError
from tests.unit.test_dag import Checkpoints, dag_of

INFO9 = {"num_archives": 12, "frames_per_eg": 9, "num_frames": 1, "num_targets": 40}
CHAIN = {"family": "tdnnf", "frame_subsampling_factor": 3, "objective": "chain"}


class Checkpoints9(Checkpoints):
    def egs_info(self):
        super().egs_info()
        return INFO9


def chain_dag(tmp_path, experiments):
    overrides = {"egs": {"frames_per_eg": 9}, "experiments": experiments}
    return dag_of(tmp_path, overrides, Checkpoints9())[0]


def test_chain_jobs_read_the_den_graph_and_their_archives_supervision(tmp_path):
    dag = chain_dag(tmp_path, {"ce": {}, "lfmmi": {"model": CHAIN}})
    egs = f"{tmp_path}/results/egs"
    assert dag.chain.experiments == ["lfmmi"]
    job = dag.train.job_inputs("lfmmi", 1, 0)
    archive = job["egs"].removesuffix(".meta.json")
    assert job["chain_den"] == f"{egs}/chain/den.fst"
    assert f"{archive}.chain.arc_src.npy" in job["chain_sup"]
    assert len(job["chain_sup"]) == 10
    assert not {"chain_den", "chain_sup"} & set(dag.train.job_inputs("ce", 1, 0))
    diag = dag.train.diag_inputs("lfmmi", 1)
    assert f"{egs}/valid_diag.chain.frames.npy" in diag["chain_sup"]
    assert f"{egs}/train_diag.chain.frames.npy" in diag["chain_sup"]
    assert "chain_sup" not in dag.train.diag_inputs("ce", 1)
    # the network's outputs: the monophone chain tree's pdfs (the egs' 40 targets)
    assert dag.chain.num_outputs("lfmmi") == 80
    assert dag.chain.num_outputs("ce") == 0  # the egs' count, as before
    assert dag.chain.supervision_options() == {
        "frame_subsampling_factor": 3,
        "left_tolerance": 5,
        "right_tolerance": 5,
    }
    files = dag.chain.all_files()
    assert f"{egs}/egs.11.chain.final_logp.npy" in files
    assert f"{egs}/combine.chain.final_logp.npy" in files


def test_a_run_without_chain_has_no_chain_files(tmp_path):
    dag = chain_dag(tmp_path, {"ce": {}})
    assert dag.chain.experiments == [] and dag.chain.all_files() == []


def test_chain_experiments_must_share_their_supervision(tmp_path):
    other = {**CHAIN, "chain": {"left_tolerance": 2}}
    with pytest.raises(ConfigError, match="share the egs' supervision"):
        chain_dag(tmp_path, {"a": {"model": CHAIN}, "b": {"model": other}})


@pytest.mark.parametrize(
    "model, egs, message",
    [
        ({**CHAIN, "family": "tdnn"}, 9, "trains the tdnnf family only"),
        (CHAIN, 8, "must be a multiple of model.frame_subsampling_factor"),
        ({"chain": {"xent_regularize": 0.2}}, 9, "model.objective is not chain"),
    ],
)
def test_chain_config_checks(tmp_path, model, egs, message):
    with pytest.raises(ConfigError, match=message):
        dag_of(tmp_path, {"egs": {"frames_per_eg": egs}, "experiments": {"x": {"model": model}}})


def test_chain_decoding_reads_the_chain_graphs_and_scales(tmp_path):
    """A chain experiment decodes on graph/chain_words and chain_phones with decode.sh's
    --acwt 1.0 --post-decode-acwt 10.0 and is exported with graph/chain_words at acoustic
    scale 1; its evaluation reads the chain setup; a cross-entropy experiment's inputs
    and params are what they were."""
    dag = chain_dag(tmp_path, {"ce": {}, "lfmmi": {"model": CHAIN}})
    rec, graph = dag.recognition, f"{tmp_path}/results/graph"
    assert rec.graph_dirs("lfmmi") == {
        "words": f"{graph}/chain_words",
        "phones": f"{graph}/chain_phones",
    }
    assert (
        rec.graph_dirs("ce")
        == rec.graph_dirs()
        == {
            "words": f"{graph}/words",
            "phones": f"{graph}/phones",
        }
    )
    assert rec.graph_names() == ["words", "phones", "chain_words", "chain_phones"]
    assert rec.search_options("ce") == rec.search_options()
    chain = rec.search_options("lfmmi")
    assert chain == {**rec.search_options(), "chain_acoustic_scale": 1.0,
                     "chain_post_decode_acwt": 10.0}  # fmt: skip
    assert rec.chain_graph_options() == {"transition_scale": 1.0, "self_loop_scale": 1.0}
    decode = rec.decode_inputs("lfmmi", "test")
    assert decode["graph_words"] == f"{graph}/chain_words/HCLG.fst"
    assert not [k for k in decode if k.startswith("chain_")]
    assert rec.decode_inputs("ce", "test")["graph_words"] == f"{graph}/words/HCLG.fst"
    assert rec.export_inputs("lfmmi")["hclg"] == f"{graph}/chain_words/HCLG.fst"
    assert rec.export_graph_dir("lfmmi") == f"{graph}/chain_words"
    assert (rec.export_acoustic_scale("lfmmi"), rec.export_acoustic_scale("ce")) == (1.0, 0.1)
    egs = f"{tmp_path}/results/egs"
    assert dag.train.eval_inputs("lfmmi", "test")["chain_den_fst"] == f"{egs}/chain/den.fst"
    assert not [k for k in dag.train.eval_inputs("ce", "test") if k.startswith("chain_")]


def test_chain_on_gmm_alignments_reads_the_gmm_stages_phones_and_lang(tmp_path):
    """data.targets gmm: chain_den reads the train set's per-frame phones (rule
    gmm_phones) and the GMM lang's phone tables, grows the left-biphone tree by default
    (Kaldi's), and the network's outputs wait for it; evaluation reads the eval set's
    phones as its targets; the chain word graph is the GMM lang's (graph/chain_words);
    with data.perturb the copies' phones are the source's mapped (chain_perturbed_phones)
    and chain_den reads those."""
    from tests.unit.test_dag_gmm import GMM

    experiments = {"ce": {}, "lfmmi": {"model": CHAIN}}
    dag = dag_of(tmp_path, {**GMM, "egs": {"frames_per_eg": 9}, "experiments": experiments})[0]
    chain, r = dag.chain, f"{tmp_path}/results"
    assert chain.on_lang and chain.tree_options()["tree"] == "biphone"
    assert chain.frame_labels("train") == f"{r}/gmm/phones/train/phones.scp"
    assert chain.den_inputs()["lang"][0] == f"{r}/gmm/lang/phones.txt"
    assert chain.den_params()["lang_dir"] == f"{r}/gmm/lang"
    assert chain.num_outputs("lfmmi") is None
    assert chain.init_inputs("lfmmi") == [f"{r}/egs/chain/info.json"]
    assert dag.train.eval_inputs("lfmmi", "test")["targets"] == f"{r}/gmm/phones/test/phones.scp"
    assert dag.train.eval_inputs("ce", "test")["targets"] == f"{r}/data/test/targets.scp"
    assert dag.gmm.phones_inputs("test")["alis"][0] == f"{r}/gmm/ali/test/ali.1.ark"
    assert dag.recognition.export_graph_dir("lfmmi") == f"{r}/graph/chain_words"
    # the monophone tree on request: still a tree file (shared by a phone's variants)
    mono = {"lfmmi": {"model": {**CHAIN, "chain": {"tree": "monophone"}}}}
    dag = dag_of(tmp_path, {**GMM, "egs": {"frames_per_eg": 9}, "experiments": mono})[0]
    assert dag.chain.tree_file() == [f"{r}/egs/chain/tree"]
    assert dag.chain.num_outputs("lfmmi") is None
    assert not dag.chain.perturbed_labels()
    perturbed = {**GMM, "data": {**GMM["data"], "perturb": {"speed": [0.9, 1.0, 1.1]}}}
    sp = dag_of(tmp_path, {**perturbed, "egs": {"frames_per_eg": 9}, "experiments": experiments})
    chain = sp[0].chain
    assert chain.perturbed_labels()
    assert chain.frame_labels("train_sp") == f"{r}/gmm/phones/train_sp/phones.scp"
    assert chain.perturbed_labels_outputs()["scp"] == f"{r}/gmm/phones/train_sp/phones.scp"
    inputs = chain.perturbed_labels_inputs()
    assert inputs["scp"] == f"{r}/gmm/phones/train/phones.scp"
    assert inputs["targets"] == f"{r}/data/train_sp/targets.scp"


def test_chain_with_a_users_graph_is_refused_at_start_up(tmp_path):
    experiments = {"lfmmi": {"model": CHAIN}}
    lang = {"source": "lang", "lang_dir": "l", "lm": "G.fst", "final_mdl": "m"}
    overrides = {"egs": {"frames_per_eg": 9}, "experiments": experiments, "graph": lang}
    with pytest.raises(ConfigError, match=r"graph\.source lang's graph is made for"):
        dag_of(tmp_path, overrides, Checkpoints9())
    # not decoding: the user's graph is not used, and the run trains
    quiet = {**overrides, "decode": {"enabled": False}}
    assert dag_of(tmp_path, quiet, Checkpoints9())[0].chain.experiments == ["lfmmi"]


def test_the_biphone_chain_tree_is_built_by_chain_den_and_sets_the_outputs(tmp_path):
    """model.chain.tree biphone: chain_den reads the train set's features and writes
    <egs>/chain/tree; the network's outputs are unknown at start-up (None) and init_model
    reads them from chain/info.json; the monophone default keeps 2K outputs and no tree
    file; chain experiments must agree on the tree."""
    biphone = {**CHAIN, "chain": {"tree": "biphone", "num_leaves": 200}}
    dag = chain_dag(tmp_path, {"ce": {}, "lfmmi": {"model": biphone}})
    egs = f"{tmp_path}/results/egs"
    assert dag.chain.tree_options() == {"tree": "biphone", "num_leaves": 200, "thresh": 300.0}
    assert dag.chain.den_params() == {
        "tree": dag.chain.tree_options(),
        "frame_subsampling_factor": 3,
    }
    assert dag.chain.den_files()["tree"] == f"{egs}/chain/tree"
    assert dag.chain.tree_file() == [f"{egs}/chain/tree"]
    assert dag.chain.den_inputs()["feats_scp"].endswith("/feats.scp")
    assert dag.chain.num_outputs("lfmmi") is None
    assert dag.chain.init_inputs("lfmmi") == [f"{egs}/chain/info.json"]
    assert dag.chain.num_outputs("ce") == 0 and dag.chain.init_inputs("ce") == []
    mono = chain_dag(tmp_path, {"lfmmi": {"model": CHAIN}})
    assert mono.chain.tree_options() == {"tree": "monophone", "num_leaves": 500, "thresh": 300.0}
    assert mono.chain.den_params() == {}  # chain_den's params as before the tree keys
    assert "tree" not in mono.chain.den_files() and mono.chain.den_inputs() == {}
    assert mono.chain.num_outputs("lfmmi") == 80 and mono.chain.init_inputs("lfmmi") == []
    with pytest.raises(ConfigError, match="share the chain tree"):
        chain_dag(tmp_path, {"a": {"model": CHAIN}, "b": {"model": biphone}})


def test_a_chain_schedule_reads_each_archive_f_times_at_kaldis_frame_shifts(tmp_path):
    """Kaldi's chain train.py: ``num_archives_expanded`` = archives × f (not × the output
    frames of an eg, as frame egs), ``--frame-shift=(archive + k // A) % f`` for the
    k-th archive processed (1-based archive), and the egs cut ``f // 2`` frames wider
    each side than the model (get_egs.sh) so that a shift finds its input."""
    from paravg.nnet.context import egs_context_of, model_context

    dag = chain_dag(tmp_path, {"ce": {"model": {"family": "tdnnf"}}, "lfmmi": {"model": CHAIN}})
    plan, ce = dag.plan("lfmmi"), dag.plan("ce")
    epochs = plan.schedule.num_epochs
    assert plan.schedule.num_archives_to_process == int(epochs * 12 * 3)
    assert ce.schedule.num_archives_to_process == int(epochs * 12 * 9)  # frame egs: × F
    seen = []
    for t in range(plan.num_iters):
        for j in range(plan.num_jobs(t)):
            params = plan.job_params(t, j)
            k = plan.schedule.archives_processed_before[t] + j
            archive = k % 12 + 1
            assert params["archive"].endswith(f"egs.{archive - 1}") and params["frame"] == 0
            assert params.get("frame_shift", 0) == (archive + k // 12) % 3
            seen.append(params.get("frame_shift", 0))
    assert set(seen) == {0, 1, 2}
    model = dag.experiments["lfmmi"]["model"]  # with its defaults
    left, right = model_context(model)
    assert egs_context_of(model) == (left + 1, right + 1)
    assert dag.egs.context() == (left + 1, right + 1)

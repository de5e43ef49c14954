"""paravg.resources: the mem_mb formulas grow with the sizes that bound each job (the
measured peaks are checked in tests/pipeline/test_resources.py)."""

import json
import math

import yaml

from paravg import resources
from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.dag import Dag
from paravg.resources import (
    BASE_MB,
    JOB_SHARE,
    PER_UTT_BYTES,
    PREPARE_BYTES_PER_FRAME,
    RUNTIME_FLOOR_MIN,
    JobData,
    egs_archive_mem_mb,
    rule_mem_mb,
    rule_runtime,
    ubm_init_mem_mb,
)

RULES = tuple(resources.RULES)


def dag_with(tmp_path, overlay):
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    return Dag(validate_config(deep_merge(cfg, {"results": str(tmp_path), **overlay})))


def test_every_rule_declares_at_least_the_base_rounded_to_100(tmp_path):
    dag = dag_with(tmp_path, {})
    assert set(RULES) == set(JOB_SHARE)
    for rule in RULES:
        mb = dag.mem_mb(rule)
        assert mb >= BASE_MB and mb % 100 == 0, (rule, mb)
        assert dag.runtime(rule) == RUNTIME_FLOOR_MIN, rule  # no data yet: the floor


def test_runtime_and_memory_grow_with_what_the_job_reads():
    """A job reading 100 h gets more minutes than the floor wherever its CPU is per hour
    (measured CPU x 10), and the rules holding a line per utterance more memory."""
    cfg = validate_config(deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), {}))
    small, big = JobData(1_000, 1.0, 22), JobData(120_000, 100.0, 22)
    for rule in ("compute_features", "ubm_gselect", "extractor_acc", "egs_split"):
        assert rule_runtime(rule, cfg, big) > rule_runtime(rule, cfg, small) >= 10, rule
    # compute_features: 20 CPU-s per hour x 100 h x 10 / 60 = 334 minutes
    assert rule_runtime("compute_features", cfg, big) == 334
    for rule in ("prepare_data", "egs", "egs_split", "merge_ivectors"):
        assert rule_mem_mb(rule, cfg, big) >= rule_mem_mb(rule, cfg, small) + 200, rule
    # prepare_data: a targets file out of order is held (per utterance and per frame;
    # in Kaldi's order nothing is, tests/unit/test_data.py)
    held = PER_UTT_BYTES["prepare_data"] * 120_000 + PREPARE_BYTES_PER_FRAME * 100 * 360_000
    assert rule_mem_mb("prepare_data", cfg, big) == BASE_MB + math.ceil(held / 2**20 / 100) * 100
    # bounded: a chunk, a model, a frame cap; the feature jobs stream their tables
    for rule in ("ubm_init", "ubm_gselect", "extractor_post", "egs_archive", "extractor_est",
                 "compute_features", "merge_features", "compute_cmvn", "ubm_acc",
                 "extractor_acc"):  # fmt: skip
        assert rule_mem_mb(rule, cfg, big) == rule_mem_mb(rule, cfg, small), rule
    # the PCA reads at most pca_max_utts utterances, the UBM init ubm_num_frames frames
    huge = JobData(1_200_000, 1000.0, 22)
    assert (
        rule_runtime("ivector_pca", cfg, huge) == rule_runtime("ivector_pca", cfg, big) // 10 * 10
    )
    assert rule_runtime("ubm_init", cfg, huge) == rule_runtime("ubm_init", cfg, big)


def test_a_jobs_share_comes_from_the_set_report_or_its_source(tmp_path):
    """prepare_data counts the source's utt2spk (10 s an utterance) before the set is
    prepared; afterwards every job reads its share (1/nj) of report.json's figures."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "utt2spk").write_text("".join(f"u{i} s\n" for i in range(720)))
    own = {"data": {"sets": {"train": str(src)}, "targets": "data"}, "eval_sets": []}
    dag = dag_with(tmp_path / "res", own)
    assert dag.job_data("prepare_data", "train") == JobData(720, 2.0)
    report = tmp_path / "res" / "data" / "train" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"num_utterances_kept": 700, "duration_s_checked": 7200.0}))
    assert dag.job_data("merge_features", "train") == JobData(700, 2.0)
    assert dag.job_data("ubm_gselect") == JobData(350, 1.0)  # ivector.nj 2, the train set
    assert dag.job_data("egs_archive").window == 22 and dag.job_data("egs").utterances == 700


def test_the_kaldi_scale_settings_raise_what_their_sizes_bound(tmp_path):
    """Kaldi's 400,000 egs per archive hold ~1.5 GB of egs (float16, 40 dims, window 22);
    the UBM init's 700k frames 0.4 GB with its E-step block."""
    demo = dag_with(tmp_path, {})
    kaldi = yaml.safe_load((REPO_CONFIG.parent / "experiments" / "kaldi_scale.yaml").read_text())
    big = dag_with(tmp_path, kaldi)
    assert big.mem_mb("egs_archive") >= demo.mem_mb("egs_archive") + 1400
    assert big.mem_mb("ubm_init") > demo.mem_mb("ubm_init")
    assert big.mem_mb("extractor_acc") > demo.mem_mb("extractor_acc")


def test_the_formulas_are_monotone_in_their_sizes():
    iv = {"ubm_num_frames": 500_000, "pca_dim": 40}
    assert ubm_init_mem_mb({**iv, "ubm_num_frames": 5_000_000}) > ubm_init_mem_mb(iv) + 500
    assert egs_archive_mem_mb(400_000, 22, 40, 100, True) < egs_archive_mem_mb(
        400_000, 22, 40, 100, False
    )


def test_the_ubm_subset_feeds_the_pca_and_ubm_only_and_shrinks_their_share(tmp_path):
    """ivector.ubm_subset_utts: the PCA and UBM rules read rule ubm_subset's data dir (and
    their jobs declare the subset's share), the extractor the whole training set."""
    dag = dag_with(tmp_path, {"ivector": {"ubm_subset_utts": 100}})
    assert dag.ivector.ubm_data()["feats"].endswith("ivector/ubm_subset/feats.scp")
    assert dag.ivector.pca_cmvn().endswith("ivector/ubm_subset/cmvn.scp")
    assert dag.ivector.train_data()["feats"].endswith("train/feats.scp")
    report = tmp_path / "data" / "train" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"num_utterances_kept": 400, "duration_s_checked": 3600.0}))
    assert dag.job_data("ubm_gselect") == JobData(50, 0.125)
    assert dag.job_data("extractor_post") == JobData(200, 0.5)
    plain = dag_with(tmp_path / "plain", {})
    assert plain.ivector.ubm_data() == plain.ivector.train_data()
    assert plain.ivector.pca_cmvn().endswith("train/cmvn.scp")


def test_the_gmm_jobs_memory_is_bounded_and_their_share_is_the_source_train_sets(tmp_path):
    """The GMM stage streams its tables: a job's mem_mb is the same at 1 h and 500 h (a
    chunk, a model, an utterance; the demo's gmm_dict holds its text), its runtime grows
    with its share; the share is gmm.nj's of data.train_set even when the network trains
    on perturbed copies."""
    from paravg.gmm.accumulate import CHUNK_FRAMES as GMM_CHUNK_FRAMES
    from paravg.resources import GMM_DIM, GMM_RULES, MAX_GAUSS_PER_PDF

    cfg = validate_config(deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), {}))
    small, big = JobData(1_000, 1.0), JobData(600_000, 500.0)
    for rule in GMM_RULES:
        if rule != "gmm_dict":
            assert rule_mem_mb(rule, cfg, big) == rule_mem_mb(rule, cfg, small), rule
    assert rule_mem_mb("gmm_dict", cfg, big) > rule_mem_mb("gmm_dict", cfg, small) + 5000
    for rule in ("gmm_feats", "gmm_acc", "gmm_realign", "gmm_tree_acc", "gmm_align_set"):
        assert rule_runtime(rule, cfg, big) > rule_runtime(rule, cfg, small) == 10, rule
    # gmm_acc: 2 CPU-s an hour x 500 h x 10 / 60 = 167 minutes; its chunk's float64
    # frames and a pdf's likelihoods, the model and its accumulators
    assert rule_runtime("gmm_acc", cfg, big) == 167
    chunk = GMM_CHUNK_FRAMES * 8 * (5 * GMM_DIM + 3 * MAX_GAUSS_PER_PDF) / 2**20
    assert BASE_MB + chunk < rule_mem_mb("gmm_acc", cfg, big) <= BASE_MB + chunk + 100
    # more Gaussians per pdf: more E-step work per frame
    more = deep_merge(cfg, {"gmm": {"tri": {"tot_gauss": 5000}}})
    assert rule_runtime("gmm_acc", more, big) == 334

    src = tmp_path / "src"
    src.mkdir()
    (src / "utt2spk").write_text("".join(f"u{i} s\n" for i in range(720)))
    (src / "text").write_text("")
    (tmp_path / "dict").mkdir()
    own = {"data": {"sets": {"train": str(src)}, "perturb": {"speed": [0.9, 1.0, 1.1]}},
           "gmm": {"dict_dir": str(tmp_path / "dict")}, "eval_sets": []}  # fmt: skip
    dag = dag_with(tmp_path / "res", own)
    assert dag.job_data("gmm_acc") == JobData(360, 1.0)  # utt2spk at 10 s, gmm.nj 2
    assert dag.job_data("gmm_tree") == JobData(720, 2.0)
    assert dag.job_data("egs").hours == 0.0  # train_sp: not made yet
    assert dag.job_data("gmm_feats", "train") == JobData(360, 1.0)

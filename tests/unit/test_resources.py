"""paravg.resources: the mem_mb formulas grow with the sizes that bound each job (the
measured peaks are checked in tests/pipeline/test_resources.py)."""

import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.dag import Dag
from paravg.resources import BASE_MB, egs_archive_mem_mb, ubm_init_mem_mb

RULES = ("ubm_init", "ubm_gselect", "ubm_acc", "extractor_post", "extractor_acc", "egs_split",
         "egs_archive")  # fmt: skip


def dag_with(tmp_path, overlay):
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    return Dag(validate_config(deep_merge(cfg, {"results": str(tmp_path), **overlay})))


def test_every_rule_declares_at_least_the_base_rounded_to_100(tmp_path):
    dag = dag_with(tmp_path, {})
    for rule in RULES:
        mb = dag.mem_mb(rule)
        assert mb >= BASE_MB and mb % 100 == 0, (rule, mb)


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

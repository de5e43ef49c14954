"""The rule-level stage functions, end to end on a tiny synthetic corpus."""

import json
import math
from pathlib import Path

import kaldiio
import numpy as np
import pytest

from paravg.errors import DataError
from paravg.ivector import stages
from paravg.ivector.features import IvectorFeaturePipeline
from paravg.ivector.online import OnlineIvectorOptions
from paravg.ivector.synthetic import speaker_utterances, write_corpus

NJ = 2
UBM_ITERS = 2
EXT_ITERS = 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(11)
    spk = speaker_utterances(rng, 6, 3, (60, 140), dim=8, num_components=6, rank=2)
    return write_corpus(tmp_path_factory.mktemp("corpus"), spk)


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """PCA, UBM and extractor trained with the same calls the rules make."""
    d = tmp_path_factory.mktemp("ivector")
    c = corpus
    stages.train_pca(c.feats_scp, c.cmvn_scp, d / "pca.npz", 6, 1, 100, 2)
    stages.init_ubm(
        d / "pca.npz", c.feats_scp, c.spk2utt, d / "ubm.0.npz", d / "ubm.0.json", 8, 6, 100000, 2, 0
    )
    for j in range(NJ):
        stages.ubm_gselect(
            d / "ubm.0.npz",
            d / "pca.npz",
            c.feats_scp,
            c.spk2utt,
            j,
            NJ,
            4,
            2,
            d / f"gselect.{j}.npz",
        )
    for it in range(UBM_ITERS):
        accs = [d / f"ubm_acc.{it}.{j}.npz" for j in range(NJ)]
        for j in range(NJ):
            stages.ubm_accumulate(
                d / f"ubm.{it}.npz",
                d / "pca.npz",
                c.feats_scp,
                c.spk2utt,
                d / f"gselect.{j}.npz",
                j,
                NJ,
                2,
                accs[j],
            )
        stages.ubm_estimate(
            d / f"ubm.{it}.npz",
            accs,
            d / f"ubm.{it + 1}.npz",
            d / f"ubm.{it + 1}.json",
            it + 1 == UBM_ITERS,
        )
    ubm = d / f"ubm.{UBM_ITERS}.npz"
    stages.init_extractor(ubm, d / "extractor.0.npz", 3, 0)
    for j in range(NJ):
        stages.extractor_posteriors(
            ubm, d / "pca.npz", c.feats_scp, c.spk2utt, j, NJ, 2, 5, 0.025, 0.1, d / f"post.{j}.npz"
        )
    for it in range(EXT_ITERS):
        accs = [d / f"ext_acc.{it}.{j}.npz" for j in range(NJ)]
        for j in range(NJ):
            stages.extractor_accumulate(
                d / f"extractor.{it}.npz",
                d / "pca.npz",
                c.feats_scp,
                c.spk2utt,
                d / f"post.{j}.npz",
                j,
                NJ,
                2,
                accs[j],
            )
        stages.extractor_estimate(
            d / f"extractor.{it}.npz",
            accs,
            d / f"extractor.{it + 1}.npz",
            d / f"extractor.{it + 1}.json",
            1.0,
        )
    return d


def extract(corpus, d, utts_per_spk_max, tag):
    scps = []
    for j in range(NJ):
        stages.extract_online(
            d / f"extractor.{EXT_ITERS}.npz",
            d / f"ubm.{UBM_ITERS}.npz",
            d / "pca.npz",
            corpus.feats_scp,
            corpus.spk2utt,
            j,
            NJ,
            utts_per_spk_max,
            OnlineIvectorOptions(),
            d / f"{tag}.{j}.ark",
            d / f"{tag}.{j}.scp",
        )
        scps.append(d / f"{tag}.{j}.scp")
    n = stages.merge_ivectors(scps, d / f"{tag}.scp", 10, d / f"{tag}.period")
    return n, d / f"{tag}.scp"


def test_training_improves_and_reports(trained):
    ubm_like = [json.loads((trained / f"ubm.{i}.json").read_text()) for i in (1, 2)]
    assert all(u["objf_change_per_frame"] >= 0 for u in ubm_like)
    assert ubm_like[1]["loglike_per_frame"] >= ubm_like[0]["loglike_per_frame"] - 1e-9
    auxf = [
        json.loads((trained / f"extractor.{i}.json").read_text())["auxf_per_frame"]
        for i in range(1, EXT_ITERS + 1)
    ]
    assert np.all(np.diff(auxf) >= -1e-9), auxf
    pipeline = IvectorFeaturePipeline.load(trained / "pca.npz")
    assert pipeline.transform.shape == (6, 8 * 3 + 1)


def test_ivector_online_scp_contract(corpus, trained):
    n, scp = extract(corpus, trained, 2, "train")
    feats = kaldiio.load_scp(str(corpus.feats_scp))
    ivectors = kaldiio.load_scp(str(scp))
    assert n == len(feats) == len(ivectors) == 18
    assert (trained / "train.period").read_text() == "10\n"
    for utt, x in feats.items():
        iv = ivectors[utt]
        assert iv.dtype == np.float32
        assert iv.shape == (math.ceil(x.shape[0] / 10), 3)
        assert np.all(np.isfinite(iv))
    keys = [line.split()[0] for line in scp.read_text().splitlines()]
    assert keys == sorted(keys)


def test_pseudo_speakers_reset_state_every_two_utterances(corpus, trained):
    _, paired = extract(corpus, trained, 2, "paired")
    _, real = extract(corpus, trained, 0, "real")
    _, single = extract(corpus, trained, 1, "single")
    a, b, s = (kaldiio.load_scp(str(p)) for p in (paired, real, single))
    first, second, third = "spk000-utt000", "spk000-utt001", "spk000-utt002"
    np.testing.assert_array_equal(a[first], b[first])  # first of a speaker: fresh state
    np.testing.assert_array_equal(a[second], b[second])  # same pair
    np.testing.assert_array_equal(a[third], s[third])  # new pseudo-speaker: fresh again
    assert not np.array_equal(b[third], s[third])  # real speaker carries over


def test_reruns_write_identical_bytes(corpus, trained):
    d = trained
    stages.extractor_accumulate(
        d / "extractor.1.npz",
        d / "pca.npz",
        corpus.feats_scp,
        corpus.spk2utt,
        d / "post.0.npz",
        0,
        NJ,
        2,
        d / "again.npz",
    )
    assert (d / "again.npz").read_bytes() == (d / "ext_acc.1.0.npz").read_bytes()
    extract(corpus, d, 2, "rerun1")
    extract(corpus, d, 2, "rerun2")
    assert (d / "rerun1.0.ark").read_bytes() == (d / "rerun2.0.ark").read_bytes()


def test_chunked_tables_give_the_same_statistics(corpus, trained, tmp_path):
    """Gaussian selection and posteriors in chunks of 17 frames (a chunk per utterance or
    less) accumulate to the same bytes as the default chunk (one chunk per job here)."""
    d = trained
    stages.ubm_gselect(
        d / "ubm.0.npz",
        d / "pca.npz",
        corpus.feats_scp,
        corpus.spk2utt,
        1,
        NJ,
        4,
        2,
        tmp_path / "gselect.npz",
        chunk_frames=17,
    )
    stages.ubm_accumulate(
        d / "ubm.1.npz",
        d / "pca.npz",
        corpus.feats_scp,
        corpus.spk2utt,
        tmp_path / "gselect.npz",
        1,
        NJ,
        2,
        tmp_path / "ubm_acc.npz",
    )
    assert (tmp_path / "ubm_acc.npz").read_bytes() == (d / "ubm_acc.1.1.npz").read_bytes()
    ubm = d / f"ubm.{UBM_ITERS}.npz"
    stages.extractor_posteriors(
        ubm,
        d / "pca.npz",
        corpus.feats_scp,
        corpus.spk2utt,
        1,
        NJ,
        2,
        5,
        0.025,
        0.1,
        tmp_path / "post.npz",
        chunk_frames=17,
    )
    with np.load(tmp_path / "post.npz") as z:
        assert int(z["chunks"]) == 9  # one per utterance of the job
    stages.extractor_accumulate(
        d / "extractor.1.npz",
        d / "pca.npz",
        corpus.feats_scp,
        corpus.spk2utt,
        tmp_path / "post.npz",
        1,
        NJ,
        2,
        tmp_path / "ext_acc.npz",
    )
    assert (tmp_path / "ext_acc.npz").read_bytes() == (d / "ext_acc.1.1.npz").read_bytes()


def test_wrong_feature_dimension_is_a_clear_error(trained, tmp_path):
    rng = np.random.default_rng(0)
    spk = speaker_utterances(rng, 2, 2, (30, 40), dim=5)
    c = write_corpus(tmp_path, spk)
    with pytest.raises(DataError, match=r"spk000-utt000: features have shape \(\d+, 5\)"):
        extract(c, trained, 2, "bad")


def test_posteriors_from_other_data_are_a_clear_error(corpus, trained, tmp_path):
    rng = np.random.default_rng(1)
    other = write_corpus(
        tmp_path, speaker_utterances(rng, 6, 3, (60, 140), dim=8, num_components=6, rank=2)
    )
    d = trained
    with pytest.raises(DataError, match="frames there but"):
        stages.extractor_accumulate(
            d / "extractor.1.npz",
            d / "pca.npz",
            other.feats_scp,
            other.spk2utt,
            d / "post.0.npz",
            0,
            NJ,
            2,
            tmp_path / "x.npz",
        )


def test_the_ubm_subset_is_evenly_spread_whole_speakers_tables_and_trains(corpus, tmp_path):
    """ivector.ubm_subset_utts (Kaldi's subset_data_dir.sh before train_diag_ubm.sh): the
    same utterances every time, spread over the speakers, each table filtered alike, and
    the PCA and UBM init train on it as on a data dir."""
    c = corpus
    outs = [tmp_path / n for n in ("feats.scp", "spk2utt", "cmvn.scp")]
    info = stages.subset_training_data(c.feats_scp, c.spk2utt, c.cmvn_scp, 7, *outs)
    assert info == {"utterances": 7, "speakers": 6}  # 18 utterances of 6 speakers
    feats = [line.split()[0] for line in outs[0].read_text().splitlines()]
    whole = [line.split() for line in Path(c.feats_scp).read_text().splitlines()]
    assert feats == [u for u, _ in whole if u in set(feats)] and len(feats) == 7
    spk2utt = {ln.split()[0]: ln.split()[1:] for ln in outs[1].read_text().splitlines()}
    assert sorted(u for us in spk2utt.values() for u in us) == sorted(feats)
    assert [ln.split()[0] for ln in outs[2].read_text().splitlines()] == list(spk2utt)
    before = [o.read_bytes() for o in outs]
    stages.subset_training_data(c.feats_scp, c.spk2utt, c.cmvn_scp, 7, *outs)
    assert [o.read_bytes() for o in outs] == before  # no seed: the same subset
    all_outs = [tmp_path / f"all.{o.name}" for o in outs]
    assert stages.subset_training_data(c.feats_scp, c.spk2utt, c.cmvn_scp, 99, *all_outs) == {
        "utterances": 18,
        "speakers": 6,
    }
    assert all_outs[0].read_text() == Path(c.feats_scp).read_text()
    stages.train_pca(outs[0], outs[2], tmp_path / "pca.npz", 6, 1, 100, 2)
    stages.init_ubm(
        tmp_path / "pca.npz", outs[0], outs[1], tmp_path / "u.npz", tmp_path / "u.json", 4, 3,
        100000, 2, 0,
    )  # fmt: skip
    assert (tmp_path / "u.npz").is_file()

"""Decoding and evaluating a model of frame-subsampling-factor f: the network at output
frames 0, f, 2f, … (one i-vector per chunk as at f = 1), the search over those ⌈T/f⌉
frames at acoustic scale f·a with the lattice's acoustics × f (Kaldi's LFR acwt and
post-decode-acwt), frame accuracy on the subsampled targets, the CTM at f × 10 ms."""

import json

import kaldiio
import numpy as np
import pytest
import torch
from lattice_synth import U1, U2, score

from paravg.decode.decoder import decode_split
from paravg.decode.lattice import LatticeArchives
from paravg.decode.posteriors import utterance_log_posteriors
from paravg.decode.search import (
    SearchGraph,
    SearchOptions,
    low_frame_rate_scales,
    search,
)
from paravg.errors import ConfigError
from paravg.evaluate import evaluate_set
from paravg.io import save_torch_atomic
from paravg.nnet.model_file import model_to_file_dict
from paravg.nnet.tdnn import TdnnModel
from tests.unit.dummies import frame_by_frame, tdnn_config

PERIOD, FEAT, IVEC, NUM_PDFS = 4, 3, 2, 5
CFG = tdnn_config((8, [0]), (8, [-1, 0, 1]), input_splice=[-1, 0, 1])


def tdnn(f=1, ivector_dim=IVEC, seed=0):
    cfg = CFG if f == 1 else {**CFG, "frame_subsampling_factor": f}
    model = TdnnModel(cfg, FEAT, ivector_dim, NUM_PDFS)
    model.init_parameters(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model.output.weight.copy_(3 * torch.randn(model.output.weight.shape, generator=gen))
        priors = torch.rand(NUM_PDFS, generator=gen) + 0.1
        model.log_priors.copy_((priors / priors.sum()).log())
    return model.eval()


@pytest.mark.parametrize("f", [2, 3, 5])
@pytest.mark.parametrize("num_frames", [1, 7, 12, 13])
@pytest.mark.parametrize("with_ivectors", [False, True])
def test_posteriors_are_those_of_frames_0_f_2f(f, num_frames, with_ivectors):
    """The period (4) is not a multiple of f: chunk k's outputs start at ⌈4k / f⌉·f."""
    rng = np.random.default_rng(num_frames)
    feats = rng.standard_normal((num_frames, FEAT))
    ivectors = (
        5.0 * rng.standard_normal((-(-num_frames // PERIOD), IVEC)) if with_ivectors else None
    )
    full = tdnn(1, IVEC if with_ivectors else 0)
    sub = tdnn(f, IVEC if with_ivectors else 0)
    with torch.no_grad():
        got = utterance_log_posteriors(sub, feats, ivectors, PERIOD)
    assert got.shape == (-(-num_frames // f), NUM_PDFS)
    reference = frame_by_frame(full, feats, ivectors, PERIOD)[::f]
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=0)


def _write_set(tmp_path, utts):
    rng = np.random.default_rng(3)
    feats = {u: rng.standard_normal((n, FEAT)).astype(np.float32) for u, n in utts.items()}
    for name, table in (("feats", feats),):
        kaldiio.save_ark(str(tmp_path / f"{name}.ark"), table, scp=str(tmp_path / f"{name}.scp"))
    return feats


def test_evaluation_scores_the_targets_of_the_output_frames(tmp_path):
    feats = _write_set(tmp_path, {"u1": 10, "u2": 8})
    rng = np.random.default_rng(4)
    labels = {u: rng.integers(0, NUM_PDFS, len(x) + 1).astype(np.int32) for u, x in feats.items()}
    kaldiio.save_ark(str(tmp_path / "t.ark"), labels, scp=str(tmp_path / "targets.scp"))
    model = tdnn(3, 0)
    save_torch_atomic(tmp_path / "m.pt", model_to_file_dict(model))
    res = evaluate_set(tmp_path / "m.pt", tmp_path / "feats.scp", tmp_path / "targets.scp",
                       tmp_path / "eval.json")  # fmt: skip
    assert res["frames"] == 4 + 3  # frames 0, 3, 6, 9 of u1; 0, 3, 6 of u2
    logp, ys = [], []
    for u in ("u1", "u2"):
        logp.append(frame_by_frame(tdnn(1, 0), feats[u], None, PERIOD)[::3])
        ys.append(torch.from_numpy(labels[u][: len(feats[u]) : 3]).long())
    logp, ys = torch.cat(logp), torch.cat(ys)
    assert res["cross_entropy"] == pytest.approx(float(-logp[torch.arange(7), ys].mean()), 1e-5)
    correct = (logp.argmax(-1) == ys).double().mean()
    assert res["frame_accuracy"] == pytest.approx(float(correct))


def test_the_scales_of_a_low_frame_rate():
    assert low_frame_rate_scales(0.1, 1) == (0.1, 1.0)
    assert low_frame_rate_scales(0.1, 3) == (0.3, 3.0)  # Kaldi's LFR recipes: 0.333, 3.0
    assert low_frame_rate_scales(1.0, 2) == (2.0, 2.0)


@pytest.fixture
def phone_graph(tmp_path):
    """A phone loop over NUM_PDFS one-state phones (phone k + 1 = pdf k), with its text
    transition model, as a graph directory the decoder reads."""
    from paravg.corpus.phones import PHONES
    from paravg.export.phone_loop import (
        monophone_topology_text,
        monophone_transition_model,
        write_phone_loop_graph,
    )
    from paravg.graph.topology import transition_model_text

    khg_tm, tm = monophone_transition_model(NUM_PDFS)
    graph = write_phone_loop_graph(tm, list(PHONES[:NUM_PDFS]), tmp_path / "graph", 0.5)
    (graph / "transition.mdl").write_text(
        transition_model_text(khg_tm, monophone_topology_text(NUM_PDFS))
    )
    return graph


def _decode(tmp_path, model, name, feats_scp):
    path = tmp_path / f"{name}.pt"
    save_torch_atomic(path, model_to_file_dict(model))
    lat = tmp_path / f"{name}.lat.gz"
    # the raw lattices, compared with the search's (test_determinized_decode.py: f = 3
    # determinised)
    opts = SearchOptions(beam=12.0, lattice_beam=4.0, determinize_lattice=False)
    decode_split(path, {"words": tmp_path / "graph"}, feats_scp, tmp_path / f"{name}.json",
                 {"words": lat}, 1, 0, opts)  # fmt: skip
    lattices = dict(LatticeArchives([lat]))
    return json.loads((tmp_path / f"{name}.json").read_text()), lattices


def test_the_search_sees_every_fth_frame_at_f_times_the_scale(tmp_path, phone_graph):
    """decode_split of an f = 3 model: its lattices have ⌈T/3⌉ frames and are the search
    of the full-rate network's log-likelihoods at frames 0, 3, 6, … at acoustic scale 0.3,
    with the acoustic costs × 3 (the lattice an f = 1 decode would write at 0.3, scaled).
    The split's JSON keeps the config's options and adds the factor and the scales."""
    from paravg.graph.load import load_graph

    feats = _write_set(tmp_path, {"u1": 31, "u2": 20})
    full, lfr = tdnn(1, 0), tdnn(3, 0)
    info1, lat1 = _decode(tmp_path, full, "full", tmp_path / "feats.scp")
    info3, lat3 = _decode(tmp_path, lfr, "lfr", tmp_path / "feats.scp")
    assert info3["options"] == info1["options"] and info3["options"]["acoustic_scale"] == 0.1
    assert "frame_subsampling_factor" not in info1
    assert info3["frame_subsampling_factor"] == 3 and info3["post_decode_acwt"] == 3.0
    assert info3["search_acoustic_scale"] == pytest.approx(0.3)
    assert info3["frames"] == info1["frames"] == 51
    graph = load_graph(tmp_path / "graph")
    arrays = SearchGraph.from_fst(graph.hclg)
    arc_pdf = graph.transitions.tid_to_pdf[arrays.ilabel["emit"]]
    for u, x in feats.items():
        assert lat1[u].num_frames == len(x)
        assert lat3[u].num_frames == -(-len(x) // 3)
        logp = frame_by_frame(full, x, None, PERIOD).double()
        loglikes = (logp - full.log_priors.double()[None]).numpy()[::3]
        opts = SearchOptions(acoustic_scale=0.3, beam=12.0, lattice_beam=4.0)
        expected = search(arrays, arc_pdf, loglikes, opts)
        best = lat3[u].best_paths([10.0], [0.0])[(10.0, 0.0)]
        want = expected.best_paths([10.0 / 3], [0.0])[(10.0 / 3, 0.0)]
        assert list(lat3[u].tid[best]) == list(expected.tid[want])
        # the same pruned lattice: searched at 0.3 (at 0.1 it keeps other links)
        assert lat3[u].num_links == expected.num_links
        np.testing.assert_allclose(np.sort(lat3[u].graph), np.sort(expected.graph), atol=1e-4)
        np.testing.assert_allclose(
            np.sort(lat3[u].acoustic), np.sort(3 * expected.acoustic), rtol=1e-4, atol=1e-3
        )
        assert lat3[u].acoustic[best].sum() == pytest.approx(
            3 * expected.acoustic[want].sum(), 1e-4
        )


def test_the_ctm_counts_frames_of_f_times_10_ms(tmp_path):
    """The split JSONs of an f = 3 decode: the CTM of the lattices of test_score.py at a
    frame shift of 0.03 s (its frames are 30 ms), and scores.json records f."""
    (tmp_path / "text").write_text("u1 A B\nu2 A ZED\n")
    res = score(tmp_path, [{"u1": U1}, {"u2": U2}])
    assert "frame_subsampling_factor" not in res
    for j in (0, 1):
        split = tmp_path / f"s{j}.json"
        split.write_text(
            json.dumps({**json.loads(split.read_text()), "frame_subsampling_factor": 3})
        )
    res = score_again(tmp_path)
    ctm = [line.split()[:5] for line in (tmp_path / "ctm").read_text().splitlines()]
    assert ctm == [
        ["u1", "1", "0.00", "0.10", "A"],  # A ends at frame 3.32 (test_score.py)
        ["u1", "1", "0.10", "0.05", "B"],
        ["u2", "1", "0.00", "0.12", "A"],
    ]
    assert res["frame_subsampling_factor"] == 3
    (tmp_path / "s1.json").write_text(json.dumps({"frames": 10, "nnet_seconds": 0.1,
                                                  "search_seconds": 0.2}))  # fmt: skip
    with pytest.raises(ConfigError, match="different frame rates"):
        score_again(tmp_path)


def score_again(tmp_path):
    """score_set on the splits and lattices ``score`` wrote (their JSONs as they are now)."""
    from paravg.decode.score import GraphScoring, score_set

    lattices = [tmp_path / "lat.0.gz", tmp_path / "lat.1.gz"]
    return score_set(
        [tmp_path / "s0.json", tmp_path / "s1.json"],
        {"words": GraphScoring(lattices, tmp_path / "graph", (1, 2), [0.0])},
        tmp_path / "scores.json",
        tmp_path,
        tmp_path / "hyps.json",
        tmp_path / "ctm",
        tmp_path / "text",
    )

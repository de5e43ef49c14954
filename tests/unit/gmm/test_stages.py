"""The GMM stage's DAG nodes (paravg.gmm.stages) chained on files as rules/gmm.smk chains
them, on synthetic data: mono EM with realignment, align_si, the tree, tri EM, the
targets dir that the data stage reads, and the GMM path's decode graph."""

from __future__ import annotations

import numpy as np
import pytest

from paravg.errors import DataError
from paravg.gmm import stages
from paravg.gmm.alignment import TransitionTable, read_alignments
from paravg.gmm.data import write_dict_dir
from paravg.gmm.graph import gmm_graph
from paravg.gmm.model import GmmModel
from paravg.graph.load import read_transition_model
from paravg.kaldi_io import iter_int_vectors, write_ark_scp
from tests.unit.gmm.test_cli_train import LEXICON, synthetic_job

NJ = 2


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """mono (4 iterations, realigning at 1 and 2) -> align_si -> tree -> tri (3
    iterations, realigning at 2) -> the final alignment, run node by node."""
    d = tmp_path_factory.mktemp("stages")
    rng = np.random.default_rng(1)
    write_dict_dir(d / "dict", LEXICON, ["aa", "bb", "cc"])
    stages.make_lang(d / "dict", "<unk>", d / "lang")
    lang, texts, utt2spk = d / "lang", [], []
    for j in range(1, NJ + 1):
        feats, text = synthetic_job(rng, 20 * j, 20)
        write_ark_scp(sorted(feats.items()), d / f"feats.{j}.ark", d / f"feats.{j}.scp")
        texts += text
        utt2spk += [f"{u} s{j}\n" for u in feats]
    (d / "text").write_text("".join(sorted(texts)))
    (d / "utt2spk").write_text("".join(sorted(utt2spk)))
    (d / "wav.scp").write_text("".join(f"{line.split()[0]} x.wav\n" for line in utt2spk))
    feats = [d / f"feats.{j}.scp" for j in range(1, NJ + 1)]
    log = {"mono": [], "tri": []}
    stages.init_mono(lang, feats[0], 10, d / "mono.0.mdl")
    alis = []
    for j in range(NJ):
        alis.append(d / f"mono.ali.equal.{j}.ark")
        stages.align_equal(lang, d / "mono.0.mdl", feats[j], d / "text", alis[j])

    def em(sys, first, num_iters, realign, n0, tot):
        for x in range(first, num_iters):
            model = d / f"{sys}.{x}.mdl"
            if x in realign:
                for j in range(NJ):
                    alis[j] = d / f"{sys}.ali.{x}.{j}.ark"
                    stages.realign(lang, model, feats[j], d / "text", alis[j],
                                   boost_silence=1.25, beam=10.0)  # fmt: skip
            accs = [d / f"{sys}.{x}.{j}.acc" for j in range(NJ)]
            for j in range(NJ):  # fan-out
                stages.acc(model, feats[j], alis[j], accs[j])
            log[sys].append(  # fan-in
                stages.est(model, accs, d / f"{sys}.{x + 1}.mdl", x=x, n0=n0, totgauss=tot,
                           max_iter_inc=2, power=0.25, first=sys == "mono" and x == 0)
            )  # fmt: skip

    em("mono", 0, 4, {1, 2}, str(d / "mono.0.mdl"), 40)
    si = [d / f"mono.ali.si.{j}.ark" for j in range(NJ)]
    for j in range(NJ):
        stages.realign(lang, d / "mono.4.mdl", feats[j], d / "text", si[j], boost_silence=1.25,
                       beam=10.0)  # fmt: skip
        stages.tree_acc(lang, d / "mono.4.mdl", feats[j], si[j], d / f"{j}.treeacc.npz")
    tree = stages.build_tree(
        lang, [d / f"{j}.treeacc.npz" for j in range(NJ)], 12, d / "treeacc.npz", d / "tree",
        d / "tri.1.mdl", d / "num_pdfs",
    )  # fmt: skip
    for j in range(NJ):
        alis[j] = d / f"tri.ali.convert.{j}.ark"
        stages.convert_ali(d / "mono.4.mdl", d / "tri.1.mdl", si[j], alis[j])
    em("tri", 1, 4, {2}, 12, 30)
    final = [d / f"final.ali.{j}.ark" for j in range(NJ)]
    for j in range(NJ):
        stages.realign(lang, d / "tri.4.mdl", feats[j], d / "text", final[j], boost_silence=1.25,
                       beam=10.0)  # fmt: skip
    return {"dir": d, "log": log, "tree": tree, "final": final, "feats": feats}


def test_em_follows_the_scripts_mixup_schedule_and_raises_the_likelihood(trained):
    mono, tri = trained["log"]["mono"], trained["log"]["tri"]
    n0 = GmmModel.load(trained["dir"] / "mono.0.mdl").num_gauss
    assert [e["mix_up"] for e in mono] == [stages.mix_up_target(n0, 40, 2, x) for x in range(4)]
    assert (
        mono[-1]["num_gauss"] == mono[-1]["mix_up"] == 39
        and mono[-1]["avg_like"] > mono[0]["avg_like"]
    )
    assert [e["mix_up"] for e in tri] == [12, 21, 30]
    assert tri[-1]["num_gauss"] == 30 and tri[-1]["avg_like"] > tri[0]["avg_like"]
    assert int((trained["dir"] / "num_pdfs").read_text()) == trained["tree"]["num_pdfs"]


def test_the_targets_dir_is_a_data_dir_of_the_final_alignments_pdfs(trained):
    d = trained["dir"]
    out = d / "targets"
    info = stages.targets_dir(d / "tri.4.mdl", trained["final"], d, out)
    assert info["utterances"] == 40
    for name in ("wav.scp", "utt2spk", "text"):
        assert (out / name).read_text() == (d / name).read_text()
    table = TransitionTable.of(GmmModel.load(d / "tri.4.mdl").trans)
    alis = {}
    for f in trained["final"]:
        alis.update(read_alignments(f))
    targets = {key: vec for key, vec, _ in iter_int_vectors(out / "targets.ark")}
    assert sorted(targets) == sorted(alis)
    for utt, ali in alis.items():
        np.testing.assert_array_equal(targets[utt], table.pdf[ali])
    assert max(v.max() for v in targets.values()) < info["num_pdfs"]


def test_the_gmm_graph_carries_the_triphone_models_transition_ids(trained):
    import kaldifst

    d = trained["dir"]
    sentences = [line.split()[1:] for line in (d / "text").read_text().splitlines()]
    summary = gmm_graph(d / "lang", d / "tri.4.mdl", d / "tree", d / "graph", sentences=sentences)
    assert (summary["context_width"], summary["central_position"]) == (3, 1)
    model = GmmModel.load(d / "tri.4.mdl")
    # the transition.mdl the decoder and the export read is the triphone model's
    info = read_transition_model(d / "graph" / "transition.mdl")
    np.testing.assert_array_equal(info.tid_to_pdf[1:], TransitionTable.of(model.trans).pdf[1:])
    assert summary["num_pdfs"] == model.num_pdfs == info.tid_to_pdf.max() + 1
    hclg = kaldifst.StdVectorFst.read(str(d / "graph" / "HCLG.fst"))
    ilabels = {a.ilabel for s in range(hclg.num_states) for a in kaldifst.ArcIterator(hclg, s)}
    olabels = {a.olabel for s in range(hclg.num_states) for a in kaldifst.ArcIterator(hclg, s)}
    assert max(ilabels) <= model.trans.num_transition_ids and min(ilabels) >= 0
    words = dict(line.split() for line in (d / "graph" / "words.txt").read_text().splitlines())
    assert {words[w] for w in ("x", "y", "z")} <= {str(o) for o in olabels}
    # every pdf of the training alignments (triphone contexts seen in the data) is on
    # the graph's arcs
    pdfs = {int(info.tid_to_pdf[t]) for t in ilabels if t}
    table = TransitionTable.of(model.trans)
    aligned = {int(p) for f in trained["final"] for a in read_alignments(f).values()
               for p in table.pdf[a]}  # fmt: skip
    assert aligned <= pdfs


def test_init_mono_reads_only_the_first_utterances_of_job_1(tmp_path):
    """gmm_mono_init reads the first num_utts lines of feats.scp (not the job's share):
    the lines after them may name an archive that is not there."""
    rng = np.random.default_rng(3)
    write_dict_dir(tmp_path / "dict", LEXICON, ["aa", "bb", "cc"])
    stages.make_lang(tmp_path / "dict", "<unk>", tmp_path / "lang")
    feats, _text = synthetic_job(rng, 10, 4)
    write_ark_scp(sorted(feats.items()), tmp_path / "feats.ark", tmp_path / "feats.scp")
    with open(tmp_path / "feats.scp", "a") as f:
        f.write(f"u99 {tmp_path / 'missing.ark'}:17\n")
    model = stages.init_mono(tmp_path / "lang", tmp_path / "feats.scp", 3, tmp_path / "0.mdl")
    # gmm-init-mono: every pdf starts as the global mean and variance of those frames
    frames = np.concatenate([feats[u] for u in sorted(feats)[:3]]).astype(np.float64)
    _w, means, variances = model.pdf_params(0)
    np.testing.assert_allclose(means[0], frames.mean(0), rtol=1e-5)
    np.testing.assert_allclose(variances[0], frames.var(0), rtol=1e-4)
    with pytest.raises(DataError, match=r"feats.scp:5: utterance 'u99': archive .*missing.ark"):
        stages.init_mono(tmp_path / "lang", tmp_path / "feats.scp", 5, tmp_path / "0.mdl")

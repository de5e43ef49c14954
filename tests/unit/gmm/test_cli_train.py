"""``python -m paravg.gmm`` training steps chained on files, as a DAG would run them: make-lang,
init-mono, align-equal, acc-stats per job, est (summing the jobs), align, acc-tree-stats,
sum-tree-stats, build-tree, init-model, convert-ali, ali-to-pdf, ali-to-phones; and the
errors a user sees."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from paravg.gmm.__main__ import main
from paravg.gmm.accumulate import GmmAccs
from paravg.gmm.alignment import TransitionTable, ali_to_pdf, read_alignments
from paravg.gmm.data import write_dict_dir
from paravg.gmm.model import GmmModel
from paravg.kaldi_io import write_ark_scp

LEXICON = [("x", 1.0, ("aa", "bb")), ("y", 1.0, ("cc",)), ("z", 1.0, ("bb", "cc", "aa"))]
MEANS = {"aa": 0.0, "bb": 5.0, "cc": 10.0, "sil": -5.0}


def synthetic_job(rng, first: int, n: int):
    """Utterances of "x y" / "z" with features whose mean is the phone's."""
    feats, text = {}, []
    for k in range(first, first + n):
        utt = f"u{k:02d}"
        words = ["x", "y"] if k % 2 else ["z"]
        phones = (
            ["sil"] + [p for w in words for p in dict((e[0], e[2]) for e in LEXICON)[w]] + ["sil"]
        )
        means = np.concatenate([np.full(rng.integers(6, 20), MEANS[p]) for p in phones])
        feats[utt] = (means[:, None] + 0.5 * rng.normal(size=(len(means), 2))).astype(np.float32)
        text.append(f"{utt} {' '.join(words)}\n")
    return feats, text


def run(*args) -> None:
    assert main([str(a) for a in args]) == 0, args


def test_the_steps_chain_on_files(tmp_path, capsys):
    rng = np.random.default_rng(0)
    write_dict_dir(tmp_path / "dict", LEXICON, ["aa", "bb", "cc"])
    run("make-lang", tmp_path / "dict", tmp_path / "lang")
    texts = []
    for j in (1, 2):
        feats, text = synthetic_job(rng, 20 * j, 20)
        write_ark_scp(
            sorted(feats.items()), tmp_path / f"feats.{j}.ark", tmp_path / f"feats.{j}.scp"
        )
        texts += text
    (tmp_path / "text").write_text("".join(sorted(texts)))
    d, lang = tmp_path, tmp_path / "lang"
    run("init-mono", lang, d / "feats.1.scp", d / "0.mdl")
    for j in (1, 2):  # fan-out
        run("align-equal", lang, d / "0.mdl", d / f"feats.{j}.scp", d / "text", d / f"ali.{j}.ark")
        run("acc-stats", d / "0.mdl", d / f"feats.{j}.scp", d / f"ali.{j}.ark", d / f"0.{j}.acc")
    run(
        "est", "--min-gaussian-occupancy", 3, d / "0.mdl", d / "1.mdl", d / "0.1.acc", d / "0.2.acc"
    )
    likes = [sum(GmmAccs.load(d / f"0.{j}.acc").tot_like for j in (1, 2))]
    for x in range(1, 4):
        for j in (1, 2):
            run(
                "align",
                "--boost-silence",
                1.25,
                lang,
                d / f"{x}.mdl",
                d / f"feats.{j}.scp",
                d / "text",
                d / f"ali.{j}.ark",
            )
            run(
                "acc-stats",
                d / f"{x}.mdl",
                d / f"feats.{j}.scp",
                d / f"ali.{j}.ark",
                d / f"{x}.{j}.acc",
            )
        run(
            "est",
            "--mix-up",
            40,
            d / f"{x}.mdl",
            d / f"{x + 1}.mdl",
            d / f"{x}.1.acc",
            d / f"{x}.2.acc",
        )
        likes.append(sum(GmmAccs.load(d / f"{x}.{j}.acc").tot_like for j in (1, 2)))
    assert likes[-1] > likes[0] and np.all(np.diff(likes[1:]) > -1.0), likes
    mono = GmmModel.load(d / "4.mdl")
    assert 40 <= mono.num_gauss <= 45  # SplitByCount splits pdfs below their share; none merge
    # the tree: stats per job, summed, grown; the triphone model and converted alignments
    for j in (1, 2):
        run(
            "acc-tree-stats",
            lang,
            d / "4.mdl",
            d / f"feats.{j}.scp",
            d / f"ali.{j}.ark",
            d / f"{j}.treeacc.npz",
        )
    run("sum-tree-stats", d / "treeacc.npz", d / "1.treeacc.npz", d / "2.treeacc.npz")
    run("build-tree", "--max-leaves", 24, lang, d / "treeacc.npz", d / "tree")
    run("init-model", "--mix-up", 30, lang, d / "tree", d / "treeacc.npz", d / "tri1.mdl")
    tri = GmmModel.load(d / "tri1.mdl")
    assert tri.ctx.context_width == 3 and tri.num_gauss >= tri.num_pdfs
    run("convert-ali", d / "4.mdl", d / "tri1.mdl", d / "ali.1.ark", d / "tri_ali.1.ark")
    old, new = read_alignments(d / "ali.1.ark"), read_alignments(d / "tri_ali.1.ark")
    t_old, t_new = TransitionTable.of(mono.trans), TransitionTable.of(tri.trans)
    for u in old:  # the same phones and HMM states, frame by frame
        assert (t_old.phone[old[u]] == t_new.phone[new[u]]).all()
        assert (t_old.hmm_state[old[u]] == t_new.hmm_state[new[u]]).all()
    run("ali-to-pdf", d / "tri1.mdl", d / "tri_ali.1.ark", d / "pdf.1.txt")
    pdfs = read_alignments(d / "pdf.1.txt")
    assert all((pdfs[u] == ali_to_pdf(t_new, new[u])).all() for u in new)
    assert max(int(p.max()) for p in pdfs.values()) < tri.num_pdfs
    run("ali-to-phones", d / "tri1.mdl", d / "tri_ali.1.ark", d / "phones.1.txt")
    # frame-agreement: reference labels in their own phone table (base phones), here made
    # from the alignment itself with one utterance's last 5 frames changed
    from paravg.graph.lang import base_phone, read_symbol_table

    names = {i: base_phone(p) for p, i in read_symbol_table(lang / "phones.txt").items()}
    (d / "ref_phones.txt").write_text("sil 0\naa 1\nbb 2\ncc 3\nspn 4\n")
    ref_id = {"sil": 0, "aa": 1, "bb": 2, "cc": 3, "spn": 4}
    refs = {u: np.array([ref_id[names[int(p)]] for p in t_new.phone[a]]) for u, a in new.items()}
    first = sorted(refs)[0]
    refs[first][-5:] = 1 + (refs[first][-5:] % 3)  # never the label it had (0..3 -> 1..3, +)
    (d / "ref.txt").write_text(
        "".join(f"{u} {' '.join(map(str, r))}\n" for u, r in sorted(refs.items()))
    )
    capsys.readouterr()
    run(
        "frame-agreement",
        lang,
        d / "tri1.mdl",
        d / "ref.txt",
        d / "ref_phones.txt",
        d / "tri_ali.1.ark",
    )
    total = sum(len(r) for r in refs.values())
    changed = int(
        sum(
            refs[first][-5:]
            != np.array([ref_id[names[int(p)]] for p in t_new.phone[new[first][-5:]]])
        )
    )
    out = capsys.readouterr().out
    assert f"{100 * (total - changed) / total:.1f}% of frames" in out and "0 not aligned" in out


def test_errors_name_the_file(tmp_path, capsys):
    proc = subprocess.run(
        [sys.executable, "-m", "paravg.gmm", "acc-stats", tmp_path / "no.mdl", tmp_path / "f.scp",
         tmp_path / "a.ark", tmp_path / "o.acc"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1 and f"{tmp_path / 'no.mdl'}: no such model file" in proc.stderr
    # a lang dir without its files: the missing file is named
    (tmp_path / "lang").mkdir()
    assert main(["make-lang", str(tmp_path / "nodict"), str(tmp_path / "lang2")]) == 1
    assert (
        main(
            ["train-mono", str(tmp_path / "nodata"), str(tmp_path / "lang"), str(tmp_path / "exp")]
        )
        == 1
    )


def test_train_mono_and_train_deltas_on_a_data_dir(tmp_path):
    """``train-mono`` and ``train-deltas`` (scaled down) on a data dir with a 13-dim
    ``feats.scp``, ``text`` and ``utt2spk``: models, alignments of every utterance, logs."""
    import json

    rng = np.random.default_rng(5)
    write_dict_dir(tmp_path / "dict", LEXICON, ["aa", "bb", "cc"])
    run("make-lang", tmp_path / "dict", tmp_path / "lang")
    feats, text = synthetic_job(rng, 0, 24)
    data = tmp_path / "data"
    data.mkdir()
    lift = rng.normal(size=(2, 13))  # 13-dim MFCC-like features
    feats13 = {
        u: (x @ lift + 0.3 * rng.normal(size=(len(x), 13))).astype(np.float32)
        for u, x in feats.items()
    }
    write_ark_scp(sorted(feats13.items()), data / "feats.ark", data / "feats.scp")
    (data / "text").write_text("".join(text))
    (data / "utt2spk").write_text("".join(f"{u} s{int(u[1:]) // 6}\n" for u in sorted(feats)))
    run("train-mono", "--nj", 2, "--num-iters", 5, "--max-iter-inc", 3, "--totgauss", 60,
        data, tmp_path / "lang", tmp_path / "mono")  # fmt: skip
    log = json.loads((tmp_path / "mono/log.json").read_text())
    assert [it["iter"] for it in log["iterations"]] == [0, 1, 2, 3, 4] and log["num_jobs"] == 2
    assert log["iterations"][-1]["avg_like"] > log["iterations"][0]["avg_like"]
    alis = {
        **read_alignments(tmp_path / "mono/ali.1.ark"),
        **read_alignments(tmp_path / "mono/ali.2.ark"),
    }
    assert sorted(alis) == sorted(feats) and not list((tmp_path / "mono").glob("*.acc"))
    # a rerun gives the same model (mixup's perturbations are seeded)
    run("train-mono", "--nj", 2, "--num-iters", 5, "--max-iter-inc", 3, "--totgauss", 60,
        data, tmp_path / "lang", tmp_path / "mono2")  # fmt: skip
    first, again = (
        GmmModel.load(tmp_path / "mono/final.mdl"),
        GmmModel.load(tmp_path / "mono2/final.mdl"),
    )
    assert first.num_gauss == again.num_gauss > first.num_pdfs
    for p in range(first.num_pdfs):
        for x, y in zip(first.pdf_params(p), again.pdf_params(p), strict=True):
            np.testing.assert_array_equal(x, y)
    run("train-deltas", "--nj", 2, "--num-iters", 4, "--max-iter-inc", 2, "--realign-iters", "2 3",
        30, 80, data, tmp_path / "lang", tmp_path / "mono", tmp_path / "tri")  # fmt: skip
    tri = GmmModel.load(tmp_path / "tri/final.mdl")
    assert tri.ctx.context_width == 3 and (tmp_path / "tri/tree").is_file()
    tri_alis = {
        **read_alignments(tmp_path / "tri/ali.1.ark"),
        **read_alignments(tmp_path / "tri/ali.2.ark"),
    }
    assert sorted(tri_alis) == sorted(feats)
    assert all(len(tri_alis[u]) == len(feats[u]) for u in feats)

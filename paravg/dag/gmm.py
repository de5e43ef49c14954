"""The GMM stage's answers (``data.targets: gmm``): lang, mono, tree, tri, alignments and
the per-frame pdf targets of every set, as DAG nodes (torch-free).

Rules of ``rules/gmm.smk`` ask these; the jobs are :mod:`paravg.gmm.stages`. Kaldi's
scripts, one node per job and per EM iteration, as the i-vector stages fan out and in:

* ``gmm_dict`` (the demo's lexicon; else ``gmm.dict_dir``) -> ``gmm_lang``
  (``prepare_lang.sh``) -> ``gmm_feats`` per (set, job) (13 MFCCs, CMVN, deltas);
* ``train_mono.sh``: ``gmm_mono_init`` (``0.mdl``), ``gmm_align_equal`` per job, then
  per iteration ``x`` of ``0 .. gmm.mono.num_iters − 1``: ``gmm_realign`` per job at the
  ``realign_iters``, ``gmm_acc`` per job (fan-out) and ``gmm_est`` (fan-in, ``x+1.mdl``);
  ``gmm_mono_align_si`` per job with the final model (``align_si.sh``);
* ``train_deltas.sh``: ``gmm_tree_acc`` per job, ``gmm_tree`` (sum, questions, tree,
  ``gmm-init-model``, mixup: ``1.mdl``), ``gmm_convert_ali`` per job, then iterations
  ``1 .. gmm.tri.num_iters − 1`` as mono's;
* ``gmm_align_set`` per (set, job) with the final triphone model, and ``gmm_targets`` per
  set: ``ali-to-pdf`` written as a Kaldi data dir with ``targets.ark``, which is then the
  set's source for ``prepare_data`` (:meth:`paravg.dag.data.DataDag.source_dir`).

Files live under ``<results>/gmm/``; an alignment ``ali.<x>.<j>.ark`` was made with
``x.mdl`` (``ali.equal``: the equal alignment, ``ali.convert``: mono's converted to the
tree, ``ali.si``: align_si's). Each EM iteration reads the latest alignment at or below
it, as the scripts' ``ali.JOB`` files are overwritten in place.
"""

from __future__ import annotations

from pathlib import Path

from paravg.dag.core import RunCore
from paravg.dag.gmm_paths import (
    gmm_root,
    lang_dir,
    num_pdfs_file,
    phones_files,
    targets_dir_files,
    uses_gmm,
)
from paravg.errors import ConfigError, DataError

SYSTEMS = ("mono", "tri")
LANG_FILES = ("L.fst", "topo", "words.txt", "phones.txt", "oov.txt", "phones/sets.int",
              "phones/roots.int", "phones/disambig.int", "phones/optional_silence.csl",
              "phones/context_indep.csl")  # fmt: skip
DICT_FILES = ("lexiconp.txt", "silence_phones.txt", "nonsilence_phones.txt",
              "optional_silence.txt")  # fmt: skip


class GmmDag:
    """GMM files of one run: ``PARAVG.gmm`` (``from_dag("gmm.acc_inputs")``)."""

    def __init__(self, run: RunCore, data) -> None:
        self.run, self.data = run, data
        self.config, self.layout = run.config, run.layout
        self.enabled = uses_gmm(run.config)
        self.settings = run.config.get("gmm", {})
        self.root = gmm_root(self.layout.results)

    # ------------------------------------------------------------ checks
    def check(self) -> None:
        """The cross-key rules of ``data.targets: gmm`` (made when the DAG is built, each
        error naming its key)."""
        if not self.enabled:
            return
        if self.config["data"]["num_targets"]:
            raise ConfigError(
                "data.num_targets must be 0 with data.targets: gmm (the network's outputs are "
                "the GMM tree's pdfs)"
            )
        tri = self.settings["tri"]
        if tri["tot_gauss"] < tri["num_leaves"]:
            raise ConfigError(
                f"gmm.tri.tot_gauss ({tri['tot_gauss']}) must be at least gmm.tri.num_leaves "
                f"({tri['num_leaves']})"
            )
        own = self.settings["dict_dir"]
        if own is None and not self.data.uses_demo():
            raise ConfigError(
                "data.targets: gmm on your own data needs gmm.dict_dir (Kaldi's "
                "data/local/dict: lexicon.txt, silence_phones.txt, nonsilence_phones.txt, "
                "optional_silence.txt)"
            )
        if own is not None and not Path(own).is_dir():
            raise DataError(f"gmm.dict_dir = {own}: the dict directory does not exist")
        for set_ in self.run.all_sets():
            if set_ in self.config["data"]["sets"]:
                text = Path(self.source_dir(set_)) / "text"
                if not text.is_file():
                    raise DataError(
                        f"data.sets.{set_}: {text} does not exist; data.targets: gmm aligns "
                        "every set to its transcript"
                    )

    # ------------------------------------------------------------ paths
    def jobs(self) -> range:
        return range(1, self.settings["nj"] + 1)

    def dict_dir(self) -> str:
        return self.settings["dict_dir"] or f"{self.root}/dict"

    def dict_files(self) -> list[str]:
        return [f"{self.dict_dir()}/{n}" for n in DICT_FILES]

    def demo_dict_sources(self) -> dict[str, str]:
        """The demo training set's text and phone_ctm (written by the demo corpus rule)."""
        train = self.run.source_train_set
        return {
            "text": self.layout.demo_file(f"{train}/text"),
            "phone_ctm": self.layout.demo_file(f"{train}/phone_ctm"),
        }

    def lang_dir(self) -> str:
        return lang_dir(self.layout.results)

    def lang_files(self) -> list[str]:
        return [f"{self.lang_dir()}/{n}" for n in LANG_FILES]

    def feats(self, set_, j, ext: str = "scp") -> str:
        return f"{self.root}/feats/{set_}/feats.{j}.{ext}"

    def model(self, sys, x) -> str:
        return f"{self.root}/{sys}/{x}.mdl"

    def final_model(self, sys: str) -> str:
        return self.model(sys, self.settings[sys]["num_iters"])

    def acc(self, sys, x, j) -> str:
        return f"{self.root}/{sys}/{x}.{j}.acc"

    def ali(self, sys, x, j) -> str:
        """``x``: the model's iteration, or ``equal``, ``convert``, ``si``."""
        return f"{self.root}/{sys}/ali.{x}.{j}.ark"

    def tree_acc(self, j) -> str:
        return f"{self.root}/tri/{j}.treeacc.npz"

    def tree_files(self) -> dict[str, str]:
        return {
            "treeacc": f"{self.root}/tri/treeacc.npz",
            "tree": f"{self.root}/tri/tree",
            "model": self.model("tri", 1),
            "num_pdfs": self.num_pdfs_file(),
        }

    def num_pdfs_file(self) -> str:
        return num_pdfs_file(self.layout.results)

    def set_ali(self, set_, j) -> str:
        return f"{self.root}/ali/{set_}/ali.{j}.ark"

    def source_dir(self, set_: str) -> str:
        """The user's (or the demo corpus's) data dir of ``set_``: wav.scp, utt2spk, text
        (for a set of lhotse manifests, the Kaldi dir rule lhotse_to_kaldi makes)."""
        if set_ in self.data.lhotse_sets():
            return self.data.converted_dir(set_)
        return self.data.data_sets()[set_]

    def text(self, set_: str) -> str:
        return f"{self.source_dir(set_)}/text"

    # ------------------------------------------------------------ rule answers
    def set_inputs(self, set_: str) -> list[str]:
        """The source files a set's GMM features and targets read."""
        return self.data.original_inputs(set_)

    def realign_iters(self, sys: str) -> list[int]:
        """The iterations that realign (train_mono.sh / train_deltas.sh ignore those at or
        beyond num_iters)."""
        s = self.settings[sys]
        return sorted(x for x in set(s["realign_iters"]) if 1 <= x < s["num_iters"])

    def ali_for_iter(self, sys: str, x: int, j) -> str:
        """The alignment iteration ``x``'s accumulation reads: the latest realignment at or
        below ``x``, else the start (mono: equal, tri: converted)."""
        done = [r for r in self.realign_iters(sys) if r <= x]
        return self.ali(sys, done[-1] if done else ("equal" if sys == "mono" else "convert"), j)

    def acc_inputs(self, sys: str, x, j) -> dict[str, str]:
        x = int(x)
        return {
            "model": self.model(sys, x),
            "feats": self.feats(self.run.source_train_set, j),
            "ali": self.ali_for_iter(sys, x, j),
        }

    def est_inputs(self, sys: str, y) -> dict:
        """Model ``y``'s estimate: model ``y − 1`` and its per-job accumulators (the
        fan-in); mono's also reads ``0.mdl`` (its Gaussians start the mixup schedule)."""
        x = int(y) - 1
        inputs = {"model": self.model(sys, x), "accs": [self.acc(sys, x, j) for j in self.jobs()]}
        if sys == "mono":
            inputs["first"] = self.model("mono", 0)
        return inputs

    def est_params(self, sys: str, y) -> dict:
        """gmm-est's options of model ``y`` (:func:`paravg.gmm.stages.est`)."""
        s, x = self.settings[sys], int(y) - 1
        return {
            "x": x,
            "n0": None if sys == "mono" else s["num_leaves"],
            "totgauss": s["totgauss"] if sys == "mono" else s["tot_gauss"],
            "max_iter_inc": s["max_iter_inc"],
            "power": s["power"],
            "first": sys == "mono" and x == 0,
        }

    def realign_params(self, sys: str, x) -> dict:
        """gmm-align-compiled's beams: train_mono.sh's initial beam at its first
        realignment, the regular one after; train_deltas.sh's beam throughout."""
        s = self.settings[sys]
        first = sys == "mono" and int(x) == 1
        return {
            "boost_silence": s["boost_silence"],
            "beam": s["initial_beam"] if first else s["beam"],
            "retry_beam": s["retry_beam"],
        }

    def realign_inputs(self, sys: str, x, j) -> dict:
        return {
            "lang": self.lang_files(),
            "model": self.model(sys, int(x)),
            "feats": self.feats(self.run.source_train_set, j),
        }

    def set_align_inputs(self, set_: str, j) -> dict:
        return {
            "lang": self.lang_files(),
            "model": self.final_model("tri"),
            "feats": self.feats(set_, j),
            "source": self.set_inputs(set_),
        }

    def targets_inputs(self, set_: str) -> dict:
        return {
            "model": self.final_model("tri"),
            "alis": [self.set_ali(set_, j) for j in self.jobs()],
            "source": self.set_inputs(set_),
        }

    def phones_outputs(self) -> dict[str, str]:
        """``gmm_phones``' outputs (with the ``{set}`` wildcard): the set's per-frame
        phones, read by a chain experiment (:meth:`paravg.dag.chain.ChainDag.frame_labels`)."""
        return phones_files(self.layout.results, "{set}")

    def phones_inputs(self, set_: str) -> dict:
        """``gmm_phones``' inputs: the final triphone model and the set's alignments."""
        return {
            "model": self.final_model("tri"),
            "alis": [self.set_ali(set_, j) for j in self.jobs()],
        }

    def targets_outputs(self) -> list[str]:
        """``gmm_targets``' outputs (with the ``{set}`` wildcard)."""
        return targets_dir_files(self.layout.results, "{set}")

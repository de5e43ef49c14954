"""The chain stage's answers (``rules/chain.smk``; package :mod:`paravg.chain`; torch-free).

Only a run with a ``model.objective: chain`` experiment has chain rules' jobs:

* ``chain_den`` (Kaldi's ``gen_topo.py``, tree, ``chain-est-phone-lm``,
  ``chain-make-den-fst``): ``<egs>/chain/`` from the train set's targets;
* ``chain_sup`` / ``chain_sup_subset``: the supervision of every eg of training archive
  ``a`` / of a subset (``valid_diag``, ``train_diag``, ``combine``), beside it
  (``<prefix>.chain.*.npy``, :class:`paravg.chain.egs.SupervisionTable`).

A chain experiment's train jobs, diagnostics and ``init_model`` take these as inputs
(:meth:`ChainDag.job_inputs`, :meth:`ChainDag.subset_inputs`); a cross-entropy
experiment's inputs are what they were. The supervision is shared by the run's chain
experiments, so they must agree on its options (the frame subsampling factor and the
tolerances) and on the tree (``model.chain.tree``, ``num_leaves``):
:meth:`ChainDag.supervision_options` and :meth:`ChainDag.tree_options` say so at start-up.

With ``data.targets: gmm`` (:attr:`ChainDag.on_lang`) the chain stage reads each set's
per-frame phones of the GMM stage's final alignment (rule ``gmm_phones``,
:meth:`ChainDag.frame_labels`) and the GMM lang's phone tables (``chain_den``'s
``lang``): Kaldi's chain recipes take the GMM lang and alignments; the tree is then
left-biphone unless ``model.chain.tree`` says otherwise (:meth:`ChainDag.tree_defaults`),
always a file, and the chain word graph is the GMM lang's (``graph_gmm_chain_words``).
With ``data.perturb`` the copies' phones are the source's, mapped as their targets
(``chain_perturbed_phones``, :func:`paravg.perturb.perturb_frame_labels`).

With ``model.chain.tree: biphone`` the network's outputs are the tree's pdfs, known only
after ``chain_den`` (``<egs>/chain/info.json``'s ``num_pdfs``): ``init_model`` then reads
that file (:meth:`ChainDag.init_inputs`; :meth:`ChainDag.num_outputs` is None), and the
chain graphs take the ``tree`` file (:meth:`ChainDag.tree_file`).
"""

from __future__ import annotations

from paravg.chain.table_files import table_files
from paravg.dag.core import RunCore
from paravg.dag.egs import EGS_SUBSETS, EgsDag
from paravg.dag.gmm_paths import CHAIN_LANG_FILES, lang_dir, phones_files, uses_gmm
from paravg.errors import ConfigError

#: ``model.chain`` keys that change the supervision (the rest only the objective)
SUPERVISION_KEYS = ("left_tolerance", "right_tolerance")
CHAIN_FILES = ("topo", "phone_lm.fst", "den.fst", "normalization.fst", "info.json")
#: ``model.chain`` tree keys and their defaults (the monophone tree: 2 pdfs a phone)
TREE_DEFAULTS = {"tree": "monophone", "num_leaves": 500, "thresh": 300.0}
#: ``model.chain.tree``'s default on GMM alignments (``data.targets: gmm``): Kaldi's
#: chain recipes' left-biphone tree (build_tree.sh --context-width=2 --central-position=1)
LANG_TREE_DEFAULT = "biphone"


class ChainDag:
    """Chain files of one run: ``PARAVG.chain``."""

    def __init__(self, run: RunCore, egs: EgsDag) -> None:
        self.run, self.egs, self.layout = run, egs, run.layout
        self.experiments = [
            e for e, cfg in run.experiments.items() if cfg["model"].get("objective") == "chain"
        ]
        #: data.targets gmm: the chain phones are the GMM lang's, the frame labels the
        #: GMM stage's per-frame phones (rule gmm_phones), the tree always a file
        self.on_lang = bool(self.experiments) and uses_gmm(run.config)

    def is_chain(self, exp: str) -> bool:
        return exp in self.experiments

    def supervision_options(self) -> dict:
        """``frame_subsampling_factor``, ``left_tolerance``, ``right_tolerance`` of the
        run's chain supervision (the defaults of :data:`paravg.chain.train.CHAIN_DEFAULTS`
        for absent keys); raises when two chain experiments differ."""
        seen: dict[tuple, str] = {}
        for exp in self.experiments:
            model = self.run.experiments[exp]["model"]
            chain = model.get("chain") or {}
            key = (
                int(model.get("frame_subsampling_factor", 1)),
                *(chain.get(k, 5) for k in SUPERVISION_KEYS),
            )
            seen.setdefault(key, exp)
        if len(seen) > 1:
            raise ConfigError(
                "chain experiments share the egs' supervision: "
                f"{sorted(seen.values())} differ in model.frame_subsampling_factor or "
                f"model.chain.{'/'.join(SUPERVISION_KEYS)}"
            )
        f, left, right = next(iter(seen)) if seen else (1, 5, 5)
        return {"frame_subsampling_factor": f, "left_tolerance": left, "right_tolerance": right}

    def tree_defaults(self) -> dict:
        """:data:`TREE_DEFAULTS`, with ``tree: biphone`` on GMM alignments
        (:data:`LANG_TREE_DEFAULT`, Kaldi's chain recipes' tree)."""
        if uses_gmm(self.run.config):
            return {**TREE_DEFAULTS, "tree": LANG_TREE_DEFAULT}
        return dict(TREE_DEFAULTS)

    def tree_options(self) -> dict:
        """``tree`` (monophone | biphone) and ``num_leaves`` of the run's chain tree
        (:meth:`tree_defaults` for absent keys); raises when two chain experiments
        differ (they share ``chain_den``)."""
        defaults = self.tree_defaults()
        seen: dict[tuple, str] = {}
        for exp in self.experiments:
            chain = self.run.experiments[exp]["model"].get("chain") or {}
            seen.setdefault(tuple(chain.get(k, v) for k, v in defaults.items()), exp)
        if len(seen) > 1:
            raise ConfigError(
                "chain experiments share the chain tree (chain_den): "
                f"{sorted(seen.values())} differ in model.chain.tree, num_leaves or thresh"
            )
        values = next(iter(seen)) if seen else tuple(defaults.values())
        return dict(zip(defaults, values, strict=True))

    def biphone(self) -> bool:
        return bool(self.experiments) and self.tree_options()["tree"] == "biphone"

    def has_tree_file(self) -> bool:
        """``chain_den`` writes ``<egs>/chain/tree``: the biphone tree, or any tree on a
        lang (the monophone one shared by a base phone's variants); the network's
        outputs are then known after it only (:meth:`num_outputs`)."""
        return self.biphone() or self.on_lang

    def tree_file(self) -> list[str]:
        """``[<egs>/chain/tree]`` when :meth:`has_tree_file`, else ``[]`` (no file)."""
        return [f"{self.chain_dir()}/tree"] if self.has_tree_file() else []

    def frame_labels(self, set_: str) -> str:
        """The scp of ``set_``'s frame labels the chain stage reads: its prepared targets
        (target ``k`` is chain phone ``k + 1``), or on GMM alignments the GMM stage's
        ``ali-to-phones --per-frame`` (lang phone ``p``, read as ``p − 1``)."""
        if self.on_lang:
            return phones_files(self.layout.results, set_)["scp"]
        return self.layout.targets_scp(set_)

    def perturbed_labels(self) -> bool:
        """On GMM alignments with ``data.perturb``: the perturbed training set's phones
        are the source's carried to each copy (rule ``chain_perturbed_phones``)."""
        return self.on_lang and self.run.train_set != self.run.source_train_set

    def perturbed_labels_inputs(self) -> dict[str, str]:
        """``chain_perturbed_phones``' inputs: the source training set's phones and the
        perturbed set's targets (each copy's frame count)."""
        src = phones_files(self.layout.results, self.run.source_train_set)
        return {
            **src,
            "targets": self.layout.targets_scp(self.run.train_set),
        }

    def perturbed_labels_outputs(self) -> dict[str, str]:
        return phones_files(self.layout.results, self.run.train_set)

    def lang_files(self) -> list[str]:
        """The GMM lang's files ``chain_den`` reads (none without GMM alignments)."""
        if not self.on_lang:
            return []
        return [f"{lang_dir(self.layout.results)}/{n}" for n in CHAIN_LANG_FILES]

    def den_inputs(self) -> dict:
        """``chain_den``'s inputs beyond the frame labels: the train set's features for the
        biphone tree's statistics, the GMM lang's phone tables on GMM alignments."""
        inputs = {}
        if self.biphone():
            inputs["feats_scp"] = self.layout.feats_scp(self.run.train_set)
        if self.on_lang:
            inputs["lang"] = self.lang_files()
        return inputs

    def den_params(self) -> dict:
        """``chain_den``'s tree params: none for the monophone tree on targets (its params
        are what they were), else ``tree`` (:meth:`tree_options`) and
        ``frame_subsampling_factor``, and on GMM alignments ``lang_dir``."""
        if not self.has_tree_file():
            return {}
        f = self.supervision_options()["frame_subsampling_factor"]
        params = {"tree": self.tree_options(), "frame_subsampling_factor": f}
        if self.on_lang:
            params["lang_dir"] = lang_dir(self.layout.results)
        return params

    def chain_dir(self) -> str:
        """``<egs>/chain`` (:func:`paravg.chain.train.chain_dir_of` finds it from an
        archive's prefix)."""
        return f"{self.layout.egs_dir()}/chain"

    def den_files(self) -> dict[str, str]:
        d = self.chain_dir()
        files = {name.replace(".", "_"): f"{d}/{name}" for name in CHAIN_FILES}
        return {**files, **({"tree": self.tree_file()[0]} if self.has_tree_file() else {})}

    def table_files(self, prefix: str) -> list[str]:
        return list(table_files(prefix).values())

    def archive_table(self, a) -> list[str]:
        return self.table_files(self.layout.egs_prefix(a))

    def subset_table(self, name: str) -> list[str]:
        return self.table_files(self.layout.egs_subset_prefix(name))

    def num_outputs(self, exp: str) -> int | None:
        """The network's outputs: the targets, or for a chain experiment the chain
        monophone tree's pdfs (two pdf-classes per phone, :mod:`paravg.chain.prepare`);
        None for a tree file (its pdfs: ``chain/info.json``, :meth:`init_inputs`)."""
        k = int(self.run.config["data"]["num_targets"])  # 0: the egs' (init_model)
        if not self.is_chain(exp):
            return k
        if self.has_tree_file():
            return None
        return 2 * (k or int(self.run.egs_info()["num_targets"]))

    def init_inputs(self, exp: str) -> list[str]:
        """``init_model``'s chain input: ``[<egs>/chain/info.json]`` (the tree's pdfs) for
        a chain experiment with a tree file, else ``[]``."""
        if self.is_chain(exp) and self.has_tree_file():
            return [self.den_files()["info_json"]]
        return []

    def job_inputs(self, exp: str, archive: int) -> dict:
        """The chain inputs of a train job on ``archive`` (none for cross-entropy)."""
        if not self.is_chain(exp):
            return {}
        return {"chain_den": self.den_files()["den_fst"], "chain_sup": self.archive_table(archive)}

    def subset_inputs(self, exp: str, names=EGS_SUBSETS) -> dict:
        """The chain inputs of a job reading the subsets ``names`` (diagnostics)."""
        if not self.is_chain(exp):
            return {}
        tables = [f for name in names for f in self.subset_table(name)]
        return {"chain_den": self.den_files()["den_fst"], "chain_sup": tables}

    def eval_inputs(self, exp: str, set_: str) -> dict:
        """The chain setup a chain experiment's evaluation reads (none for cross-entropy):
        ``chain_<file>`` of :data:`CHAIN_FILES` (the script passes their directory), and
        on GMM alignments the set's per-frame phones as its ``targets``."""
        if not self.is_chain(exp):
            return {}
        inputs = {f"chain_{k}": v for k, v in self.den_files().items()}
        if self.on_lang:
            inputs["targets"] = self.frame_labels(set_)
        return inputs

    def all_files(self) -> list[str]:
        """Every chain file of the run (after the egs checkpoint); none without chain."""
        if not self.experiments:
            return []
        n = self.run.egs_info()["num_archives"]
        tables = [f for a in range(n) for f in self.archive_table(a)]
        subsets = [f for name in EGS_SUBSETS for f in self.subset_table(name)]
        return [*self.den_files().values(), *tables, *subsets]

"""The recognition stage's answers: graphs, decoding, scoring and the Kaldi export
(torch-free).

Rules of ``rules/graph.smk``, ``rules/decode.smk`` and ``rules/export.smk`` ask these
(Kaldi's ``utils/mkgraph.sh``, ``steps/nnet3/decode.sh`` with ``local/score.sh``, and a
vosk model directory: :mod:`paravg.graph`, :mod:`paravg.decode`, :mod:`paravg.export`).

A ``model.objective: chain`` experiment decodes on its own graphs, ``graph/chain_words``
(and ``graph/chain_phones`` for PER): the demo's lexicon and LMs with the chain topology,
target k's phone with pdfs 2k and 2k + 1 (the chain network's outputs), built at
``graph.chain_self_loop_scale`` / ``chain_transition_scale`` (1.0, as Kaldi's chain
recipes' ``mkgraph.sh``); its search uses ``decode.chain_acoustic_scale`` (1.0) and
``decode.chain_post_decode_acwt`` (10); its export takes ``graph/chain_words``.
"""

from __future__ import annotations

from pathlib import Path

from paravg.dag.core import RunCore
from paravg.dag.ivectors import IvectorDag
from paravg.dag.training import TrainDag


class Recognition:
    """The graph, decoding and scoring settings of a run (``graph``, ``decode``):
    ``PARAVG.recognition`` (``from_dag("recognition.score_inputs")``)."""

    def __init__(self, run: RunCore, train: TrainDag, ivector: IvectorDag) -> None:
        from paravg.graph.settings import decoding_enabled

        self.run, self.train, self.ivector = run, train, ivector
        self.config, self.layout = run.config, run.layout
        self.experiments = list(run.experiments)
        self.settings = self.config["decode"]
        self.graph_source = self.config["graph"]["source"]
        self.enabled, self.why_not = decoding_enabled(self.config)
        self.per_enabled = bool(self.settings["per"]) and self.graph_source == "demo"
        if self.config["data"].get("targets") == "gmm":  # the targets are pdfs, not phones
            self.per_enabled = False
        self._num_frames: dict[tuple[str, int], dict[str, int]] = {}  # decode_mem_mb's
        self.chain_experiments = list(train.chain.experiments)
        self.check_chain()

    # ------------------------------------------------------------ chain experiments
    def check_chain(self) -> None:
        """A chain experiment decodes on the chain graphs of the demo's lexicon and LMs
        (``graph.source: demo``): a user's lang or HCLG (``lang``, ``hclg``) was built
        for their GMM's pdfs, not the chain tree's, so that combination is refused at
        start-up while decoding is on."""
        from paravg.errors import ConfigError

        if self.chain_experiments and self.enabled and self.graph_source != "demo":
            raise ConfigError(
                f"experiments {self.chain_experiments} (model.objective chain) decode on the "
                f"chain graph paravg builds (graph.source: demo); graph.source "
                f"{self.graph_source}'s graph is made for its final_mdl's pdfs, not the chain "
                "tree's: use graph.source demo, or decode.enabled: false"
            )

    def is_chain(self, exp: str | None) -> bool:
        return exp is not None and exp in self.chain_experiments

    def graph_name(self, kind: str, exp: str | None = None) -> str:
        """The directory under ``graph/`` experiment ``exp`` decodes graph ``kind``
        (words, phones) with: ``chain_<kind>`` for a chain experiment, else ``kind``."""
        return f"chain_{kind}" if self.is_chain(exp) else kind

    def graph_names(self) -> list[str]:
        """Every graph directory the run's experiments decode with."""
        names = {self.graph_name(k, e): None for e in self.experiments for k in self.graph_dirs()}
        return list(names)

    def chain_graph_options(self) -> dict:
        g = self.config["graph"]
        return {
            "transition_scale": g["chain_transition_scale"],
            "self_loop_scale": g["chain_self_loop_scale"],
        }

    def graph_outputs(self, kind: str) -> list[str]:
        """Files of results/graph/<kind>/ the decoder and the export read."""
        names = ("HCLG.fst", "words.txt", "transition.mdl", "graph.json")
        return [self.layout.graph_file(kind, n) for n in names]

    def graph_options(self) -> dict:
        g = self.config["graph"]
        return {"transition_scale": g["transition_scale"], "self_loop_scale": g["self_loop_scale"]}

    def demo_train_file(self, name: str) -> str:
        """A file of the demo corpus's training set (text, phone_ctm: the demo graph)."""
        return self.layout.demo_file(f"{self.config['data']['train_set']}/{name}")

    def user_graph_inputs(self) -> dict:
        """A user's files for graph.source lang/hclg (inputs, so their edits rebuild)."""
        g = self.config["graph"]
        if self.graph_source == "hclg":
            hclg_dir = Path(g["hclg_dir"])
            return {
                "hclg": str(hclg_dir / "HCLG.fst"),
                "words": str(hclg_dir / "words.txt"),
                "final_mdl": g["final_mdl"],
            }
        inputs = {
            "lm": g["lm"],
            "final_mdl": g["final_mdl"],
            "lang": str(Path(g["lang_dir"]) / "phones.txt"),
        }
        if g["tree"]:
            inputs["tree"] = g["tree"]
        return inputs

    def graph_dirs(self, exp: str | None = None) -> dict[str, str]:
        """Graph kind (words, phones) -> the directory experiment ``exp`` decodes it with
        (a cross-entropy experiment's without ``exp``)."""
        kinds = ["words"] + (["phones"] if self.per_enabled else [])
        return {k: self.layout.graph_dir(self.graph_name(k, exp)) for k in kinds}

    def grids(self) -> dict[str, dict]:
        """Each decoded graph's scoring grid: the word graph's (score.sh: LMWT 7-17, WIP
        0, 0.5, 1) and the phone graph's (TIMIT: LMWT 1-10)."""
        d = self.settings
        grids = {
            "words": (d["lmwt_min"], d["lmwt_max"], d["word_ins_penalties"]),
            "phones": (d["per_lmwt_min"], d["per_lmwt_max"], d["per_word_ins_penalties"]),
        }
        return {
            kind: {"lmwts": list(range(lo, hi + 1)), "wips": list(wips)}
            for kind, (lo, hi, wips) in grids.items()
            if kind in self.graph_dirs()
        }

    def ctm_options(self) -> dict:
        """Rule score's CTM options (``steps/get_ctm_conf.sh``'s ``--beam`` and
        ``lattice-to-ctm-conf --decode-mbr``)."""
        return {"beam": self.settings["ctm_beam"], "decode_mbr": self.settings["ctm_decode_mbr"]}

    def decode_mem_mb(self, set_: str, j: int) -> int:
        """Rule decode_split's ``mem_mb``: split j's longest utterance (the set's
        ``utt2num_frames``; one minute until the features exist, as in a dry run of a new
        set: Snakemake asks again before the job runs). paravg.decode.split."""
        from paravg.decode.split import FRAMES_PER_MINUTE, read_num_frames, split_mem_mb

        path = Path(self.layout.utt2num_frames(set_))
        per_minute = self.settings["mem_mb_per_minute"]
        if not path.is_file():
            return split_mem_mb({"?": FRAMES_PER_MINUTE}, 1, 0, per_minute)
        key = (str(path), path.stat().st_mtime_ns)  # read once per set, not once per split
        if key not in self._num_frames:
            self._num_frames[key] = read_num_frames(path)
        return split_mem_mb(self._num_frames[key], self.settings["nj"], j, per_minute)

    def search_options(self, exp: str | None = None) -> dict:
        """The search options of rule decode_split (the results table's check: without
        ``exp``); a chain experiment's add :data:`paravg.decode.options.CHAIN_SCALE_KEYS`."""
        from paravg.decode.options import CHAIN_SCALE_KEYS, recorded_options

        options = recorded_options(self.settings)
        if self.is_chain(exp):
            options.update({k: self.settings[k] for k in CHAIN_SCALE_KEYS})
        return options

    def split_outputs(self, j) -> dict[str, str]:
        """The split's summary JSON and each graph's lattices (paravg.decode.decoder)."""
        outputs = {"summary": self.layout.decode_split("{exp}", "{set}", j)}
        for kind in self.graph_dirs():
            outputs[f"lattices_{kind}"] = self.layout.decode_lattices("{exp}", "{set}", kind, j)
        return outputs

    # ------------------------------------------------------------ decoding, scoring
    def decode_inputs(self, exp: str, set_: str) -> dict:
        """The network's inputs (as evaluation, without targets) and each graph's HCLG and
        transition model."""
        inputs = self.train.eval_inputs(exp, set_)
        inputs.pop("targets")
        for key in [k for k in inputs if k.startswith("chain_")]:  # evaluation's only
            inputs.pop(key)
        for kind in self.graph_dirs():
            name = self.graph_name(kind, exp)
            inputs[f"graph_{kind}"] = self.layout.graph_file(name, "HCLG.fst")
            inputs[f"transitions_{kind}"] = self.layout.graph_file(name, "transition.mdl")
        return inputs

    def score_inputs(self, exp: str, set_: str) -> dict:
        """Every split's summary and lattices, the graphs' symbol tables, transition models
        and word boundaries (the CTM), and the tuning set's scores."""
        L = self.layout
        nj = self.settings["nj"]
        inputs = {"splits": [L.decode_split(exp, set_, j) for j in range(nj)]}
        for kind in self.graph_dirs():
            inputs[f"lattices_{kind}"] = [L.decode_lattices(exp, set_, kind, j) for j in range(nj)]
            inputs[f"words_{kind}"] = L.graph_file(self.graph_name(kind, exp), "words.txt")
            inputs[f"transitions_{kind}"] = L.graph_file(
                self.graph_name(kind, exp), "transition.mdl"
            )
        tune = self.settings["tune_set"]
        if tune and tune != set_:
            inputs["tuned"] = L.decode_scores(exp, tune)
        return inputs

    def decode_scores(self) -> list[str]:
        """scores.json of every experiment x eval set (results table), when decoding is on."""
        if not self.enabled:
            return []
        return [
            self.layout.decode_scores(e, s) for e in self.experiments for s in self.run.eval_sets
        ]

    # ------------------------------------------------------------ the Kaldi export
    def export_inputs(self, exp: str) -> dict:
        """final.pt, the word graph (HCLG.fst, words.txt, transition.mdl, graph.json), and
        the i-vector system when the experiment's model takes i-vectors."""
        inputs = {"model": self.layout.final_model(exp)}
        inputs.update(
            zip(
                ("hclg", "words", "transition", "graph_json"),
                self.graph_outputs(self.graph_name("words", exp)),
                strict=True,
            )
        )
        if self.run.uses_ivectors(exp):
            inputs.update(zip(("pca", "ubm", "extractor"), self.ivector.model_files(), strict=True))
        return inputs

    def export_graph_dir(self, exp: str) -> str:
        """The word graph the export of ``exp`` carries (``graph/chain_words`` for a
        chain experiment)."""
        return self.layout.graph_dir(self.graph_name("words", exp))

    def export_acoustic_scale(self, exp: str) -> float:
        """model.conf's acoustic scale: ``decode.acoustic_scale`` (a 10-ms frame's; the
        export multiplies it by f), for a chain experiment ``decode.chain_acoustic_scale``
        (its output frame's, written as it is: vosk's chain models' 1.0)."""
        key = "chain_acoustic_scale" if self.is_chain(exp) else "acoustic_scale"
        return self.settings[key]

    def export_decoder_options(self) -> dict:
        """The export section's search options, for vosk's conf/model.conf (deployment:
        narrower than decode.sh's beams that paravg's own decoding uses)."""
        return {
            k: self.config["export"][k]
            for k in ("beam", "lattice_beam", "max_active", "min_active")
        }

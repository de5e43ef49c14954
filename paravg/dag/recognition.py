"""The recognition stage's answers: graphs, decoding, scoring and the Kaldi export
(torch-free).

Rules of ``rules/graph.smk``, ``rules/decode.smk`` and ``rules/export.smk`` ask these
(Kaldi's ``utils/mkgraph.sh``, ``steps/nnet3/decode.sh`` with ``local/score.sh``, and a
vosk model directory: :mod:`paravg.graph`, :mod:`paravg.decode`, :mod:`paravg.export`).
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

    def graph_dirs(self) -> dict[str, str]:
        kinds = ["words"] + (["phones"] if self.per_enabled else [])
        return {k: self.layout.graph_dir(k) for k in kinds}

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

    def search_options(self) -> dict:
        from paravg.decode.options import recorded_options

        return recorded_options(self.settings)

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
        for kind in self.graph_dirs():
            inputs[f"graph_{kind}"] = self.layout.graph_file(kind, "HCLG.fst")
            inputs[f"transitions_{kind}"] = self.layout.graph_file(kind, "transition.mdl")
        return inputs

    def score_inputs(self, exp: str, set_: str) -> dict:
        """Every split's summary and lattices, the graphs' symbol tables, transition models
        and word boundaries (the CTM), and the tuning set's scores."""
        L = self.layout
        nj = self.settings["nj"]
        inputs = {"splits": [L.decode_split(exp, set_, j) for j in range(nj)]}
        for kind in self.graph_dirs():
            inputs[f"lattices_{kind}"] = [L.decode_lattices(exp, set_, kind, j) for j in range(nj)]
            inputs[f"words_{kind}"] = L.graph_file(kind, "words.txt")
            inputs[f"transitions_{kind}"] = L.graph_file(kind, "transition.mdl")
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
                self.graph_outputs("words"),
                strict=True,
            )
        )
        if self.run.uses_ivectors(exp):
            inputs.update(zip(("pca", "ubm", "extractor"), self.ivector.model_files(), strict=True))
        return inputs

    def export_decoder_options(self) -> dict:
        """The export section's search options, for vosk's conf/model.conf (deployment:
        narrower than decode.sh's beams that paravg's own decoding uses)."""
        return {
            k: self.config["export"][k]
            for k in ("beam", "lattice_beam", "max_active", "min_active")
        }

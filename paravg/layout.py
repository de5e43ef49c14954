"""The file contract of a run, once: every path a stage writes or reads (torch-free).

The rules, the plan, ``paravg.progress``, the plots and the tests all spell paths
through a :class:`Layout`; no other module composes a results path. Each method returns
a path for concrete values, or a Snakemake pattern when given wildcard strings::

    L = Layout("results")
    L.job_model("default", 5, 2)        # 'results/exp/default/5/job2.pt'
    L.job_model("{exp}", "{t}", "{j}")  # 'results/exp/{exp}/{t}/job{j}.pt' (a rule output)

Kaldi's numbering (``steps/nnet3/train_dnn.py``): ``<t>.pt`` is the model at the start
of iteration t (t iterations done); the jobs of iteration t write ``<t+1>/job<j>.pt``, and
syncing them gives ``<t+1>.pt``. So every per-iteration path here takes the **index**
t of its directory or file name — the number of iterations completed — never the
iteration that wrote it: job j of iteration t writes ``job_model(exp, t + 1, j)``.

::

    results/data/<set>/            prepared Kaldi data dir (targets.scp, report.json)
    results/feats/<set>/           feats.scp (+ arks), cmvn.scp, utt2num_frames
    results/ivector/               pca, ubm.<it>, extractor.<it>; <set>/ivector_online.scp
    results/egs/                   info.json, egs.<a>.*.npy, valid_diag, train_diag, combine
    results/graph/<kind>/          decoding graphs (words, phones)
    results/exp/<exp>/             0.pt, init.json
        <t>/job<j>.pt, .json       job j's output model and statistics (iteration t − 1)
        <t>/job<j>.start.pt        the start model it trained from (decentralized methods)
        <t>.pt, sync/<t>.json      the synced model after t iterations (average, bmuf)
        bmuf/<t>.pt, .delta.pt     BMUF's global model g and block update Δ
        consensus/<t>.pt, .json    mean of the jobs (decentralized methods)
        ema/<t>.pt                 the exponential moving average of the synced models
        diag/<t>.json              diagnostics of the synced model after t iterations
        blocks/<b>.json            block b of iterations is done (the DAG is expanded past it)
        combined.pt, combine.json, final.pt, final.json, eval/<set>.json, eval/ema/<set>.json
        decode/<set>/              split<j>.json, lat.<j>.gz, phones/lat.<j>.gz, scores.json,
                                   hyps.json, ctm, wer_details/, per_details/
        kaldi/                     the model in Kaldi's formats (am/ conf/ ivector/ graph/)
        report/<figure>.png, report/config.{yaml,html}
    results/results.md, .tsv       the results table
    logs/<rule>/<wildcards>.log    one log per job
"""

from __future__ import annotations

import glob
import inspect
import os
import re
from dataclasses import dataclass
from pathlib import Path

Index = int | str  # a concrete index or a wildcard pattern such as "{t}"


@dataclass(frozen=True)
class Layout:
    """Paths of one run under ``results`` (config key ``results``) and ``logs``."""

    results: str = "results"
    logs: str = "logs"

    # ------------------------------------------------------------ for readers
    @classmethod
    def from_exp_dir(cls, exp_dir: str | os.PathLike) -> Layout:
        """The layout whose ``exp_dir(name)`` is ``exp_dir`` (``<results>/exp/<name>``:
        results = its ``parents[1]``), so that a reader given an experiment directory (the
        report, the live view) reaches the run's other files; ``name`` is the directory's
        name. ValueError for a directory that is no experiment directory of a layout."""
        path = Path(os.path.normpath(exp_dir))
        if len(path.parts) < 2:  # "default", in results/exp/
            path = Path(os.path.abspath(path))
        layout = cls(str(path.parents[1]))
        if Path(layout.exp_dir(path.name)) != path:
            raise ValueError(
                f"{exp_dir}: not an experiment directory of a run "
                f"({layout.exp_dir('<experiment>')})"
            )
        return layout

    @classmethod
    def from_exp_root(cls, exp_root: str | os.PathLike) -> Layout:
        """The layout whose ``exp_root()`` is ``exp_root`` (``<results>/exp``: a rule param
        such as the results table's); ValueError for another directory."""
        path = Path(os.path.normpath(exp_root))
        if len(path.parts) < 2:  # "exp", in results/
            path = Path(os.path.abspath(path))
        layout = cls(str(path.parent))
        if Path(layout.exp_root()) != path:
            raise ValueError(
                f"{exp_root}: not the experiments directory of a run ({layout.exp_root()})"
            )
        return layout

    @classmethod
    def in_workdir(
        cls, workdir: str | os.PathLike, results: str = "results", logs: str = "logs"
    ) -> Layout:
        """The layout of a run whose Snakemake working directory (``--directory``) is
        ``workdir`` and whose config names ``results`` (relative to it, or absolute): the
        paths a benchmark or test reads beside a workflow it started elsewhere."""
        return cls(os.path.join(workdir, results), os.path.join(workdir, logs))

    def existing(self, kind: str, *args: str | int, **kwargs) -> dict[tuple, str]:
        """The files of ``kind`` (a method of this class) that exist now, keyed by the
        values of the arguments not given, in order: ints for indices (``Index``
        arguments: digits only), strings for names. Arguments with a default keep it
        unless given. Hidden files (an atomic write in flight) never match::

            L.existing("diag", "default")       # {(0,): 'results/exp/default/diag/0.json', ...}
            L.existing("job_stats", "default")  # {(1, 0): '.../1/job0.json', ...}: (t, job)
            L.existing("eval_result", "default")  # {('test',): '.../eval/test.json', ...}
        """
        method = getattr(self, kind)
        signature = inspect.signature(method)
        params = signature.parameters
        bound = signature.bind_partial(*args, **kwargs).arguments
        free = [n for n, p in params.items() if n not in bound and p.default is p.empty]
        probe = method(**bound, **{n: f"\0{n}" for n in free})
        digits = {n: params[n].annotation in ("Index", Index) for n in free}
        pattern, regex = glob.escape(probe), re.escape(probe)
        for n in free:
            pattern = pattern.replace(f"\0{n}", "*")
            group = "[0-9]+" if digits[n] else "[^/]+"
            regex = regex.replace(re.escape(f"\0{n}"), f"(?P<{n}>{group})")
        found = {}
        for path in glob.glob(pattern):
            m = re.fullmatch(regex, path)
            if m and os.path.isfile(path):
                found[tuple(int(m[n]) if digits[n] else m[n] for n in free)] = path
        return dict(sorted(found.items()))

    # ------------------------------------------------------------ data, features
    def demo_dir(self) -> str:
        return f"{self.results}/demo"

    def demo_file(self, name: str) -> str:
        """The demo corpus (``train/wav.scp``, ``test/wav.scp``, ``done``; data.sets empty)."""
        return f"{self.demo_dir()}/{name}"

    def data_dir(self, set_: str) -> str:
        return f"{self.results}/data/{set_}"

    def data_file(self, set_: str, name: str) -> str:
        """A file of the prepared Kaldi data dir of ``set_``: ``wav.scp``, ``utt2spk``,
        ``spk2utt``, ``utt2uniq``, ``targets.ark``/``.scp``, ``text``, ``origin`` (the
        source dir), ``report.json`` (prepare_data's checks)."""
        return f"{self.data_dir(set_)}/{name}"

    def text(self, set_: str) -> str:
        """The transcripts of ``set_`` (Kaldi's ``text``: the word reference of scoring)."""
        return self.data_file(set_, "text")

    def targets_scp(self, set_: str) -> str:
        """The per-frame targets of ``set_`` (``targets.scp``, beside ``targets.ark``)."""
        return self.data_file(set_, "targets.scp")

    def data_sets_checked(self) -> str:
        """Every configured set prepared and checked (``check_data_sets``): the gate that
        every feature job waits for, as an ancient input (an order, not a rerun trigger)."""
        return f"{self.results}/data/sets_checked.json"

    def feats_dir(self, set_: str) -> str:
        return f"{self.results}/feats/{set_}"

    def feats_scp(self, set_: str) -> str:
        return f"{self.feats_dir(set_)}/feats.scp"

    def utt2num_frames(self, set_: str) -> str:
        return f"{self.feats_dir(set_)}/utt2num_frames"

    def feats_file(self, set_: str, name: str) -> str:
        """A merged feature file of ``set_``: ``cmvn.ark``/``.scp``, ``report.json``."""
        return f"{self.feats_dir(set_)}/{name}"

    def feats_split(self, set_: str, nj: Index, job: Index, kind: str) -> str:
        """Piece ``job`` (1-based) of ``nj`` feature jobs: ``kind`` ark, scp (Kaldi's
        ``split<nj>/feats.<j>.{ark,scp}``), utt2num_frames or report."""
        name = {
            "ark": f"feats.{job}.ark",
            "scp": f"feats.{job}.scp",
            "utt2num_frames": f"utt2num_frames.{job}",
            "report": f"report.{job}.json",
        }[kind]
        return f"{self.feats_dir(set_)}/split{nj}/{name}"

    # ------------------------------------------------------------ i-vectors
    def ivector_dir(self) -> str:
        return f"{self.results}/ivector"

    def ivector_pca(self) -> str:
        return f"{self.ivector_dir()}/pca.npz"

    def ubm_subset(self, name: str) -> str:
        """``ubm_subset/<name>``: the utterances the PCA and UBM are trained on with
        ``ivector.ubm_subset_utts`` (``feats.scp``, ``spk2utt``, ``cmvn.scp``)."""
        return f"{self.ivector_dir()}/ubm_subset/{name}"

    def ubm(self, it: Index, ext: str = "npz") -> str:
        """``ubm.<it>.npz`` (the diagonal UBM at the start of EM iteration it) or its .json."""
        return f"{self.ivector_dir()}/ubm.{it}.{ext}"

    def ubm_gselect(self, job: Index) -> str:
        return f"{self.ivector_dir()}/ubm_gselect.{job}.npz"

    def ubm_acc(self, it: Index, job: Index) -> str:
        return f"{self.ivector_dir()}/ubm_acc.{it}.{job}.npz"

    def extractor(self, it: Index, ext: str = "npz") -> str:
        """``extractor.<it>.npz`` (the i-vector extractor at the start of iteration it)."""
        return f"{self.ivector_dir()}/extractor.{it}.{ext}"

    def extractor_post(self, job: Index) -> str:
        return f"{self.ivector_dir()}/extractor_post.{job}.npz"

    def extractor_acc(self, it: Index, job: Index) -> str:
        return f"{self.ivector_dir()}/extractor_acc.{it}.{job}.npz"

    def ivector_split(self, set_: str, job: Index, ext: str) -> str:
        """Online i-vectors of extraction job ``job`` of ``set_`` (ark or scp)."""
        return f"{self.ivector_dir()}/{set_}/ivector_online.{job}.{ext}"

    def ivector_scp(self, set_: str) -> str:
        return f"{self.ivector_dir()}/{set_}/ivector_online.scp"

    def ivector_set_dir(self, set_: str) -> str:
        """``ivector/<set>/``: the online i-vectors of one set (scp, arks, period)."""
        return f"{self.ivector_dir()}/{set_}"

    def ivector_period(self, set_: str) -> str:
        return f"{self.ivector_dir()}/{set_}/ivector_period"

    # ------------------------------------------------------------ egs
    def egs_dir(self) -> str:
        return f"{self.results}/egs"

    def egs_info(self) -> str:
        return f"{self.egs_dir()}/info.json"

    def egs_lists_dir(self) -> str:
        return f"{self.egs_dir()}/lists"

    def egs_list(self, name: str) -> str:
        """An utterance list of the egs plan: ``valid``, ``train_subset``, ``job.<j>``."""
        return f"{self.egs_lists_dir()}/{name}"

    def egs_prefix(self, archive: Index) -> str:
        """Prefix of training archive ``archive`` (0-based; Kaldi's ``egs.<a+1>.ark``)."""
        return f"{self.egs_dir()}/egs.{archive}"

    def egs_subset_prefix(self, name: str) -> str:
        """Prefix of the ``valid_diag``, ``train_diag`` or ``combine`` egs."""
        return f"{self.egs_dir()}/{name}"

    def egs_split_prefix(self, job: Index) -> str:
        """Prefix of the (temporary) egs of split job ``job`` (0-based)."""
        return f"{self.egs_dir()}/split/job.{job}"

    # ------------------------------------------------------------ one experiment
    def exp_root(self) -> str:
        return f"{self.results}/exp"

    def exp_dir(self, exp: str) -> str:
        return f"{self.exp_root()}/{exp}"

    def init_model(self, exp: str) -> str:
        return f"{self.exp_dir(exp)}/0.pt"

    def init_stats(self, exp: str) -> str:
        return f"{self.exp_dir(exp)}/init.json"

    def model(self, exp: str, t: Index) -> str:
        """``<t>.pt``: the synced model after t iterations (``0.pt``: the initial model)."""
        return f"{self.exp_dir(exp)}/{t}.pt"

    def job_dir(self, exp: str, t: Index) -> str:
        return f"{self.exp_dir(exp)}/{t}"

    def job_model(self, exp: str, t: Index, job: Index) -> str:
        """``<t>/job<j>.pt``: job j's model after iteration t − 1 (Kaldi's ``<t>.<j>.raw``)."""
        return f"{self.job_dir(exp, t)}/job{job}.pt"

    def job_stats(self, exp: str, t: Index, job: Index) -> str:
        """``<t>/job<j>.json``: job j's statistics, plan and start-model record."""
        return f"{self.job_dir(exp, t)}/job{job}.json"

    def job_start(self, exp: str, t: Index, job: Index) -> str:
        """``<t>/job<j>.start.pt``: the start model job j of iteration t − 1 trained from."""
        return f"{self.job_dir(exp, t)}/job{job}.start.pt"

    def job_start_record(self, exp: str, t: Index, job: Index) -> str:
        """``<t>/job<j>.start.json``: how the mix node formed ``job<j>.start.pt`` (the
        neighbours mixed, the own job whose progress it adds) and its sha256."""
        return f"{self.job_dir(exp, t)}/job{job}.start.json"

    def sync_summary(self, exp: str, t: Index) -> str:
        """``sync/<t>.json``: which jobs of iteration t − 1 were averaged, and how."""
        return f"{self.exp_dir(exp)}/sync/{t}.json"

    def bmuf_global(self, exp: str, t: Index) -> str:
        return f"{self.exp_dir(exp)}/bmuf/{t}.pt"

    def bmuf_delta(self, exp: str, t: Index) -> str:
        return f"{self.exp_dir(exp)}/bmuf/{t}.delta.pt"

    def consensus_model(self, exp: str, t: Index) -> str:
        return f"{self.exp_dir(exp)}/consensus/{t}.pt"

    def consensus_summary(self, exp: str, t: Index) -> str:
        return f"{self.exp_dir(exp)}/consensus/{t}.json"

    def ema_model(self, exp: str, t: Index) -> str:
        return f"{self.exp_dir(exp)}/ema/{t}.pt"

    def block_done(self, exp: str, block: Index) -> str:
        """``blocks/<b>.json``: block b of iterations is trained (the DAG grows past it)."""
        return f"{self.exp_dir(exp)}/blocks/{block}.json"

    def diag(self, exp: str, t: Index) -> str:
        return f"{self.exp_dir(exp)}/diag/{t}.json"

    def combined_model(self, exp: str) -> str:
        return f"{self.exp_dir(exp)}/combined.pt"

    def combine_summary(self, exp: str) -> str:
        return f"{self.exp_dir(exp)}/combine.json"

    def final_model(self, exp: str) -> str:
        return f"{self.exp_dir(exp)}/final.pt"

    def final_summary(self, exp: str) -> str:
        return f"{self.exp_dir(exp)}/final.json"

    def eval_result(self, exp: str, set_: str) -> str:
        return f"{self.exp_dir(exp)}/eval/{set_}.json"

    def eval_ema_result(self, exp: str, set_: str) -> str:
        return f"{self.exp_dir(exp)}/eval/ema/{set_}.json"

    def eval_model_result(self, exp: str, model: str, set_: str) -> str:
        """``eval/<model>/<set>.json``: the evaluation of another final model of ``exp``
        than ``final.pt`` (``ema``: :meth:`eval_ema_result`)."""
        return f"{self.exp_dir(exp)}/eval/{model}/{set_}.json"

    def decode_dir(self, exp: str, set_: str) -> str:
        """``decode/<set>/``: split<j>.json, lat.<j>.gz, scores.json, hyps.json, ctm,
        wer_details/, per_details/."""
        return f"{self.exp_dir(exp)}/decode/{set_}"

    def decode_split(self, exp: str, set_: str, job: Index) -> str:
        return f"{self.decode_dir(exp, set_)}/split{job}.json"

    def decode_lattices(self, exp: str, set_: str, kind: str, job: Index) -> str:
        """Lattices of split ``job`` (gzipped Kaldi text archive): the word graph's in the
        decode dir, the phone graph's in its ``phones/``."""
        sub = "" if kind == "words" else f"{kind}/"
        return f"{self.decode_dir(exp, set_)}/{sub}lat.{job}.gz"

    def decode_hyps(self, exp: str, set_: str) -> str:
        """``hyps.json``: every scoring setting's hypotheses, per graph."""
        return f"{self.decode_dir(exp, set_)}/hyps.json"

    def decode_ctm(self, exp: str, set_: str) -> str:
        """``ctm``: the chosen setting's words with times and confidences."""
        return f"{self.decode_dir(exp, set_)}/ctm"

    def decode_details(self, exp: str, set_: str, unit: str) -> str:
        """Kaldi's ``wer_details/per_utt`` (``unit`` wer) or ``per_details/per_utt`` (per)."""
        return f"{self.decode_dir(exp, set_)}/{unit}_details/per_utt"

    def decode_scores(self, exp: str, set_: str) -> str:
        return f"{self.decode_dir(exp, set_)}/scores.json"

    def kaldi_dir(self, exp: str) -> str:
        """``kaldi/``: the model in Kaldi's formats (am/ conf/ ivector/ graph/)."""
        return f"{self.exp_dir(exp)}/kaldi"

    def kaldi_file(self, exp: str, name: str) -> str:
        """A file of the export (Kaldi's model directory): ``am/final.mdl``,
        ``conf/model.conf``, ``ivector/final.ie``, ``graph/HCLG.fst``, ..."""
        return f"{self.kaldi_dir(exp)}/{name}"

    def report_figure(self, exp: str, name: str) -> str:
        return f"{self.exp_dir(exp)}/report/{name}.png"

    def report_config(self, exp: str, ext: str) -> str:
        return f"{self.exp_dir(exp)}/report/config.{ext}"

    # ------------------------------------------------------------ the whole run
    def graph_dir(self, kind: str | None = None) -> str:
        """``graph/<kind>/`` (words, phones): lang/, G.fst, HCLG.fst, words.txt, ..."""
        return f"{self.results}/graph" + (f"/{kind}" if kind else "")

    def graph_file(self, kind: str, name: str) -> str:
        """A file of ``graph/<kind>/``: ``HCLG.fst``, ``words.txt``, ``transition.mdl``
        (the transition model the graph was built with), ``graph.json`` (how)."""
        return f"{self.graph_dir(kind)}/{name}"

    def results_config(self) -> str:
        """The experiments, eval sets and decode options the results table is made of
        (rule ``results_config``): an input of the table and of the comparison, so that
        editing the list reruns them in the same run."""
        return f"{self.results}/results_config.json"

    def results_table(self, ext: str = "md") -> str:
        return f"{self.results}/results.{ext}"

    def digests(self, ext: str = "md") -> str:
        """``digests.{md,json}``: a sha256 per stage of the run (paravg.digests)."""
        return f"{self.results}/digests.{ext}"

    def report_dir(self) -> str:
        return f"{self.results}/report"

    def tensorboard_events(self, exp: str) -> str:
        """``results/tb/<exp>/events.out.tfevents.paravg``: the experiment's TensorBoard
        scalars (:mod:`paravg.training_events`), appended by the diagnostics rule;
        ``tensorboard --logdir results/tb`` shows every experiment."""
        return f"{self.results}/tb/{exp}/events.out.tfevents.paravg"

    def report_file(self, name: str) -> str:
        """``results/report/<name>``: the comparison across experiments."""
        return f"{self.report_dir()}/{name}"

    def tool_dir(self, name: str) -> str:
        """``results/<name>/``: the files of a tool outside the workflow that reads the run
        (a benchmark's cache of its own evaluations), beside the run's files."""
        return f"{self.results}/{name}"

    def benchmark(self, rule: str, wildcards: str) -> str:
        """Snakemake ``benchmark:`` file of a heavy rule."""
        return f"{self.results}/benchmarks/{rule}/{wildcards}.tsv"

    def log(self, rule: str, wildcards: str) -> str:
        return f"{self.logs}/{rule}/{wildcards}.log"

    def log_dir(self, rule: str, wildcards: str = "") -> str:
        """The directory of ``rule``'s logs, or of those under a wildcard prefix such as
        ``"<exp>"`` (every ``log(rule, "<exp>/...")``)."""
        return f"{self.logs}/{rule}" + (f"/{wildcards}" if wildcards else "")

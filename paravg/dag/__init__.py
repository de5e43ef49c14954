"""The DAG of a run, once: every input, param and resource of every rule (torch-free).

The rule files are a table of the stages; what each job reads and how it is configured
is answered here, for concrete values (experiment, t, j, set …), by one :class:`Dag`
built from

* the validated config, and each experiment's resolved config
  (:func:`paravg.config.resolved_experiments`, once per config);
* the file contract (:class:`paravg.layout.Layout`);
* the plans (:mod:`paravg.plan`: schedule, each job's archive, seed, learning rate, start
  inputs, synced model, fingerprint chain), read from the egs ``info.json`` when it exists
  at parse time, or from the egs checkpoint after it ran (``checkpoint_egs_info``);
* the resume frontiers (:mod:`paravg.resume`): indices at or below a frontier are
  finished inputs, not DAG jobs.

A :class:`Dag` is the run (:class:`~paravg.dag.core.RunCore`: config, layout, experiments,
plans, frontiers) and one object per stage, each in its own module:

* ``dag.data`` (:class:`~paravg.dag.data.DataDag`): ``rules/data.smk``;
* ``dag.gmm`` (:class:`~paravg.dag.gmm.GmmDag`): ``rules/gmm.smk`` (``data.targets:
  gmm``);
* ``dag.egs`` (:class:`~paravg.dag.egs.EgsDag`): ``rules/egs.smk``;
* ``dag.ivector`` (:class:`~paravg.dag.ivectors.IvectorDag`): ``rules/ivector.smk``;
* ``dag.train`` (:class:`~paravg.dag.training.TrainDag`): ``rules/train.smk``,
  ``rules/sync.smk`` and the combination and evaluation of ``rules/final.smk``;
* ``dag.recognition`` (:class:`~paravg.dag.recognition.Recognition`): ``rules/graph.smk``,
  ``rules/decode.smk``, ``rules/export.smk``;
* ``dag.results`` (:class:`~paravg.dag.results.ResultsDag`): the results table, digests,
  report and the ``all`` target.

A stage takes the run and the stages it reads (data, egs and i-vectors read only the run;
training reads the egs; recognition training and i-vectors; results all of them), so no
module of this package imports the package itself.

Snakemake stays outside: ``rules/common.smk`` gives the Dag two callables for its
checkpoints (the egs ``info.json`` once the ``egs`` checkpoint ran, and "wait until block b
of experiment e is trained") and the jobs named by ``--target-jobs``, and adapts each
answer to a rule (``from_dag("train.job_inputs")``: a dotted path from the Dag, its layout
included, e.g. ``from_dag("layout.text")``). So every answer here is unit-tested without
Snakemake (``tests/unit/test_dag.py``), with a fake checkpoint.

Numbering is Kaldi's (:mod:`paravg.layout`): ``<t>.pt`` is the model after t
iterations; the jobs of iteration t − 1 write ``<t>/job<j>.pt``. Methods that take ``t``
of a per-iteration file take that layout index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from paravg.dag.core import RunCore
from paravg.dag.data import DataDag
from paravg.dag.egs import EGS_SUBSETS, EgsDag
from paravg.dag.gmm import GmmDag
from paravg.dag.ivectors import IvectorDag
from paravg.dag.recognition import Recognition
from paravg.dag.results import ResultsDag
from paravg.dag.training import OFF_PATH_LAG, TrainDag

__all__ = [
    "EGS_SUBSETS",
    "OFF_PATH_LAG",
    "Dag",
    "DataDag",
    "EgsDag",
    "GmmDag",
    "IvectorDag",
    "Recognition",
    "ResultsDag",
    "RunCore",
    "TrainDag",
]


class Dag(RunCore):
    """Every rule's inputs, params and resources for one run (see the module docstring).

    ``checkpoint_egs_info()`` returns the egs ``info.json`` dict after the ``egs``
    checkpoint (raising Snakemake's incomplete-checkpoint exception before);
    ``wait_for_block(exp, b)`` returns once block ``b`` of ``exp`` is trained (raising
    before). ``target_jobs``: the wildcards of the jobs named by ``--target-jobs`` (what a
    cluster job's own snakemake runs). ``fingerprint_dir``: where the plans memoise their
    fingerprint chains (:mod:`paravg.fingerprint_memo`; None: they compute them).
    """

    def __init__(
        self,
        config: dict,
        *,
        checkpoint_egs_info: Callable[[], dict] | None = None,
        wait_for_block: Callable[[str, int], None] | None = None,
        target_jobs: Iterable[dict] = (),
        fingerprint_dir: str | None = None,
    ) -> None:
        super().__init__(
            config,
            checkpoint_egs_info=checkpoint_egs_info,
            target_jobs=target_jobs,
            fingerprint_dir=fingerprint_dir,
        )
        self.data = DataDag(self)
        self.data.check_data_dirs()
        self.gmm = GmmDag(self, self.data)
        self.gmm.check()
        self.egs = EgsDag(self)
        self.ivector = IvectorDag(self)
        self.train = TrainDag(self, self.egs, wait_for_block)
        self.chain = self.train.chain  # rules/chain.smk
        self.chain.supervision_options()  # chain experiments agree on their supervision
        self.chain.tree_options()  # and on their tree (model.chain.tree, num_leaves)
        self.recognition = Recognition(self, self.train, self.ivector)
        self.results = ResultsDag(self, self.data, self.ivector, self.train, self.recognition)

# The Snakemake side of the middle of the house. Every input, param and resource of every
# rule is answered by one torch-free object, paravg.dag.Dag (unit-tested without
# Snakemake); this file builds it and adapts it to the rules:
#
#   PARAVG                   the Dag of this run: config, layout, plans, resume frontiers,
#                            and one object per stage (PARAVG.data, .egs, .ivector, .train,
#                            .recognition, .results: paravg/dag/)
#                            (not "DAG": the Snakefile runs in snakemake.workflow's
#                            namespace, where DAG is Snakemake's own class)
#   LAYOUT                   PARAVG.layout, the file contract (paravg.layout)
#   RECOGNITION              PARAVG.recognition (graph, decode, export)
#   from_dag("stage.method") an input/param function of a rule's wildcards
#                            ("layout.text": a path of the file contract)
#   checkpoint hooks         the egs info.json and "block b is trained" (Snakemake's
#                            checkpoints: the only DAG answers that need Snakemake objects)
#   temp / report / ancient  the output flags
#
# Rule files call only what is defined here and PARAVG's methods; none recomputes a schedule
# or spells a results path.
import inspect
import sys

from paravg.config import demo_beside_own_sets
from paravg.dag import Dag
from paravg.errors import user_error_ends_the_run, user_error_said_first
from paravg.resume import target_jobs_from_argv


def _egs_info_from_checkpoint():
    """The egs info.json once the egs checkpoint ran (Snakemake re-evaluates the asking
    input function after it)."""
    from paravg.io import read_json

    return read_json(checkpoints.egs.get().output.info)


def _wait_for_block(exp, b):
    """Block b of exp is trained (the train_block checkpoint), or the DAG stops here."""
    checkpoints.train_block.get(exp=exp, b=b)


# the DAG's start-up checks (data dirs, the plans of existing egs, the resume frontiers)
# end the run as one line, as the config's do (Snakefile)
with user_error_ends_the_run():
    PARAVG = Dag(
        config,
        checkpoint_egs_info=_egs_info_from_checkpoint,
        wait_for_block=_wait_for_block,
        target_jobs=target_jobs_from_argv(sys.argv),
        # the plans' fingerprint chains, computed once by the main snakemake, read by the jobs
        fingerprint_dir=".snakemake/paravg-plan",
    )
    RECOGNITION = PARAVG.recognition
LAYOUT = PARAVG.layout
if RECOGNITION.why_not:
    print(RECOGNITION.why_not, file=sys.stderr)
if _note := demo_beside_own_sets(config):
    print(_note, file=sys.stderr)
if PARAVG.stale_egs:
    print(
        f"{LAYOUT.egs_info()} was made with other egs options than the config's "
        f"({', '.join(PARAVG.stale_egs)}): the egs are rebuilt, and the training is "
        "planned on the new ones",
        file=sys.stderr,
    )


wildcard_constraints:
    set=r"[A-Za-z0-9_.-]+",
    exp=r"[A-Za-z0-9_.-]+",
    t=r"\d+",
    j=r"\d+",
    it=r"\d+",
    a=r"\d+",
    b=r"\d+",


#: Wildcards that are integers (iterations, jobs, archives, blocks); ``set`` is ``set_``.
_INT_WILDCARDS = {"t", "j", "it", "a", "b"}


def from_dag(method, *args):
    """A rule's input/param function: ``method`` of PARAVG, a dotted path through its
    stages or its layout (``"train.job_inputs"``, ``"recognition.score_inputs"``,
    ``"layout.text"``: paravg.dag), called with the rule's wildcards that it takes
    (integers where they are indices; ``set`` as ``set_``) after ``args``."""
    *owners, name = method.split(".")
    owner = PARAVG
    for attribute in owners:
        owner = getattr(owner, attribute)
    function = getattr(owner, name)
    takes = set(inspect.signature(function).parameters)

    def from_wildcards(wildcards):
        kwargs = {}
        for key, value in wildcards.items():
            arg = "set_" if key == "set" else key
            if arg in takes:
                kwargs[arg] = int(value) if key in _INT_WILDCARDS else value
        with user_error_said_first():  # before Snakemake's InputFunctionException frame
            return function(*args, **kwargs)

    from_wildcards.__name__ = f"dag_{name}"
    return from_wildcards


def layout_param(method, *args):
    """A rule param that is the layout's ``method(*args)`` (a directory a script writes
    into), as a function: snakemake's linter takes a plain string that prefixes an output
    for a hardcoded path."""

    def param(wildcards):
        return getattr(LAYOUT, method)(*args)

    return param


def doubling_runtime(minutes):
    """``resources: runtime`` in minutes; a retry after a time limit (SLURM TIMEOUT) asks
    for twice as long."""

    def runtime(wildcards, attempt):
        return minutes * attempt

    return runtime


def job_output(path):
    """Per-job models are temporary, as Kaldi deletes them, unless kept by config."""
    return path if config["run"]["keep_job_models"] else temp(path)


def report_figure(name, subcategory, label):
    """Output ``report/<name>.png`` of an experiment, flagged for ``snakemake --report``."""
    return report(
        LAYOUT.report_figure("{exp}", name),
        caption=f"../report/{name}.rst",
        category="{exp}",
        subcategory=subcategory,
        labels={"figure": label},
    )


def for_experiments(**properties):
    """Wildcard regex of the experiments whose sync method has these registry properties."""
    return PARAVG.experiments_pattern(PARAVG.experiments_with(**properties))

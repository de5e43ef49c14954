# paravg: Kaldi-style parallel DNN training (NG-SGD + parameter averaging) as a PARAVG.
# This file is a table of contents: configuration, validation, the stage rule files, `all`.
import os
import resource
import sys

from snakemake.utils import min_version

min_version("9.0")

# Long iteration chains recurse deeply while the PARAVG is built (2,500 iterations x 12 jobs
# is a real Kaldi scale): raise Python's recursion limit and the C stack that backs it.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 200000))
_soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
if _soft != resource.RLIM_INFINITY and (_hard == resource.RLIM_INFINITY or _hard > _soft):
    resource.setrlimit(resource.RLIMIT_STACK, (_hard, _hard))
sys.path.insert(0, workflow.basedir)
# Every job imports paravg from this Snakefile's tree too, not from whichever checkout the
# venv's editable install names (two checkouts sharing a venv would otherwise run two code
# trees in one run): the jobs, the warm executor's server and SLURM jobs inherit this.
_python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
_python_path = [workflow.basedir, *(p for p in _python_path if p != workflow.basedir)]
os.environ.update(PYTHONPATH=os.pathsep.join(_python_path))

from paravg.config import validate_config  # noqa: E402
from paravg.errors import user_error_ends_the_run  # noqa: E402
from paravg.graph.settings import check_recognition_config  # noqa: E402
from paravg.scheduler_wakeups import coalesce_scheduler_wakeups  # noqa: E402

# one pending scheduler timer, not one more per finished job (42 % of a core on a long run)
coalesce_scheduler_wakeups()


# Relative to the Snakefile, so `--directory elsewhere` works; --configfile files override it.
configfile: f"{workflow.basedir}/config/config.yaml"


# every start-up check: a bad config ends the run here, as one line (no job, no lock yet)
with user_error_ends_the_run():
    validate_config(config)
    check_recognition_config(config)
if config["run"]["pin_cpu_kernels"]:
    # torch's, MKL's, oneDNN's, numpy's and OpenBLAS's AVX2 paths, set before any job (or
    # paravg-warm's server, started after this file is read) loads torch or numpy: the same
    # bits on every x86-64 CPU with AVX2. SLURM jobs get them through sbatch --export=ALL.
    from paravg.cpu_kernels import pin_cpu_kernels

    pin_cpu_kernels(os.environ)


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/gmm.smk"
include: "rules/features.smk"
include: "rules/ivector.smk"
include: "rules/egs.smk"
include: "rules/train.smk"
include: "rules/chain.smk"
include: "rules/sync.smk"
include: "rules/final.smk"
include: "rules/graph.smk"
include: "rules/decode.smk"
include: "rules/report.smk"
include: "rules/export.smk"


# a finished export that lost a file stops the run here (Dag.final_targets), as one line
with user_error_ends_the_run():
    FINAL_TARGETS = PARAVG.results.final_targets()


rule all:
    input:
        FINAL_TARGETS,
    default_target: True


onsuccess:
    # The results table, printed at the end of every successful run (also in results/).
    _table = Path(LAYOUT.results_table("md"))
    if _table.exists():
        print(f"\n{_table}:\n{_table.read_text()}")

"""Rules average, bmuf, consensus (one per paravg.sync.registry.NODE_KINDS entry): the
sync node of index t, off the critical path: the node kind's function writes its files.

The jobs' statistics it reads must carry the plan's fingerprint of index t (checked first),
and its summary records that fingerprint (``plan``): a job that starts from the node's
``<t>.pt`` checks the summary instead of the N statistics (one input instead of N)."""

from importlib import import_module

from paravg.logs import setup_logging
from paravg.sync.registry import NODE_KINDS
from paravg.train_job import check_input_fingerprints

setup_logging(snakemake.log[0])
node = snakemake.params.node
check_input_fingerprints(node["files"].get("stats", []), node["fingerprint"])
module, function = NODE_KINDS[snakemake.rule].run.split(":")
getattr(import_module(module), function)(
    files=node["files"],
    sync=node["sync"],
    iteration=node["iteration"],
    outputs=dict(snakemake.output.items()),
    plan={"fingerprint": node["fingerprint"]},
)

"""Rules average, bmuf, consensus (one per paravg.sync.registry.NODE_KINDS entry): the
sync node of index t, off the critical path: the node kind's function writes its files."""

from importlib import import_module

from paravg.logs import setup_logging
from paravg.sync.registry import NODE_KINDS

setup_logging(snakemake.log[0])
node = snakemake.params.node
module, function = NODE_KINDS[snakemake.rule].run.split(":")
getattr(import_module(module), function)(
    files=node["files"],
    sync=node["sync"],
    iteration=node["iteration"],
    outputs=dict(snakemake.output.items()),
)

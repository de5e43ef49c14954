"""Rule train_block: mark block b of iterations trained (the DAG grows past it)."""

from paravg.io import write_json_atomic
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
write_json_atomic(snakemake.output[0], {**snakemake.params.block, "inputs": len(snakemake.input)})

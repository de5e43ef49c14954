"""Rule train_block: mark block b of iterations trained (the DAG grows past it), and delete
the temporary job files no later job reads (paravg.dag.training.TrainDag.spent_job_files)."""

import contextlib
import logging
import os

from paravg.io import write_json_atomic
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
block = dict(snakemake.params.block)
spent = block.pop("delete")
for path in spent:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
logging.getLogger("train_block").info("deleted %d spent job files", len(spent))
write_json_atomic(snakemake.output[0], {**block, "inputs": len(snakemake.input)})

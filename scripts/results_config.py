"""Rule results_config: the experiments, eval sets and decode options of the results table,
as a file that the table and the comparison take as an input (rules/final.smk)."""

from paravg.io import write_json_atomic
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
write_json_atomic(snakemake.output[0], dict(snakemake.params.items()))

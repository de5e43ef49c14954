"""Rule results_table: one table of every experiment on every eval set."""

from paravg.logs import setup_logging
from paravg.report import write_results_table

setup_logging(snakemake.log[0])
write_results_table(
    exp_root=snakemake.params.exp_root,
    experiments=snakemake.params.experiments,
    eval_sets=snakemake.params.eval_sets,
    md_out=snakemake.output.md,
    tsv_out=snakemake.output.tsv,
    decode=snakemake.params.decode,
)

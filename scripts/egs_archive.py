"""Rule egs_archive: gather archive a from the split jobs and shuffle it fully."""

from paravg.egs.shuffle import merge_archive
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
merge_archive(
    archive=int(snakemake.wildcards.a),
    job_prefixes=snakemake.params.job_prefixes,
    info_path=snakemake.input.info,
    out_prefix=snakemake.output.meta.removesuffix(".meta.json"),
)

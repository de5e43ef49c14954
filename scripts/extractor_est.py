"""Rule extractor_est: sum the job statistics and update the extractor (ivector-extractor-est)."""

from paravg.ivector.stages import extractor_estimate
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
extractor_estimate(
    extractor_path=snakemake.input.extractor,
    accs=list(snakemake.input.accs),
    out=snakemake.output.extractor,
    out_json=snakemake.output.info,
    gaussian_min_count=snakemake.params.gaussian_min_count,
)

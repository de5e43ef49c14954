"""Rule egs_split: the egs of one split job and the archive of each eg."""

from paravg.egs.split import write_split_job
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
inp = snakemake.input
write_split_job(
    job=int(snakemake.wildcards.j),
    uttlist=inp.uttlist,
    info_path=inp.info,
    feats_scp=inp.feats_scp,
    targets_scp=inp.targets_scp,
    out_prefix=snakemake.output.meta.removesuffix(".meta.json"),
    ivector_scp=inp.get("ivector_scp"),
)

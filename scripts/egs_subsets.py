"""Rule egs_subsets: valid_diag, train_diag and combine egs."""

from paravg.egs.subsets import write_subsets
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
inp = snakemake.input
write_subsets(
    valid_list=inp.valid,
    train_subset_list=inp.train_subset,
    info_path=inp.info,
    feats_scp=inp.feats_scp,
    targets_scp=inp.targets_scp,
    out_prefixes=snakemake.params.prefixes,
    ivector_scp=inp.get("ivector_scp"),
)

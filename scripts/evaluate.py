"""Rule evaluate: frame accuracy and cross-entropy of final.pt on one eval set."""

from pathlib import Path

import torch

from paravg.evaluate import evaluate_set
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
evaluate_set(
    model_path=snakemake.input.model,
    feats_scp=snakemake.input.feats,
    targets_scp=snakemake.input.targets,
    out_path=snakemake.output[0],
    ivectors_scp=snakemake.input.get("ivectors"),
    period_path=snakemake.input.get("period"),
    tolerance=snakemake.params.tolerance,
    # a chain experiment's <egs>/chain (paravg.dag.chain.ChainDag.eval_inputs)
    chain_dir=str(Path(snakemake.input.chain_den_fst).parent)
    if hasattr(snakemake.input, "chain_den_fst")
    else None,
)

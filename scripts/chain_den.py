"""Rule chain_den: the run's chain setup (topology, tree, phone LM, den and normalisation
FSTs) from the train set's frame labels (its targets, or with data.targets: gmm the GMM
stage's per-frame phones over its lang), and for the biphone tree its features
(paravg.chain.prepare)."""

import logging
from pathlib import Path

from paravg.chain.prepare import FrameTargets, prepare_chain
from paravg.chain.topology import ChainPhones
from paravg.errors import DataError
from paravg.io import read_json
from paravg.kaldi_io import load_scp
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
lang_dir = snakemake.params.get("lang_dir")
table = load_scp(snakemake.input.targets_scp)
targets = FrameTargets(table, 1 if lang_dir else 0)  # lang phone p is target p - 1
if lang_dir:
    num_targets = ChainPhones.of_lang(lang_dir).num_phones
else:
    num_targets = int(snakemake.params.num_targets) or int(
        read_json(snakemake.input.info)["num_targets"]
    )
tree = snakemake.params.get("tree", {"tree": "monophone", "num_leaves": 0, "thresh": 0.0})
tree_utterances = None
if tree["tree"] == "biphone":
    feats = load_scp(snakemake.input.feats_scp)
    missing = [u for u in targets if u not in feats]
    if missing:
        raise DataError(
            f"{snakemake.input.feats_scp}: no features for {len(missing)} utterances with "
            f"targets (first {missing[0]}), the chain tree's statistics need them"
        )
    tree_utterances = ((targets[u], feats[u]) for u in targets)
info = prepare_chain(
    (targets[u] for u in targets),
    num_targets,
    Path(snakemake.output.info_json).parent,
    tree=tree["tree"],
    num_leaves=int(tree["num_leaves"]),
    tree_thresh=float(tree["thresh"]),
    tree_utterances=tree_utterances,
    frame_subsampling_factor=int(snakemake.params.get("frame_subsampling_factor", 3)),
    lang_dir=lang_dir,
)
logging.getLogger("chain_den").info("chain setup: %s", info)

"""The rules of rules/gmm.smk: one job of the GMM stage (paravg.gmm.stages), by rule name."""

import json
import logging
from pathlib import Path

from paravg.gmm import stages
from paravg.logs import setup_logging
from paravg.malloc import MMAP_THRESHOLD_BYTES, fix_mmap_threshold

setup_logging(snakemake.log[0])
if fix_mmap_threshold():  # chunk-sized temporaries mapped, not fragmenting the heap
    logging.getLogger("paravg.gmm").info("malloc: mmap threshold fixed at %d bytes",
                                         MMAP_THRESHOLD_BYTES)  # fmt: skip
rule, inp, out, params = snakemake.rule, snakemake.input, snakemake.output, snakemake.params
wc = snakemake.wildcards


def _align(model):
    return stages.realign(params.lang_dir, model, inp.feats, params.text, out.ali, **params.align)


if rule == "gmm_dict":
    result = stages.demo_dict(params.sources["text"], params.sources["phone_ctm"], params.dict_dir)
elif rule == "gmm_lang":
    result = stages.make_lang(params.dict_dir, params.oov, params.lang_dir)
elif rule == "gmm_feats":
    result = stages.job_feats(params.src, params.nj, int(wc.j), out.ark, out.scp)
elif rule == "gmm_mono_init":
    result = stages.init_mono(params.lang_dir, inp.feats, params.num_utts, out.model).num_pdfs
elif rule == "gmm_align_equal":
    result = stages.align_equal(params.lang_dir, inp.model, inp.feats, params.text, out.ali)
elif rule == "gmm_acc":
    result = stages.acc(inp.model, inp.feats, inp.ali, out.acc)
elif rule == "gmm_est":
    est = dict(params.est)
    if est["n0"] is None:
        est["n0"] = inp.first
    result = stages.est(inp.model, list(inp.accs), out.model, **est)
elif rule in ("gmm_realign", "gmm_mono_align_si", "gmm_align_set"):
    result = _align(inp.model)
elif rule == "gmm_tree_acc":
    result = stages.tree_acc(params.lang_dir, inp.model, inp.feats, inp.ali, out.stats)
elif rule == "gmm_tree":
    result = stages.build_tree(
        params.lang_dir, list(inp.stats), params.num_leaves, out.treeacc, out.tree, out.model,
        out.num_pdfs,
    )  # fmt: skip
elif rule == "gmm_convert_ali":
    result = stages.convert_ali(inp.old, inp.new, inp.ali, out.ali)
elif rule == "gmm_targets":
    result = stages.targets_dir(inp.model, list(inp.alis), params.src, Path(out[0]).parent)
elif rule == "graph_gmm_words":
    from paravg.gmm.graph import gmm_graph
    from paravg.graph.lexicon import text_sentences

    result = gmm_graph(
        params.lang_dir, inp.model, inp.tree, params.out_dir,
        sentences=text_sentences(params.text), **params.options,
    )  # fmt: skip
elif rule == "gmm_phones":
    result = stages.frame_phones(inp.model, list(inp.alis), out.ark, out.scp)
elif rule == "graph_gmm_chain_words":
    from paravg.chain.graph import chain_lang_graph
    from paravg.graph.lexicon import text_sentences

    result = chain_lang_graph(
        params.lang_dir, Path(inp.chain_info).parent, params.out_dir,
        sentences=text_sentences(params.text), **params.options,
    )  # fmt: skip
else:
    raise ValueError(f"scripts/gmm_stage.py: no GMM stage for rule {rule}")
logging.getLogger("paravg.gmm").info("%s: %s", rule, json.dumps(result, default=str))

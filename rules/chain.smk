# chain stage rules (model.objective: chain; package paravg.chain, docs/chain.md): only a
# run with a chain experiment has jobs of them (its train jobs and diagnostics ask).
#   chain_den: Kaldi's gen_topo.py + tree + chain-est-phone-lm + chain-make-den-fst, from
#     the train set's frame labels (its targets: target k is chain phone k + 1; with
#     data.targets gmm the GMM stage's per-frame phones of its final alignment over the
#     GMM lang, rule gmm_phones) -> <egs>/chain/; the tree monophone, or (model.chain.tree:
#     biphone, the default on GMM alignments) build_tree.sh's left-biphone tree from the
#     labels and the train set's features -> <egs>/chain/tree
#   chain_sup (per archive a) / chain_sup_subset: the supervision of every eg, cut per
#     chunk from its utterance's (SupervisionSplitter) and weighted by the normalisation
#     FST, beside the archive (<prefix>.chain.*.npy): get_egs.sh's supervision part

# A chain experiment's evaluation (its chain objective), decoding (graph/chain_*) and export
# are those of rules/final.smk, decode.smk, graph.smk and export.smk (docs/chain.md).


rule chain_den:
    input:
        targets_scp=PARAVG.chain.frame_labels(PARAVG.train_set),
        info=LAYOUT.egs_info(),
        **PARAVG.chain.den_inputs(),
    output:
        **PARAVG.chain.den_files(),
    params:
        num_targets=config["data"]["num_targets"],  # 0: the egs info's
        **PARAVG.chain.den_params(),  # the biphone tree's options (none: monophone)
    log:
        LAYOUT.log("chain_den", "all"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # the phone LM's counts and the den FST (a few thousand states at most)
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../scripts/chain_den.py"


# (the script reads <egs>/chain/info.json beside den.fst, chain_den's output too: whether
# the frame labels are targets or the GMM lang's phone ids)
rule chain_sup:
    input:
        meta=LAYOUT.egs_prefix("{a}") + ".meta.json",
        targets_scp=PARAVG.chain.frame_labels(PARAVG.train_set),
        den=PARAVG.chain.den_files()["den_fst"],
        normalization=PARAVG.chain.den_files()["normalization_fst"],
    output:
        PARAVG.chain.archive_table("{a}"),
    params:
        prefix=lambda wildcards: LAYOUT.egs_prefix(wildcards.a),
        options=PARAVG.chain.supervision_options(),
    log:
        LAYOUT.log("chain_sup", "{a}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # one utterance's supervision at a time, the archive's table (~100 arcs per eg)
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../scripts/chain_sup.py"


use rule chain_sup as chain_sup_subset with:
    input:
        meta=LAYOUT.egs_subset_prefix("{name}") + ".meta.json",
        targets_scp=PARAVG.chain.frame_labels(PARAVG.train_set),
        den=PARAVG.chain.den_files()["den_fst"],
        normalization=PARAVG.chain.den_files()["normalization_fst"],
    output:
        PARAVG.chain.subset_table("{name}"),
    params:
        prefix=lambda wildcards: LAYOUT.egs_subset_prefix(wildcards.name),
        options=PARAVG.chain.supervision_options(),
    log:
        LAYOUT.log("chain_sup", "{name}"),
    wildcard_constraints:
        name="valid_diag|train_diag|combine",


# data.targets gmm with data.perturb: the perturbed training set's phones, each copy's the
# source utterance's GMM alignment phones mapped as perturb_data mapped its targets
# (paravg.perturb.perturb_frame_labels; Kaldi re-aligns the copies with the GMM instead)
if PARAVG.chain.perturbed_labels():

    rule chain_perturbed_phones:
        input:
            **PARAVG.chain.perturbed_labels_inputs(),
        output:
            **PARAVG.chain.perturbed_labels_outputs(),
        params:
            perturb=config["data"]["perturb"],
        log:
            LAYOUT.log("chain_perturbed_phones", PARAVG.train_set),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/chain_perturbed_phones.py"

# The end: final combination, priors, final.pt, evaluation per eval set, results table.


rule combine:
    input:
        unpack(from_dag("train.combine_inputs")),
    output:
        model=LAYOUT.combined_model("{exp}"),
        summary=LAYOUT.combine_summary("{exp}"),
    params:
        egs=LAYOUT.egs_subset_prefix("combine"),
        max_objective_evaluations=config["combine"]["max_objective_evaluations"],
        ema=config["combine"]["ema"],
    log:
        LAYOUT.log("combine", "{exp}"),
    benchmark:
        LAYOUT.benchmark("combine", "{exp}")
    conda:
        "../envs/paravg.yaml"
    threads: 2
    resources:
        mem_mb=4000,  # up to 20 models and the combine egs
        runtime=30,
    script:
        "../scripts/combine.py"


rule priors:
    input:
        model=LAYOUT.combined_model("{exp}"),
        egs=from_dag("train.lda_egs"),
    output:
        model=LAYOUT.final_model("{exp}"),
        summary=LAYOUT.final_summary("{exp}"),
    params:
        archives=from_dag("train.lda_archives"),
        prior_subset_size=config["combine"]["prior_subset_size"],
        srand=from_dag("srand"),
    log:
        LAYOUT.log("priors", "{exp}"),
    conda:
        "../envs/paravg.yaml"
    threads: 2
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../scripts/priors.py"


rule evaluate:
    input:
        unpack(from_dag("train.eval_inputs")),
    output:
        LAYOUT.eval_result("{exp}", "{set}"),
    params:
        tolerance=config["egs"]["targets_length_tolerance"],
    log:
        LAYOUT.log("evaluate", "{exp}/{set}"),
    benchmark:
        LAYOUT.benchmark("evaluate", "{exp}/{set}")
    conda:
        "../envs/paravg.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/evaluate.py"


# What the results table is made of (experiments, eval sets, decode options) as a file, an
# input of the table and of the comparison (rules/report.smk; the digests follow the
# table): a change of the list reruns them in the same run. As their params alone it did
# not (the probe's R2: a set removed from eval_sets printed the old table, rc 0). Such a
# change also reruns check_data_sets, and while a job must run Snakemake checks neither
# the params nor the input list of any job downstream of it, reaching them only through
# edges that are not ancient; the gate's edges are ancient. This rule has no input, so its
# params are always checked, and its edge to the table is a plain one.
rule results_config:
    output:
        LAYOUT.results_config(),
    params:
        experiments=list(PARAVG.experiments),
        eval_sets=PARAVG.eval_sets,
        decode=PARAVG.results.results_params(),
    log:
        LAYOUT.log("results_config", "all"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/results_config.py"


rule results_table:
    input:
        from_dag("results.results_inputs"),
        config=LAYOUT.results_config(),
        decode=RECOGNITION.decode_scores(),  # WER/PER (rules/decode.smk) when decode.enabled
    output:
        md=LAYOUT.results_table("md"),
        tsv=LAYOUT.results_table("tsv"),
    params:
        experiments=list(PARAVG.experiments),
        eval_sets=PARAVG.eval_sets,
        exp_root=layout_param("exp_root"),
        # the options each set's scores must have been decoded with (paravg.report)
        decode=PARAVG.results.results_params(),
    log:
        LAYOUT.log("results_table", "all"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/results_table.py"


# The sha256 of each stage's files (paravg.digests), beside the results table: where two
# runs of the same config part. Runs after the table, so every stage is final.
rule digests:
    input:
        LAYOUT.results_table("md"),
    output:
        json=LAYOUT.digests("json"),
        md=LAYOUT.digests("md"),
    params:
        stages=PARAVG.results.digest_stages(),
    log:
        LAYOUT.log("digests", "all"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=30,
    script:
        "../scripts/digests.py"

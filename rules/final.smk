# The end: final combination, priors, final.pt, evaluation per eval set, results table.


rule combine:
    input:
        models=get_combine_models,
        egs=lambda wc: egs_subset_files("combine"),
    output:
        model=f"{RESULTS}/exp/{{exp}}/combined.pt",
        summary=f"{RESULTS}/exp/{{exp}}/combine.json",
    params:
        egs=egs_subset_prefix("combine"),
        max_objective_evaluations=config["combine"]["max_objective_evaluations"],
    log:
        "logs/combine/{exp}.log",
    benchmark:
        f"{RESULTS}/benchmarks/combine/{{exp}}.tsv"
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
        model=f"{RESULTS}/exp/{{exp}}/combined.pt",
        egs=get_lda_egs,
    output:
        model=f"{RESULTS}/exp/{{exp}}/final.pt",
        summary=f"{RESULTS}/exp/{{exp}}/final.json",
    params:
        archives=lambda wc: [egs_prefix(a) for a in lda_archives()],
        prior_subset_size=config["combine"]["prior_subset_size"],
        srand=lambda wc: EXPERIMENTS[wc.exp]["trainer"]["srand"],
    log:
        "logs/priors/{exp}.log",
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
        unpack(get_eval_inputs),
    output:
        f"{RESULTS}/exp/{{exp}}/eval/{{set}}.json",
    params:
        tolerance=config["egs"]["targets_length_tolerance"],
    log:
        "logs/evaluate/{exp}/{set}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate/{{exp}}/{{set}}.tsv"
    conda:
        "../envs/paravg.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/evaluate.py"


rule results_table:
    input:
        get_results_inputs,
        decode=get_decode_scores(),  # WER/PER (rules/decode.smk) when decode.enabled
    output:
        md=f"{RESULTS}/results.md",
        tsv=f"{RESULTS}/results.tsv",
    params:
        experiments=list(EXPERIMENTS),
        eval_sets=config["eval_sets"],
        # eval/<set>.json come first: results/exp/<exp>/eval/<set>.json -> results/exp
        exp_root=lambda wc, input: str(Path(input[0]).parents[2]),
        decode=DECODE["enabled"],
    log:
        "logs/results_table/all.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/results_table.py"

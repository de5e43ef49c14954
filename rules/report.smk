# The report: per-experiment figures and config, the comparison of all experiments.
# `snakemake --report report.html` collects every output flagged with report() below,
# grouped by experiment (category) and by kind (subcategory), each with its caption.
# Data: only the per-iteration JSON files (never logs). Live view while training runs:
# `python -m paravg.progress results/exp/<exp> --out progress/`.


report: "../report/workflow.rst"


rule experiment_figures:
    input:
        unpack(get_report_figure_inputs),
    output:
        objective=report_figure("objective", "training curves", "log-prob and frame accuracy"),
        job_objectives=report_figure("job_objectives", "training curves", "job objectives, rejected jobs"),
        schedule=report_figure("schedule", "schedule", "learning rate and number of jobs"),
        parameter_change=report_figure("parameter_change", "diagnostics", "parameter change per layer"),
        max_change=report_figure("max_change", "diagnostics", "max-change activation rate"),
    params:
        exp_dir=lambda wc: exp_dir(wc.exp),
        schedule=lambda wc: schedule_params(wc.exp),
    log:
        "logs/experiment_figures/{exp}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=1000,  # matplotlib and the JSON of every job (~1 kB each)
        runtime=10,
    script:
        "../scripts/experiment_figures.py"


rule experiment_config:
    input:
        # the schedule needs the egs; through the checkpoint (a plain path to its output
        # would make `all` look out of date after every finished run)
        info=lambda wc: checkpoints.egs.get().output.info,
    output:
        yaml=f"{RESULTS}/exp/{{exp}}/report/config.yaml",
        html=report(
            f"{RESULTS}/exp/{{exp}}/report/config.html",
            caption="../report/config.rst",
            category="{exp}",
            subcategory="configuration",
            labels={"figure": "effective configuration"},
        ),
    params:
        resolved=lambda wc: EXPERIMENTS[wc.exp],
        overrides=lambda wc: config["experiments"][wc.exp] or {},
        schedule=lambda wc: schedule_params(wc.exp),
    log:
        "logs/experiment_config/{exp}.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/experiment_config.py"


rule report_comparison:
    input:
        get_report_comparison_inputs,
        decode=get_decode_scores(),  # WER/PER (rules/decode.smk) when decode.enabled
    output:
        figure=report(
            f"{RESULTS}/report/comparison.png",
            caption="../report/comparison.rst",
            category="All experiments",
            labels={"figure": "validation curves overlaid"},
        ),
        html=report(
            f"{RESULTS}/report/results.html",
            caption="../report/results.rst",
            category="All experiments",
            labels={"figure": "results table per eval set"},
        ),
        md=f"{RESULTS}/report/results_by_set.md",
    params:
        exp_dirs={name: exp_dir(name) for name in EXPERIMENTS},
        eval_sets=config["eval_sets"],
    log:
        "logs/report_comparison/all.log",
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/report_comparison.py"

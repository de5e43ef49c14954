# The report: per-experiment figures and config, the comparison of all experiments.
# `snakemake --report report.html` collects every output flagged with report() below,
# grouped by experiment (category) and by kind (subcategory), each with its caption.
# Data: only the per-iteration JSON files (never logs). Live view while training runs:
# `python -m paravg.progress results/exp/<exp> --out progress/`.


report: "../report/workflow.rst"


rule experiment_figures:
    input:
        unpack(from_dag("results.report_figure_inputs")),
    output:
        objective=report_figure("objective", "training curves", "log-prob and frame accuracy"),
        job_objectives=report_figure("job_objectives", "training curves", "job objectives, rejected jobs"),
        schedule=report_figure("schedule", "schedule", "learning rate and number of jobs"),
        parameter_change=report_figure("parameter_change", "diagnostics", "parameter change per layer"),
        max_change=report_figure("max_change", "diagnostics", "max-change activation rate"),
    params:
        exp_dir=from_dag("layout.exp_dir"),
        schedule=from_dag("train.schedule_params"),
    log:
        LAYOUT.log("experiment_figures", "{exp}"),
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
        info=from_dag("egs.info_file"),
    output:
        yaml=LAYOUT.report_config("{exp}", "yaml"),
        html=report(
            LAYOUT.report_config("{exp}", "html"),
            caption="../report/config.rst",
            category="{exp}",
            subcategory="configuration",
            labels={"figure": "effective configuration"},
        ),
    params:
        **{k: from_dag("results.experiment_config_param", k) for k in ("resolved", "overrides", "schedule")},
    log:
        LAYOUT.log("experiment_config", "{exp}"),
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
        from_dag("results.report_comparison_inputs"),
        config=LAYOUT.results_config(),  # the eval sets: rules/final.smk, results_config
        decode=RECOGNITION.decode_scores(),  # WER/PER (rules/decode.smk) when decode.enabled
    output:
        figure=report(
            LAYOUT.report_file("comparison.png"),
            caption="../report/comparison.rst",
            category="All experiments",
            labels={"figure": "validation curves overlaid"},
        ),
        html=report(
            LAYOUT.report_file("results.html"),
            caption="../report/results.rst",
            category="All experiments",
            labels={"figure": "results table per eval set"},
        ),
        md=LAYOUT.report_file("results_by_set.md"),
    params:
        exp_dirs=PARAVG.results.exp_dirs(),
        eval_sets=PARAVG.eval_sets,
    log:
        LAYOUT.log("report_comparison", "all"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/report_comparison.py"

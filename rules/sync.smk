# The sync nodes, one per iteration and off the critical path: no train job waits for
# them (the jobs form their start models themselves from the same inputs, bit for bit).
# paravg.sync.registry says which node a method has: `average` writes <t>.pt (Kaldi's
# nnet3-average), `bmuf` the block state that the jobs of t + 1 read, `consensus` the mean
# of the decentralized jobs. The EMA model follows the synced models, read by no job.


rule average:
    input:
        unpack(get_node_inputs),
    output:
        model=LAYOUT.model("{exp}", "{t}"),
        summary=LAYOUT.sync_summary("{exp}", "{t}"),
    wildcard_constraints:
        exp=experiments_pattern(experiments_with(node="average")),
        t=index_after_frontier("node"),
    params:
        node=get_node_params,
    log:
        LAYOUT.log("average", "{exp}/{t}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # N models in memory at once
        runtime=15,
    script:
        "../scripts/average.py"


rule bmuf:
    input:
        unpack(get_node_inputs),
    output:
        model=LAYOUT.model("{exp}", "{t}"),
        global_model=LAYOUT.bmuf_global("{exp}", "{t}"),
        delta=LAYOUT.bmuf_delta("{exp}", "{t}"),
        summary=LAYOUT.sync_summary("{exp}", "{t}"),
    wildcard_constraints:
        exp=experiments_pattern(experiments_with(node="bmuf")),
        t=index_after_frontier("node"),
    params:
        node=get_node_params,
    log:
        LAYOUT.log("bmuf", "{exp}/{t}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # N models plus g, delta and the start model in memory
        runtime=15,
    script:
        "../scripts/bmuf.py"


rule consensus:
    input:
        unpack(get_node_inputs),
    output:
        model=LAYOUT.consensus_model("{exp}", "{t}"),
        summary=LAYOUT.consensus_summary("{exp}", "{t}"),
    wildcard_constraints:
        exp=experiments_pattern(experiments_with(node="consensus")),
        t=index_after_frontier("node"),
    params:
        node=get_node_params,
    log:
        LAYOUT.log("consensus", "{exp}/{t}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # N models in memory at once
        runtime=15,
    script:
        "../scripts/consensus.py"


rule ema:
    input:
        unpack(get_ema_inputs),
    output:
        LAYOUT.ema_model("{exp}", "{t}"),
    wildcard_constraints:
        exp=experiments_pattern(experiments_with_ema()),
        t=index_after_frontier("ema"),
    params:
        decay=lambda wc: plan(wc.exp).ema_decay(int(wc.t)),
    log:
        LAYOUT.log("ema", "{exp}/{t}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=1000,  # two models
        runtime=10,
    script:
        "../scripts/ema.py"


rule evaluate_ema:
    input:
        unpack(get_eval_ema_inputs),
    output:
        LAYOUT.eval_ema_result("{exp}", "{set}"),
    wildcard_constraints:
        exp=experiments_pattern(experiments_with_ema()),
    params:
        tolerance=config["egs"]["targets_length_tolerance"],
    log:
        LAYOUT.log("evaluate_ema", "{exp}/{set}"),
    conda:
        "../envs/paravg.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/evaluate.py"

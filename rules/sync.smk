# The sync nodes, one per iteration and off the critical path: no train job waits for
# them (the jobs form their start models themselves from the same inputs, bit for bit).
# paravg.sync.nodes.NODE_KINDS says which nodes there are and which a method has:
# `average` writes <t>.pt (Kaldi's nnet3-average), `bmuf` the block state that the jobs of
# t + 1 read, `consensus` the mean of the decentralized jobs. The EMA model follows the
# synced models, read by no job.
from paravg.sync.nodes import NODE_KINDS


for node in NODE_KINDS.values():
    # One rule per kind of sync node (paravg.sync.nodes.NODE_KINDS), for the
    # experiments whose method names it: its files per index are the kind's outputs.

    rule:
        name:
            node.name
        input:
            unpack(from_dag("train.node_inputs")),
        output:
            **PARAVG.train.node_outputs(node.name),
        wildcard_constraints:
            exp=for_experiments(node=node.name),
            t=PARAVG.index_after_frontier("node"),
        params:
            node=from_dag("train.node_params"),
        log:
            LAYOUT.log(node.name, "{exp}/{t}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=node.mem_mb,  # N models in memory at once (BMUF: and g, delta, s)
            runtime=15,
        script:
            "../scripts/sync_node.py"


rule mix_node:
    # delay-by-one's start s_j^{t−1} of learner j, one node per (t, j), written to
    # <t>/job<j>.start.pt from the neighbours' starts of t − 2 (their mix nodes) and the
    # learner's own job of t − 3: it runs while the learner's job of t − 2 trains, and
    # job (t − 1, j) waits for no neighbour's job (Cui et al.'s overlap; the registry's
    # mix_inputs)
    input:
        unpack(from_dag("train.mix_inputs")),
    output:
        model=job_output(LAYOUT.job_start("{exp}", "{t}", "{j}")),
        record=LAYOUT.job_start_record("{exp}", "{t}", "{j}"),
    wildcard_constraints:
        exp=for_experiments(mix_node=True),
        t=PARAVG.index_after_frontier("mix"),
    params:
        node=from_dag("train.mix_params"),
    log:
        LAYOUT.log("mix_node", "{exp}/{t}/job{j}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=2000,  # the 3 neighbours' starts and the own job's two models
        runtime=15,
    script:
        "../scripts/mix_node.py"


rule ema:
    input:
        unpack(from_dag("train.ema_inputs")),
    output:
        LAYOUT.ema_model("{exp}", "{t}"),
    wildcard_constraints:
        exp=PARAVG.experiments_pattern(PARAVG.experiments_with_ema()),
        t=PARAVG.index_after_frontier("ema"),
    params:
        decay=from_dag("train.ema_decay"),
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
        unpack(from_dag("train.eval_ema_inputs")),
    output:
        LAYOUT.eval_ema_result("{exp}", "{set}"),
    wildcard_constraints:
        exp=PARAVG.experiments_pattern(PARAVG.experiments_with_ema()),
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

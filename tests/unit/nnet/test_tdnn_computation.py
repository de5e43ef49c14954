"""The TDNN computes only the time steps its output needs, as Kaldi's compiler does.

The reference rows are derived here independently of ``paravg.nnet.tdnn``: a worklist over
Kaldi's cindexes (node, n, t), starting from the requested output (n, t = 0) of every eg
of the minibatch and following each node's input descriptor (``Append`` of ``Offset`` s
for a spliced affine, the same index for ReLU / renorm / output), which is what
``ComputeNnetComputation`` does before it allocates one row per cindex. The full-window
reference forward evaluates every layer at every position with :func:`splice`.
"""

import math

import pytest
import torch

from paravg.nnet.context import model_context
from paravg.nnet.ng_affine import make_affine_factory
from paravg.nnet.tdnn import TdnnModel, normalize_rms, splice
from tests.unit.dummies import tdnn_config

# config/config.yaml's model
DEFAULT_CFG = tdnn_config((256, [0]), (256, [-1, 0, 1]), (256, [-1, 0, 1]), (256, [-3, 0, 3]))
# asymmetric, uneven and repeated gaps: index-tensor selections
ODD_CFG = tdnn_config((12, [-2, 0]), (12, [-6, -3, 0]), (12, [0, 1, 4]), input_splice=[-1, 0, 2])


def kaldi_cindexes(cfg: dict, num_egs: int) -> dict[str, set[tuple[int, int]]]:
    """{affine component name: the (n, t) it is computed at} for one output frame (t = 0)
    per eg, by Kaldi's dependency walk over cindexes."""
    num_layers = len(cfg["hidden"])
    names = [f"tdnn{i + 1}.affine" for i in range(num_layers)] + ["output.affine"]
    # node graph: affine_ℓ reads renorm_{ℓ-1} through Append(Offset(., o) ...); relu_ℓ and
    # renorm_ℓ read the node before them at the same index; output.affine reads renorm_L
    inputs = {"output.affine": ("renorm", num_layers, [0])}
    for i, layer in enumerate(cfg["hidden"], start=1):
        inputs[f"tdnn{i}.affine"] = ("renorm", i - 1, list(layer["splice"]))
    needed: dict[str, set[tuple[int, int]]] = {}
    todo = [("output.affine", n, 0) for n in range(num_egs)]
    seen = set()
    while todo:
        node, n, t = todo.pop()
        if (node, n, t) in seen:
            continue
        seen.add((node, n, t))
        if node.endswith(".affine"):
            _, level, offsets = inputs[node]
            needed.setdefault(node, set()).add((n, t))
            if level == 0:
                continue  # renorm_0 = the fixed LDA layer: no natural gradient
            todo += [(f"renorm{level}", n, t + o) for o in offsets]
        elif node.startswith("renorm"):
            todo.append((f"relu{node[6:]}", n, t))
        elif node.startswith("relu"):
            todo.append((f"tdnn{node[4:]}.affine", n, t))
    return {name: needed[name] for name in names}


def full_window_layers(model: TdnnModel, feats, ivectors):
    """Every affine's input and output at every position of the window (autograd kept),
    with the time of each position; and the log-probs."""
    left_in = -min(model.input_splice)
    x = splice(feats, model.input_splice)
    if ivectors is not None:
        x = torch.cat([x, ivectors[:, None, :].expand(-1, x.shape[1], -1)], dim=-1)
    h = torch.nn.functional.linear(x, model.lda_weight, model.lda_bias)
    first = left_in  # time of position 0 of h
    layers = []
    for offsets, comp in zip(model.splices, model.hidden, strict=True):
        inp = splice(h, offsets)
        first += -min(offsets)
        z = comp(inp)
        if z.requires_grad:
            z.retain_grad()
        layers.append((inp, z, first))
        h = normalize_rms(torch.relu(z))
    z = model.output(h)
    if z.requires_grad:
        z.retain_grad()
    layers.append((h, z, first))
    return layers, torch.log_softmax(z, dim=-1)


def _models(cfg, feat_dim, ivector_dim, num_targets, seed):
    ng = TdnnModel(cfg, feat_dim, ivector_dim, num_targets, make_affine_factory({}))
    ng.init_parameters(seed)
    with torch.no_grad():
        ng.output.weight.normal_(generator=torch.Generator().manual_seed(seed))
    plain = TdnnModel(cfg, feat_dim, ivector_dim, num_targets)
    plain.load_state_dict(ng.state_dict())
    return ng, plain


def _record_preconditioner_inputs(model: TdnnModel) -> dict[str, dict[str, torch.Tensor]]:
    seen: dict[str, dict[str, torch.Tensor]] = {}
    for name, comp in zip(model.component_names(), model.components(), strict=True):
        for side in ("in", "out"):
            pre = getattr(comp, f"preconditioner_{side}")
            call = pre.precondition_directions

            def record(X, inplace=False, call=call, name=name, side=side):
                seen.setdefault(name, {})[side] = X.detach().clone()
                return call(X, inplace=inplace)

            pre.precondition_directions = record
    return seen


@pytest.mark.parametrize(("cfg", "ivector_dim"), [(DEFAULT_CFG, 4), (ODD_CFG, 0)])
def test_rows_reaching_each_preconditioner_are_kaldis(cfg, ivector_dim):
    B, feat_dim, num_targets = 6, 5, 9
    ng, plain = _models(cfg, feat_dim, ivector_dim, num_targets, seed=2)
    left, right = model_context(cfg)
    gen = torch.Generator().manual_seed(0)
    feats = torch.randn(B, left + 1 + right, feat_dim, generator=gen)
    ivec = torch.randn(B, ivector_dim, generator=gen) if ivector_dim else None
    labels = torch.randint(num_targets, (B,), generator=gen)
    seen = _record_preconditioner_inputs(ng)

    logp = ng(feats, ivec)[:, 0]
    (-logp.gather(1, labels[:, None]).sum()).backward()
    for comp in ng.components():
        comp.delta(1e-3)

    layers, ref_logp = full_window_layers(plain, feats, ivec)
    torch.testing.assert_close(logp, ref_logp[:, 0], rtol=1e-5, atol=1e-6)
    (-ref_logp[:, 0].gather(1, labels[:, None]).sum()).backward()

    kaldi = kaldi_cindexes(cfg, B)
    for name, (inp, z, first) in zip(ng.component_names(), layers, strict=True):
        cindexes = kaldi[name]
        times = sorted({t + left for _, t in cindexes})  # Kaldi t = 0 is window frame `left`
        assert {n for n, _ in cindexes} == set(range(B))
        assert len(cindexes) == B * len(times)  # every eg at the same times
        X_in, X_out = seen[name]["in"], seen[name]["out"]
        assert X_in.shape[0] == X_out.shape[0] == len(cindexes), name
        index = [t - first for t in times]
        # rows in (n, t) order: the affine's input (and its 1 for the bias) and the
        # output derivative, each as the full-window computation has them there
        want_in = inp.detach()[:, index].reshape(-1, inp.shape[-1])
        torch.testing.assert_close(X_in[:, :-1], want_in, rtol=1e-5, atol=1e-6)
        assert torch.all(X_in[:, -1] == 1.0)
        want_out = z.grad[:, index].reshape(-1, z.shape[-1])
        torch.testing.assert_close(X_out, want_out, rtol=1e-4, atol=1e-7)
        # the positions left out carry no derivative at all in the full computation
        others = [i for i in range(z.shape[1]) if i not in index]
        assert torch.count_nonzero(z.grad[:, others]) == 0


def test_default_config_tdnn3_sees_3_rows_per_eg_and_kaldis_forgetting_factor():
    B = 256
    ng, _ = _models(DEFAULT_CFG, 40, 0, 30, seed=0)
    left, right = model_context(DEFAULT_CFG)
    feats = torch.randn(B, left + 1 + right, 40, generator=torch.Generator().manual_seed(1))
    seen = _record_preconditioner_inputs(ng)
    (-ng(feats)[:, 0, 0].sum()).backward()
    for comp in ng.components():
        comp.delta(1e-3)
    rows = {name: seen[name]["in"].shape[0] // B for name in ng.component_names()}
    assert rows == {
        "tdnn1.affine": 11,
        "tdnn2.affine": 9,
        "tdnn3.affine": 3,
        "tdnn4.affine": 1,
        "output.affine": 1,
    }
    tdnn3 = ng.hidden[2].preconditioner_in
    assert tdnn3.eta(3 * B) == pytest.approx(1 - math.exp(-3 * B / 2000))  # 0.32, not 0.59


@pytest.mark.parametrize("num_out", [1, 2, 7])
@pytest.mark.parametrize("cfg", [DEFAULT_CFG, ODD_CFG])
def test_output_equals_the_full_window_computation(cfg, num_out):
    cfg = {**cfg, "hidden": [{**h, "dim": 10} for h in cfg["hidden"]]}
    _, plain = _models(cfg, 5, 3, 7, seed=4)
    left, right = model_context(cfg)
    gen = torch.Generator().manual_seed(num_out)
    feats = torch.randn(3, left + num_out + right, 5, generator=gen)
    ivec = torch.randn(3, 3, generator=gen)
    with torch.no_grad():
        _, ref = full_window_layers(plain, feats, ivec)
        torch.testing.assert_close(plain(feats, ivec), ref, rtol=1e-6, atol=1e-6)
        # per-frame i-vectors (evaluation) for the whole window give the same rows
        per_frame = ivec[:, None, :].expand(-1, feats.shape[1], -1)
        torch.testing.assert_close(plain(feats, per_frame), ref, rtol=1e-6, atol=1e-6)


def test_plain_gradients_are_unchanged_by_the_pruning():
    """Left-out positions had zero derivative, so plain SGD's step is the same."""
    _, plain = _models(ODD_CFG, 5, 0, 7, seed=5)
    left, right = model_context(ODD_CFG)
    feats = torch.randn(4, left + 1 + right, 5, generator=torch.Generator().manual_seed(2))
    (-plain(feats)[:, 0, 1].sum()).backward()
    pruned = [p.grad.clone() for p in plain.parameters()]
    plain.zero_grad()
    _, ref = full_window_layers(plain, feats, None)
    (-ref[:, 0, 1].sum()).backward()
    for a, p in zip(pruned, plain.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-7)


def test_too_short_a_window_is_an_error():
    model = TdnnModel(ODD_CFG, 5, 0, 7)
    left, right = model_context(ODD_CFG)
    with pytest.raises(ValueError, match="too short"):
        model(torch.zeros(1, left + right, 5))

# SPDX-License-Identifier: MIT
"""Attention sinks (gpt-oss: a learned logit per query head in every softmax row,
``sinks=``) through every Python entry: rove.attention (bshd, bhsd views and contiguous
bhsd K/V read in place, numpy, bf16, decode over a long cache), the KV cache,
varlen, the paged cache and the engine's pool, merge_partials, autograd (dq, dk, dv, d
sinks against a float64 torch formula; refused where there is no backward), the
torch.library ops (and torch.compile), bad input, and transformers' gpt-oss through
rove.hf against its eager attention (inference and training)."""
import numpy as np
import pytest

import rove
from conftest import randn
from reference import ref_attention, rel_err


def _ref(q, k, v, sinks, **kw):
    w, m = rove.inv_freq(rove.RopeConfig(), q.shape[-1])
    return ref_attention(q, k, v, w=w, m=m, sinks=sinks, **kw)


@pytest.mark.parametrize("rotate,causal,window,softcap", [
    ("rove", True, 0, 0.0), ("rope", True, 5, 0.0), ("none", False, 0, 0.0),
    ("rove", False, 7, 20.0)])
@pytest.mark.parametrize("level", [0.0, 3.0, 40.0, -60.0])
def test_matches_the_float64_reference(rng, rotate, causal, window, softcap, level):
    B, Lq, Lk, H, Hk, D = 2, 13, 19, 6, 2, 32
    q, k, v = randn(rng, B, Lq, H, D), randn(rng, B, Lk, Hk, D), randn(rng, B, Lk, Hk, D)
    sinks = (level + rng.standard_normal(H)).astype(np.float32)
    out, lse = rove.attention(q, k, v, rotate=rotate, causal=causal, window=window,
                              softcap=softcap, sinks=sinks, return_lse=True)
    flags = {"rove": 15, "rope": 3, "none": 0}[rotate]
    ro, rl = _ref(q, k, v, sinks, rotate=flags, causal=causal, window=window, softcap=softcap)
    assert rel_err(out, ro) < 2e-5 if level < 30 else np.abs(out - ro).max() < 1e-12
    assert np.abs(lse - rl).max() < 2e-5 * max(1.0, np.abs(rl).max())


def test_rows_without_keys_get_zero_and_the_sink(rng):
    q, k, v = randn(rng, 1, 4, 2, 16), randn(rng, 1, 6, 2, 16), randn(rng, 1, 6, 2, 16)
    sinks = np.array([0.25, -1.5], np.float32)
    out, lse = rove.attention(q, k, v, q_pos=[0, 1, 20, 21], kv_pos=[10, 11, 12, 13, 14, 15],
                              sinks=sinks, return_lse=True)
    assert np.all(out[0, :2] == 0.0)
    assert np.array_equal(lse[0, :, :2], np.repeat(sinks[:, None], 2, axis=1))
    assert np.all(np.isfinite(out)) and np.all(lse[0, :, 2:] > sinks[:, None])


def test_layouts_dtypes_and_decode_agree(torch, rng):
    B, Lk, H, Hk, D = 2, 40, 8, 2, 32
    q, k, v = (torch.from_numpy(randn(rng, B, n, h, D)) for n, h in ((5, H), (Lk, Hk), (Lk, Hk)))
    sinks = torch.from_numpy(randn(rng, H))
    want, wl = rove.attention(q, k, v, sinks=sinks, return_lse=True)
    ro, rl = _ref(q.numpy(), k.numpy(), v.numpy(), sinks.numpy())
    assert rel_err(want, ro) < 2e-5
    # bhsd views of the bshd buffers and contiguous bhsd K/V (head strides), both read in
    # place: the same bits
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    for kk, vv in ((t(k), t(v)), (t(k).contiguous(), t(v).contiguous())):
        got, gl = rove.attention(t(q).contiguous(), kk, vv, sinks=sinks, layout="bhsd",
                                 return_lse=True)
        assert torch.equal(t(got), want) and torch.equal(gl, wl)
    # numpy sinks with torch tensors, float64 / bf16 sinks (converted to float32)
    assert torch.equal(rove.attention(q, k, v, sinks=sinks.numpy()), want)
    assert torch.equal(rove.attention(q, k, v, sinks=sinks.double()), want)
    hb = rove.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), sinks=sinks.bfloat16())
    rb, _ = _ref(q.bfloat16().float().numpy(), k.bfloat16().float().numpy(),
                 v.bfloat16().float().numpy(), sinks.bfloat16().float().numpy())
    assert hb.dtype == torch.bfloat16 and rel_err(hb.float(), rb) < 1e-2
    # one query over a long cache (split over the keys, merged, then the sink)
    k2, v2 = (torch.from_numpy(randn(rng, 1, 5000, Hk, D)) for _ in range(2))
    q2 = torch.from_numpy(randn(rng, 1, 1, H, D))
    o2 = rove.attention(q2, k2, v2, sinks=sinks)
    assert rel_err(o2, _ref(q2.numpy(), k2.numpy(), v2.numpy(), sinks.numpy())[0]) < 2e-5


def test_kv_cache_varlen_and_paged(rng):
    H, Hk, D = 4, 2, 32
    plan = rove.Plan(H, Hk, D)
    sinks = randn(rng, H) * 2
    lens, nq = [30, 1, 0, 70], [3, 1, 2, 1]
    ks = [randn(rng, n, Hk, D) for n in lens]
    vs = [randn(rng, n, Hk, D) for n in lens]
    qs = [randn(rng, n, H, D) for n in nq]
    # varlen == one call per sequence, bit for bit; no keys: 0 and LSE = the sink
    cu_q, cu_k = np.cumsum([0] + nq).astype(np.int32), np.cumsum([0] + lens).astype(np.int32)
    out, lse = rove.attention_varlen(np.concatenate(qs), np.concatenate(ks),
                                     np.concatenate(vs), cu_q, cu_k, sinks=sinks,
                                     return_lse=True)
    for s in range(4):
        o, l = out[cu_q[s]:cu_q[s + 1]], lse[:, cu_q[s]:cu_q[s + 1]]
        if lens[s] == 0:
            assert np.all(o == 0) and np.array_equal(l, np.repeat(sinks[:, None], nq[s], 1))
            continue
        wo, wl = plan.attention(qs[s][None], ks[s][None], vs[s][None], sinks=sinks,
                                return_lse=True)
        assert np.array_equal(o, wo[0]) and np.array_equal(l, wl[0])
        # the KV cache and the paged cache: the same bits as the contiguous call
        c = rove.KVCache(plan, 1, 128)
        c.append(ks[s][None], vs[s][None])
        co, cl = c.attention(qs[s][None], sinks=sinks, return_lse=True)
        assert np.array_equal(co, wo) and np.array_equal(cl, wl)
        pc = rove.PagedKVCache(plan, block_size=64, n_blocks=4, max_seqs=1)
        sid = pc.new_sequence()
        pc.append(sid, ks[s], vs[s])
        po, pl = pc.attention([sid], qs[s], sinks=sinks, return_lse=True)
        assert np.array_equal(po, co[0]) and np.array_equal(pl, cl[0])


def test_gradients_match_torch(torch, rng):
    """dq, dk, dv and d sinks against autograd through the gpt-oss eager formula in
    float64 (rotate='none'), for rove.attention (both layouts), varlen and the op."""
    import rove.torch_ops as ops
    B, L, H, Hk, D = 2, 9, 4, 2, 16

    def eager(q, k, v, s):  # transformers' gpt-oss eager_attention_forward, bshd in/out
        qq, kk, vv = (x.transpose(1, 2) for x in (q, k, v))
        kk, vv = kk.repeat_interleave(H // Hk, 1), vv.repeat_interleave(H // Hk, 1)
        w = qq @ kk.transpose(-1, -2) * D ** -0.5
        w = w.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), -torch.inf)
        c = torch.cat([w, s.view(1, H, 1, 1).expand(B, H, L, 1)], -1)
        return (torch.softmax(c - c.amax(-1, keepdim=True), -1)[..., :-1] @ vv).transpose(1, 2)

    base = [torch.from_numpy(randn(rng, *sh)) for sh in
            ((B, L, H, D), (B, L, Hk, D), (B, L, Hk, D), (H,))]
    base[3] = base[3] * 2
    gout = torch.from_numpy(randn(rng, B, L, H, D))
    ref = [x.double().requires_grad_() for x in base]
    (eager(*ref) * gout.double()).sum().backward()
    cu = torch.tensor([0, L, 2 * L], dtype=torch.int32)
    flat = lambda x, h: x.reshape(B * L, h, D)  # noqa: E731
    runs = {
        "attention": lambda q, k, v, s: rove.attention(q, k, v, rotate="none", sinks=s),
        "bhsd": lambda q, k, v, s: rove.attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), rotate="none", sinks=s,
            layout="bhsd").transpose(1, 2),
        "varlen": lambda q, k, v, s: rove.attention_varlen(
            flat(q, H), flat(k, Hk), flat(v, Hk), cu, cu, rotate="none", sinks=s).view(B, L, H, D),
        "op": lambda q, k, v, s: ops.attention(q, k, v, rotate="none", sinks=s),
        "op varlen": lambda q, k, v, s: ops.attention_varlen(
            flat(q, H), flat(k, Hk), flat(v, Hk), cu, cu, rotate="none", sinks=s).view(B, L, H, D),
    }
    for name, run in runs.items():
        got = [x.clone().requires_grad_() for x in base]
        out = run(*got)
        assert (out.double() - eager(*ref)).abs().max() < 1e-5, name
        (out * gout).sum().backward()
        for g, r, what in zip(got, ref, "q k v sinks".split()):
            assert (g.grad.double() - r.grad).abs().max() < 2e-5, (name, what)
    # the sinks alone require grad (q, k, v constants)
    s = base[3].clone().requires_grad_()
    (rove.attention(base[0], base[1], base[2], rotate="none", sinks=s) * gout).sum().backward()
    assert (s.grad.double() - ref[3].grad).abs().max() < 2e-5
    # torch.compile through the op: the same sink gradient
    s = base[3].clone().requires_grad_()
    f = torch.compile(lambda q, k, v, s: (ops.attention(q, k, v, rotate="none", sinks=s)
                                          * gout).sum())
    f(*base[:3], s).backward()
    assert (s.grad.double() - ref[3].grad).abs().max() < 2e-5


def test_lse_gradients_with_sinks(torch, rng):
    """A loss through the LSE (which holds the sink) and out: dq, dk, dv and d sinks
    against float64 torch's logsumexp over the scores and the sink, for rove.attention,
    varlen and the varlen op, with a sequence that has queries and no keys (out 0, LSE =
    the sink: d lse / d sink = 1, its only gradient)."""
    import rove.torch_ops as ops
    L, H, Hk, D, E = 7, 4, 2, 16, 3  # E: the keyless sequence's queries

    def ref(q, k, v, s):  # q [Lq, H, D], k / v [L, Hk, D]: (out, lse [H, Lq]), causal
        qq, kk, vv = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        kk, vv = kk.repeat_interleave(H // Hk, 0), vv.repeat_interleave(H // Hk, 0)
        w = qq @ kk.transpose(-1, -2) * D ** -0.5
        w = w.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), -torch.inf)
        c = torch.cat([w, s.view(H, 1, 1).expand(H, L, 1)], -1)
        return (torch.softmax(c, -1)[..., :-1] @ vv).transpose(0, 1), torch.logsumexp(c, -1)

    base = [torch.from_numpy(randn(rng, *sh)) for sh in
            ((E + L, H, D), (L, Hk, D), (L, Hk, D), (H,))]
    gout = torch.from_numpy(randn(rng, E + L, H, D))
    glse = torch.from_numpy(randn(rng, H, E + L))
    r = [x.double().requires_grad_() for x in base]
    o2, l2 = ref(r[0][E:], r[1], r[2], r[3])
    out = torch.cat([torch.zeros_like(r[0][:E]), o2])
    lse = torch.cat([r[3].view(H, 1).expand(H, E), l2], 1)
    ((out * gout.double()).sum() + (lse * glse.double()).sum()).backward()
    cq, ck = torch.tensor([0, E, E + L]), torch.tensor([0, 0, L])
    runs = {
        "varlen": lambda q, k, v, s: rove.attention_varlen(q, k, v, cq, ck, rotate="none",
                                                           sinks=s, return_lse=True),
        "op varlen": lambda q, k, v, s: ops.attention_varlen(q, k, v, cq, ck, rotate="none",
                                                             sinks=s, return_lse=True),
        "attention (the keyed sequence)": lambda q, k, v, s: rove.attention(
            q[E:], k, v, rotate="none", sinks=s, return_lse=True),
    }
    for name, run in runs.items():
        got = [x.clone().requires_grad_() for x in base]
        o, lse = run(*got)
        keyed = o.shape[0] == L
        go, gl = (gout[E:], glse[:, E:]) if keyed else (gout, glse)
        ((o * go).sum() + (lse * gl).sum()).backward()
        if keyed:  # the reference without the keyless rows' terms
            rr = [x.double().requires_grad_() for x in base]
            o2, l2 = ref(rr[0][E:], rr[1], rr[2], rr[3])
            ((o2 * go.double()).sum() + (l2 * gl.double()).sum()).backward()
            want = [x.grad for x in rr]
        else:
            want = [x.grad for x in r]
        for g, w_, what in zip(got, want, "q k v sinks".split()):
            assert (g.grad.double() - w_).abs().max() < 2e-5 * max(1.0, w_.abs().max()), \
                (name, what)


def test_merge_partials_with_sinks(torch, rng):
    """Parts computed without sinks, merged with them (list and stacked forms): one call
    with the sinks over all the keys."""
    B, Lq, Lk, H, Hk, D = 2, 5, 40, 4, 2, 32
    q, k, v = (torch.from_numpy(randn(rng, B, n, h, D)) for n, h in ((Lq, H), (Lk, Hk), (Lk, Hk)))
    sinks = torch.tensor([0.5, -2.0, 3.0, 1.0])
    want, wl = rove.attention(q, k, v, sinks=sinks, return_lse=True)
    cuts = [0, 13, 14, 40]
    qp = torch.arange(Lk - Lq, Lk)
    parts = [rove.attention(q, k[:, a:b], v[:, a:b], q_pos=qp, kv_pos=torch.arange(a, b),
                            return_lse=True) for a, b in zip(cuts, cuts[1:])]
    outs, lses = [p[0] for p in parts], [p[1] for p in parts]
    for o, l in (rove.merge_partials(outs, lses, sinks=sinks),
                 rove.merge_partials(torch.stack(outs), torch.stack(lses), sinks=sinks)):
        assert (o - want).abs().max() < 1e-6 and (l - wl).abs().max() < 1e-5
    with pytest.raises(ValueError, match="finite"):
        rove.merge_partials(outs, lses, sinks=torch.tensor([0.0, float("nan"), 0.0, 0.0]))


def test_calls_without_a_backward_refuse_sinks_that_require_grad(torch, rng):
    """The KV and paged caches have no backward: sinks that require grad (with grad on)
    are refused as q would be, never silently cut; under no_grad they run."""
    plan = rove.Plan(4, 2, 16)
    q, k, v = (torch.from_numpy(randn(rng, 1, 4, h, 16)) for h in (4, 2, 2))
    s = torch.randn(4, requires_grad=True)
    c = rove.KVCache(plan, 1, 16)
    c.append(k, v)
    pc = rove.PagedKVCache(plan, block_size=16, n_blocks=2, max_seqs=1)
    sid = pc.new_sequence()
    pc.append(sid, k[0], v[0])
    with pytest.raises(RuntimeError, match="sinks requires grad"):
        c.attention(q, sinks=s)
    with pytest.raises(RuntimeError, match="sinks requires grad"):
        pc.attention([sid], q[0], sinks=s)
    with torch.no_grad():
        assert torch.equal(c.attention(q, sinks=s)[0], pc.attention([sid], q[0], sinks=s))


@pytest.mark.parametrize("bad,err,msg", [
    (np.zeros(3, np.float32), ValueError, "expected \\(4,\\)"),
    (np.zeros((1, 4), np.float32), ValueError, "expected \\(4,\\)"),
    (np.zeros(4, np.int32), TypeError, "float"),
    (np.array([0, np.nan, 0, 0], np.float32), ValueError, "finite"),
    (np.array([0, np.inf, 0, 0], np.float32), ValueError, "finite"),
])
def test_bad_sinks_are_refused(rng, bad, err, msg):
    q, k, v = randn(rng, 1, 3, 4, 16), randn(rng, 1, 3, 2, 16), randn(rng, 1, 3, 2, 16)
    with pytest.raises(err, match=msg):
        rove.attention(q, k, v, sinks=bad)
    cu = np.array([0, 3], np.int32)
    with pytest.raises(err, match=msg):
        rove.attention_varlen(q[0], k[0], v[0], cu, cu, sinks=bad)


def test_sinks_on_another_device_are_refused(torch):
    q = torch.zeros(1, 2, 2, 8)
    with pytest.raises(ValueError, match="CPU"):
        rove.attention(q, q, q, sinks=torch.zeros(2, device="meta"))


def _gpt_oss(torch, transformers):
    cfg = transformers.GptOssConfig(
        vocab_size=128, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
        num_experts_per_tok=2, sliding_window=4, max_position_embeddings=256,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": False, "rope_theta": 150000.0,
                         "original_max_position_embeddings": 4096})
    torch.manual_seed(0)
    m = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    with torch.no_grad():
        for layer in m.model.layers:  # sinks that matter (their init is ~0.02)
            layer.self_attn.sinks.normal_(0.0, 2.0)
    return m


def test_gpt_oss_matches_eager(torch):
    """transformers' gpt-oss (sinks passed as s_aux, sliding and full layers, padding, a
    DynamicCache read in place) with attn_implementation='rove' against 'eager'."""
    transformers = pytest.importorskip("transformers")
    import rove.hf
    rove.hf.register()
    m = _gpt_oss(torch, transformers)
    ids = torch.randint(0, 128, (2, 11), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    with torch.no_grad():
        m.set_attn_implementation("eager")
        ref = m(ids, attention_mask=mask).logits
        g_ref = m.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                           output_logits=True, return_dict_in_generate=True)
        m.set_attn_implementation("rove")
        calls = rove.hf.stats["attention_calls"]
        got = m(ids, attention_mask=mask).logits
        g = m.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                       output_logits=True, return_dict_in_generate=True)
    assert rove.hf.stats["attention_calls"] > calls  # librove ran
    assert (got - ref)[mask.bool()].abs().max() < 1e-5
    assert torch.equal(g.sequences, g_ref.sequences)
    for a, b in zip(g.logits, g_ref.logits):  # every decode step, over the cache
        assert (a - b).abs().max() < 1e-5
    # bf16 weights: per-step logits close to eager's in bf16
    mb = m.to(torch.bfloat16)
    with torch.no_grad():
        mb.set_attn_implementation("eager")
        rb = mb(ids, attention_mask=mask).logits.float()
        mb.set_attn_implementation("rove")
        gb = mb(ids, attention_mask=mask).logits.float()
    assert (gb - rb)[mask.bool()].abs().max() < 5e-2 * max(1.0, rb.abs().max().item())


@pytest.mark.parametrize("frozen", [False, True])
def test_gpt_oss_gradients_match_eager(torch, frozen):
    """fp32 training: the sinks' gradients (trainable) or, with the sinks frozen (LoRA
    style: gpt-oss's contiguous [b, h, s, d] keys then go through the copying form), the
    projections' gradients equal eager's."""
    transformers = pytest.importorskip("transformers")
    import rove.hf
    rove.hf.register()
    m = _gpt_oss(torch, transformers)
    for layer in m.model.layers:
        layer.self_attn.sinks.requires_grad_(not frozen)
    ids = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(2))
    params = [p for layer in m.model.layers for p in
              ((layer.self_attn.q_proj.weight,) if frozen else (layer.self_attn.sinks,))]
    grads = {}
    for impl in ("eager", "rove"):
        m.set_attn_implementation(impl)
        m.zero_grad()
        m(ids, labels=ids, use_cache=False).loss.backward()
        grads[impl] = [p.grad.clone() for p in params]
    for a, b in zip(grads["rove"], grads["eager"]):
        assert (a - b).abs().max() < 1e-5 * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("fa_kwargs", [False, True], ids=["position_ids", "cu_seq_lens"])
def test_gpt_oss_packed_sequences_run_each_alone(torch, fa_kwargs):
    """gpt-oss builds its mask without position_ids (transformers 5.x), so for a batch
    of DataCollatorWithFlattening its eager and sdpa attend across the packed sequences;
    flash-attention splits the row where position_ids restart (or at cu_seq_lens_q).
    librove follows flash-attention: every sequence, sinks and sliding layers included,
    gives its logits alone, as one rove.attention_varlen call."""
    transformers = pytest.importorskip("transformers")
    import rove.hf
    rove.hf.register()
    m = _gpt_oss(torch, transformers)
    m.set_attn_implementation("rove")
    lens = (7, 3, 9)
    ids = torch.randint(0, 128, (1, sum(lens)), generator=torch.Generator().manual_seed(2))
    pos = torch.cat([torch.arange(n) for n in lens])[None]
    kw = dict(position_ids=pos)
    if fa_kwargs:
        cu = torch.tensor([0, 7, 10, 19], dtype=torch.int32)
        kw.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=9, max_length_k=9)
    calls = rove.hf.stats["packed_calls"]
    with torch.no_grad():
        packed = m(ids, use_cache=False, **kw).logits[0]
        assert rove.hf.stats["packed_calls"] > calls
        o = 0
        for n in lens:
            alone = m(ids[:, o:o + n], use_cache=False).logits[0]
            assert (packed[o:o + n] - alone).abs().max() < 1e-5, n
            o += n


@pytest.mark.parametrize("mode", ["rope", "rove"])
def test_gpt_oss_apply(torch, mode):
    """rove.hf.apply on gpt-oss (YaRN with truncate=False, half-split pairs, sinks as
    s_aux, sliding and full layers): mode "rope" reproduces the eager model (padding,
    generation over the cache); mode "rove" changes it, and its decode over the cache
    equals its own forward without a cache; training either gives the sinks a gradient."""
    transformers = pytest.importorskip("transformers")
    import copy
    import rove.hf
    m = _gpt_oss(torch, transformers)
    ids = torch.randint(0, 128, (2, 11), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    with torch.no_grad():
        ref = m(ids, attention_mask=mask).logits
        g_ref = m.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                           output_logits=True, return_dict_in_generate=True)
    a = rove.hf.apply(copy.deepcopy(m), mode)
    with torch.no_grad():
        got = a(ids, attention_mask=mask).logits
        g = a.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                       output_logits=True, return_dict_in_generate=True)
        full = a(g.sequences, attention_mask=torch.cat(
            [mask, torch.ones(2, 8, dtype=mask.dtype)], 1), use_cache=False).logits
    if mode == "rope":
        assert (got - ref)[mask.bool()].abs().max() < 1e-5
        assert torch.equal(g.sequences, g_ref.sequences)
        for x, y in zip(g.logits, g_ref.logits):
            assert (x - y).abs().max() < 1e-5
    else:  # RoVE changes the model: its cached decode equals its own full forward
        assert (got - ref).abs().max() > 1e-3  # (the value path really rotates)
        for s, x in enumerate(g.logits):
            assert (x - full[:, 10 + s]).abs().max() < 1e-5
    grads = []
    for model in (a, m):
        model.zero_grad()
        model(ids, labels=ids, use_cache=False).loss.backward()
        grads.append([layer.self_attn.sinks.grad for layer in model.model.layers])
    for x, y in zip(*grads):
        assert x is not None and x.abs().max() > 0
        if mode == "rope":  # the eager model's gradients
            assert (x - y).abs().max() < 1e-5 * max(1.0, y.abs().max().item())

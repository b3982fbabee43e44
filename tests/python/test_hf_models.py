# SPDX-License-Identifier: MIT
"""rove.hf against transformers' own attention, for every model family of hf_models.py.

(a) attn_implementation="rove" logits match sdpa (eager for Gemma-2, whose softcap sdpa
    lacks) to 1e-4 relative; (b) 32 greedy tokens equal; (c) apply(mode="rope") reproduces
    the unmodified model (logits and tokens); (d) apply(mode="rove") matches a float64
    PyTorch RoVE reference written here from the formula (values rotated by their key
    position, output by the query position back), and its generate() agrees with a full
    recompute; (e) left-padded batches are honoured exactly, packed sequences (position_ids
    restarting inside a row) equal each sequence alone, other masks are refused; (f) decode
    rotates only the new token and the cache holds rotated keys.

Greedy comparisons are made robust against logit ties without weakening them: a prompt is
used only if every step's top-1 / top-2 gap in the reference is far above the agreement
tolerance (else the next prompt seed is tried, and the test fails if none qualifies).
"""
from __future__ import annotations

import copy

import pytest
import torch  # no importorskip: missing torch / transformers must fail, not skip
import transformers as T

import rove.hf as RH
from transformers.masking_utils import AttentionMaskInterface, eager_mask

import hf_models as H

T.logging.set_verbosity_error()
RH.register()


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models: one torch thread beside librove's own threads (2 cores)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


FAMILIES = sorted(H.FAMILIES)
PROMPT, NEW, RTOL = 40, 32, 1e-4
GAP = 1e-4  # minimum top-1/top-2 gap (relative to max |logit|): 100x the 1e-6 agreement


def _build(family, impl, state=None, seed=0):
    torch.manual_seed(seed)
    model = T.AutoModelForCausalLM.from_config(H.FAMILIES[family](), attn_implementation=impl)
    if state is not None:
        model.load_state_dict(state)
    return model.eval()


def _ref_impl(family):
    return "eager" if family == "gemma2" else "sdpa"


def _rel(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def _gaps_ok(logits):
    """Every row's top-1 / top-2 gap is > GAP * max |logit|."""
    top = logits.float().topk(2, dim=-1).values
    return bool(((top[..., 0] - top[..., 1]) > GAP * logits.abs().max()).all())


def _generate(model, ids, mask=None):
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=NEW, min_new_tokens=NEW,
                              do_sample=False, pad_token_id=0)


def _prompt(ref_model, batch=1, length=PROMPT, check=True):
    """A random prompt whose greedy continuation under ref_model has no near-ties, and
    that continuation (None with check=False)."""
    for seed in range(8):
        g = torch.Generator().manual_seed(1000 + seed)
        ids = torch.randint(3, H.VOCAB, (batch, length), generator=g)
        if not check:
            return ids, None
        out = _generate(ref_model, ids)
        with torch.no_grad():
            logits = ref_model(out[:, :-1], use_cache=False).logits[:, length - 1:]
        if _gaps_ok(logits):
            return ids, out
    pytest.fail("no prompt without near-tied logits found: the tie guard would be vacuous")


# ---- (a) (b): attn_implementation="rove" ----------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_register_matches_transformers(family):
    ref = _build(family, _ref_impl(family))
    mod = _build(family, "rove", ref.state_dict())
    assert mod.config._attn_implementation == "rove"
    ids, out_ref = _prompt(ref)
    calls = RH.stats["attention_calls"]
    with torch.no_grad():
        a, b = ref(ids).logits, mod(ids).logits
    assert RH.stats["attention_calls"] > calls  # librove really ran
    assert _rel(b, a) <= RTOL, f"{family}: rel {_rel(b, a):.2e}"
    assert torch.equal(_generate(mod, ids), out_ref)


def test_from_pretrained_with_rove(tmp_path):
    ref = _build("llama3", "sdpa")
    ref.save_pretrained(tmp_path)
    mod = T.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="rove").eval()
    ids, _ = _prompt(ref, check=False)
    with torch.no_grad():
        assert _rel(mod(ids).logits, ref(ids).logits) <= RTOL


# ---- generation features: beam search, assisted generation, prefix reuse ------------------
@pytest.mark.parametrize("family", ["llama3", "mistral"])  # mistral: a sliding window of 16
@pytest.mark.parametrize("how", ["register", "apply"])
def test_beams_assistant_and_prefix_reuse(family, how, monkeypatch):
    """Beam search (transformers reorders the cache between steps), assisted generation
    (it crops the cache after rejected drafts) and a prompt continued from a returned
    cache give transformers' tokens and logits."""
    ref = _build(family, _ref_impl(family))
    state = ref.state_dict()
    mod = _build(family, "rove", state) if how == "register" else \
        RH.apply(_build(family, "eager", state), "rope")
    ids, out_ref = _prompt(ref)
    kw = dict(max_new_tokens=12, min_new_tokens=12, pad_token_id=0, do_sample=False)
    with torch.no_grad():
        a = ref.generate(ids, num_beams=3, return_dict_in_generate=True, output_scores=True, **kw)
        b = mod.generate(ids, num_beams=3, return_dict_in_generate=True, output_scores=True, **kw)
    assert torch.equal(a.sequences, b.sequences)
    assert torch.allclose(a.sequences_scores, b.sequences_scores, rtol=1e-5, atol=1e-6)
    crops = []
    crop = T.DynamicCache.crop
    monkeypatch.setattr(T.DynamicCache, "crop", lambda self, n: (crops.append(n), crop(self, n))[1])
    with torch.no_grad():
        assisted = mod.generate(ids, assistant_model=_build(family, "eager", seed=1),
                                max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                                pad_token_id=0)
    assert crops, "the assistant's drafts were never rejected: the crop went untested"
    assert torch.equal(assisted, out_ref)  # assisted greedy decoding is greedy decoding
    with torch.no_grad():  # prefix reuse: 25 tokens, then the other 15 on the returned cache
        first = mod(ids[:, :25], use_cache=True)
        name = "cache" if "cache" in first else "past_key_values"  # (transformers >= 5.25)
        got = mod(ids[:, 25:], **{name: first[name]}).logits
        want = ref(ids).logits[:, 25:]
    assert _rel(got, want) <= RTOL


# ---- (c): apply(mode="rope") reproduces the model --------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_apply_rope_reproduces_the_model(family):
    ref = _build(family, _ref_impl(family))
    mod = RH.apply(_build(family, "eager", ref.state_dict()), "rope")
    ids, out_ref = _prompt(ref)
    with torch.no_grad():
        a, b = ref(ids).logits, mod(ids).logits
    assert _rel(b, a) <= RTOL, f"{family}: rel {_rel(b, a):.2e}"
    assert torch.equal(_generate(mod, ids), out_ref)


# ---- (d): apply(mode="rove") against a float64 PyTorch RoVE reference -------------------
def _rot64(x, pos, w, pairing, inverse):
    """R_pos x (inverse: R_pos^-1) on the first 2*len(w) dims; x [b, h, s, d] float64."""
    r = 2 * w.shape[0]
    ang = pos[:, None, :, None].double() * w  # [b, 1, s, r/2]
    c, s = torch.cos(ang), torch.sin(ang)
    if inverse:
        s = -s
    y = x.clone()
    if pairing == "half":
        a, b = x[..., : r // 2], x[..., r // 2: r]
        y[..., : r // 2], y[..., r // 2: r] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
        y[..., 0:r:2], y[..., 1:r:2] = a * c - b * s, a * s + b * c
    return y


_REF = {}  # attention module -> (inv_freq float64, pairing)


def _ref_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                   softcap=None, **kwargs):
    """RoVE from the formula, float64: q and k come rotated by the model itself;
    y_i = R_{P_i}^{-1} sum_j a_ij R_{p_j} v_j (no cache: key j is query token j)."""
    w, pairing = _REF[module]
    pos = kwargs["position_ids"].expand(query.shape[0], -1)
    assert key.shape[2] == query.shape[2], "reference runs without a cache"
    g = query.shape[1] // key.shape[1]
    q = query.double()
    k = key.double().repeat_interleave(g, dim=1)
    v = _rot64(value.double(), pos, w, pairing, False).repeat_interleave(g, dim=1)
    s = (q @ k.transpose(-1, -2)) * (scaling if scaling is not None else q.shape[-1] ** -0.5)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if attention_mask is not None:
        s = s + attention_mask.double()
    y = _rot64(torch.softmax(s, dim=-1) @ v, pos, w, pairing, True)
    return y.transpose(1, 2).float().contiguous(), None


T.AttentionInterface.register("rove_ref", _ref_attention)
AttentionMaskInterface.register("rove_ref", eager_mask)


def _reference_model(family, state):
    model = _build(family, "rove_ref", state)
    cfg = model.config
    rot = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")][0]
    for m in model.modules():
        if type(m).__name__ != RH.SUPPORTED[cfg.model_type][0]:
            continue
        if family == "gptj":
            r = cfg.rotary_dim
            w = 10000.0 ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
            _REF[m] = (w, "interleaved")
            continue
        lt = getattr(m, "layer_type", None)
        buf = getattr(rot, f"{lt}_inv_freq", None) if lt else None
        _REF[m] = ((rot.inv_freq if buf is None else buf).double(), "half")
    return model


@pytest.mark.parametrize("family", FAMILIES)
def test_apply_rove_matches_reference(family):
    base = _build(family, "eager")
    state = base.state_dict()
    ref = _reference_model(family, state)
    mod = RH.apply(_build(family, "eager", state), "rove")
    ids, _ = _prompt(base, check=False)
    with torch.no_grad():
        a = ref(ids, use_cache=False).logits
        b = mod(ids).logits
        plain = base(ids).logits
    assert _rel(b, a) <= RTOL, f"{family}: rel {_rel(b, a):.2e}"
    assert _rel(plain, a) > 100 * RTOL, "RoVE should change this model's logits"
    # generate() with the cache agrees with a full float64 recompute of the sequence
    for seed in range(8):
        ids = torch.randint(3, H.VOCAB, (1, PROMPT), generator=torch.Generator().manual_seed(seed))
        out = _generate(mod, ids)
        with torch.no_grad():
            full = ref(out[:, :-1], use_cache=False).logits[:, PROMPT - 1:]
        if _gaps_ok(full):
            break
    else:
        pytest.fail("no prompt without near-tied logits found")
    assert torch.equal(full.argmax(-1), out[:, PROMPT:]), family


# ---- (e): padding masks -----------------------------------------------------------------
def _padded_batch(lengths, total, seed=7):
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros((len(lengths), total), dtype=torch.long)
    mask = torch.zeros((len(lengths), total), dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, total - n:] = torch.randint(3, H.VOCAB, (n,), generator=g)
        mask[i, total - n:] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids, mask, pos


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mode", ["register", "rope", "rove"])
def test_left_padding_is_honoured_exactly(family, mode):
    """Padded rows give, at their real tokens, what each sequence gives alone."""
    base = _build(family, "eager")
    if mode == "register":
        mod = _build(family, "rove", base.state_dict())
    else:
        mod = RH.apply(_build(family, "eager", base.state_dict()), mode)
    lengths = (PROMPT, 27)
    ids, mask, pos = _padded_batch(lengths, PROMPT)
    with torch.no_grad():
        batched = mod(ids, attention_mask=mask, position_ids=pos).logits
        for i, n in enumerate(lengths):
            alone = mod(ids[i:i + 1, PROMPT - n:]).logits[0]
            assert _rel(batched[i, PROMPT - n:], alone) <= RTOL, (family, mode, i)
        if mode != "rove":  # transformers' own model on the same padded batch
            ref = base(ids, attention_mask=mask, position_ids=pos).logits
            for i, n in enumerate(lengths):
                assert _rel(batched[i, PROMPT - n:], ref[i, PROMPT - n:]) <= RTOL
    if mode != "rove" and family in ("mistral", "gemma2", "phi3"):
        for seed in range(8):  # batched greedy decoding, guarded against near-ties
            ids, mask, _ = _padded_batch(lengths, PROMPT, seed)
            out_ref = _generate(base, ids, mask)
            full_mask = torch.cat([mask, torch.ones((2, NEW - 1), dtype=mask.dtype)], 1)
            full_pos = (full_mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                logits = base(out_ref[:, :-1], attention_mask=full_mask, position_ids=full_pos,
                              use_cache=False).logits[:, PROMPT - 1:]
            if _gaps_ok(logits):
                break
        else:
            pytest.fail("no padded batch without near-tied logits found")
        assert torch.equal(_generate(mod, ids, mask), out_ref), (family, mode)


def test_plain_causal_mask_is_not_built(monkeypatch):
    """transformers' plain causal mask function (with padding) is known without building
    it: the rove mask function never calls sdpa_mask then (a decode step spent ~120 us
    building and matching it), and the padded batch and its greedy decoding still equal
    sdpa's. A sliding-window model's mask is still built and matched."""
    import transformers.masking_utils as MU
    base = _build("llama3", "sdpa")
    mod = _build("llama3", "rove", base.state_dict())
    ids, mask, pos = _padded_batch((PROMPT, 27), PROMPT)
    with torch.no_grad():
        ref = base(ids, attention_mask=mask, position_ids=pos).logits
    out_ref = _generate(base, ids, mask)
    built = []
    real = MU.sdpa_mask
    monkeypatch.setattr(MU, "sdpa_mask", lambda *a, **k: built.append(1) or real(*a, **k))
    with torch.no_grad():
        got = mod(ids, attention_mask=mask, position_ids=pos).logits
    assert _rel(got[0], ref[0]) <= RTOL and _rel(got[1, PROMPT - 27:], ref[1, PROMPT - 27:]) <= RTOL
    assert torch.equal(_generate(mod, ids, mask), out_ref)
    assert built == []
    window = _build("mistral", "rove")
    with torch.no_grad():
        window(ids, attention_mask=mask, position_ids=pos)
    assert built


# ---- packed sequences (position_ids restart inside a row, no cache) ---------------------
PACKED = ((23, 5, 30, 1), (9, 40, 10))  # per batch row; 23, 30, 40 cross the window of 16


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mode", ["register", "rope", "rove"])
def test_packed_sequences_equal_each_sequence_alone(family, mode):
    """transformers masks packed sequences (position_ids restarting inside a row, no
    cache) block-diagonally; librove runs them as one rove.attention_varlen call. Every
    sequence gives what it gives alone, and (register, rope) what transformers' own model
    gives on the same packed batch."""
    base = _build(family, "eager")
    if mode == "register":
        mod = _build(family, "rove", base.state_dict())
    else:
        mod = RH.apply(_build(family, "eager", base.state_dict()), mode)
    L = sum(PACKED[0])
    assert all(sum(r) == L for r in PACKED)
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(3, H.VOCAB, (len(PACKED), L), generator=g)
    pos = torch.stack([torch.cat([torch.arange(n) for n in row]) for row in PACKED])
    calls = RH.stats["packed_calls"]
    with torch.no_grad():
        packed = mod(ids, position_ids=pos, use_cache=False).logits
        assert RH.stats["packed_calls"] > calls  # the varlen path ran
        for b, row in enumerate(PACKED):
            o = 0
            for n in row:
                alone = mod(ids[b:b + 1, o:o + n], use_cache=False).logits[0]
                assert _rel(packed[b, o:o + n], alone) <= RTOL, (family, mode, b, n)
                o += n
        if mode != "rove":
            ref = base(ids, position_ids=pos, use_cache=False).logits
            assert _rel(packed, ref) <= RTOL, (family, mode)


def test_other_masks_are_refused():
    mod = _build("llama3", "rove")
    ids = torch.randint(3, H.VOCAB, (1, 12))
    # packed sequences with a cache: transformers' eager and sdpa mask the whole row
    # causally (no packing then); its flash-attention path splits the row where
    # position_ids restart, and librove does as flash-attention does
    packed = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5]])
    with torch.no_grad():
        got = mod(ids, position_ids=packed).logits[0]
        for o in (0, 6):
            alone = mod(ids[:, o:o + 6], use_cache=False).logits[0]
            assert _rel(got[o:o + 6], alone) <= RTOL
    # a 4-D float mask carrying biases
    bias = torch.zeros(1, 1, 12, 12)
    bias[..., 3] = -0.5
    with torch.no_grad(), pytest.raises(ValueError, match="biases"):
        mod(ids, attention_mask=bias)
    # a 4-D boolean mask that is not causal + padding (a key hidden from one query only)
    odd = torch.ones(1, 1, 12, 12, dtype=torch.bool).tril()
    odd[0, 0, 9, 4] = False
    with torch.no_grad(), pytest.raises(ValueError, match="cannot honour"):
        mod(ids, attention_mask=odd)
    # a plain 4-D causal boolean mask is honoured
    causal = torch.ones(1, 1, 12, 12, dtype=torch.bool).tril()
    ref = _build("llama3", "eager", mod.state_dict())
    with torch.no_grad():
        assert _rel(mod(ids, attention_mask=causal).logits, ref(ids).logits) <= RTOL


def test_models_that_compute_attention_themselves_are_refused():
    """Bloom and MPT compute attention in their own code: under "rove" they received
    librove's boolean key mask, added it as a bias and ran without a causal mask (logits
    off by 1e-2, position 0 depending on later tokens), never calling librove. Now their
    first forward raises. Falcon clears transformers' backend flag yet dispatches through
    the interface: it still runs in librove and matches eager."""
    RH.register()
    ids = torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    own = [T.BloomConfig(vocab_size=256, n_layer=2, hidden_size=64, n_head=4),
           T.MptConfig(vocab_size=256, n_layers=2, d_model=64, n_heads=4)]
    for cfg in own:
        mod = T.AutoModelForCausalLM.from_config(copy.deepcopy(cfg),
                                                 attn_implementation="rove").eval()
        with torch.no_grad(), pytest.raises(ValueError, match="in their own code"):
            mod(ids)
    cfg = T.FalconConfig(vocab_size=256, num_hidden_layers=2, hidden_size=64,
                         num_attention_heads=4)
    torch.manual_seed(0)
    ref = T.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation="eager")
    mod = T.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation="rove")
    mod.load_state_dict(ref.state_dict())
    calls = RH.stats["attention_calls"]
    with torch.no_grad():
        assert _rel(mod.eval()(ids).logits, ref.eval()(ids).logits) <= RTOL
    assert RH.stats["attention_calls"] > calls


@pytest.mark.parametrize("how", ["register", "apply"])
def test_batch_one_4d_mask_is_broadcast_over_the_batch(how):
    """A [1, 1, L, L] mask with a key hidden from every query (key padding) on a batch of
    2: broadcast over the batch as sdpa does (it crashed on a NumPy shape mismatch); a
    mask of another batch is refused clearly."""
    ref = _build("llama3", "sdpa")
    mod = _build("llama3", "rove", ref.state_dict()) if how == "register" else \
        RH.apply(_build("llama3", "sdpa", ref.state_dict()))
    L = 10
    ids = torch.randint(3, H.VOCAB, (2, L), generator=torch.Generator().manual_seed(3))
    M = torch.ones(L, L, dtype=torch.bool).tril()
    M[:, 2] = False
    for mask in (M[None, None], torch.zeros(1, 1, L, L).masked_fill(~M, float("-inf"))):
        with torch.no_grad():
            want = ref(ids, attention_mask=mask).logits
            assert _rel(mod(ids, attention_mask=mask).logits, want) <= RTOL
            assert _rel(mod(ids, attention_mask=mask.expand(2, 1, L, L)).logits, want) <= RTOL
    with torch.no_grad(), pytest.raises(ValueError, match="batch of 2"):
        mod(ids, attention_mask=M[None, None].expand(3, 1, L, L))


def test_training_dtype_and_weights_are_refused():
    mod = _build("llama3", "rove")
    ids = torch.randint(3, H.VOCAB, (1, 8))
    mod.config.attention_dropout = 0.1
    mod.train()
    for m in mod.modules():
        if hasattr(m, "attention_dropout"):
            m.attention_dropout = 0.1
    with pytest.raises(ValueError, match="dropout"):
        mod(ids)
    mod.eval()
    # never a silent cut: a forward with grad enabled (a model called without
    # torch.no_grad()) through an apply() cache gives the no_grad logits; a backward raises
    applied = RH.apply(_build("llama3", "eager"), "rope")  # training with a cache
    with torch.no_grad():
        want = applied(ids, use_cache=True).logits
    got = applied(ids, use_cache=True).logits
    assert got.requires_grad and torch.equal(got.detach(), want)
    with pytest.raises(RuntimeError, match="use_cache=False"):
        got.sum().backward()
    with torch.no_grad(), pytest.raises(ValueError, match="attention weights"):
        mod(ids, output_attentions=True)
    with torch.no_grad(), pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        copy.deepcopy(mod).to(torch.float64)(ids)


# ---- training through register() (float32) ----------------------------------------------
def _grads(model, parts):
    """Parameter gradients of the summed next-token loss over the batches of parts
    [(ids, kwargs)], accumulated; a padded position neither predicts nor is predicted."""
    model.zero_grad(set_to_none=True)
    for ids, kw in parts:
        target = ids[:, 1:]
        mask = kw.get("attention_mask")
        if mask is not None:
            target = target.masked_fill((mask[:, :-1] == 0) | (mask[:, 1:] == 0), -100)
        logits = model(ids, use_cache=False, **kw).logits
        torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), target.flatten(),
                                          ignore_index=-100, reduction="sum").backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("family", ["llama3", "mistral", "qwen3", "gemma2", "gpt_neox"])
def test_register_training_gradients_match_transformers(family):
    """loss.backward() through librove's backward gives transformers' gradients for every
    parameter: a plain batch (against the same batch), a left-padded batch (against each
    sequence alone, unpadded: rows that see no key are 0 in librove and uniform in eager)
    and packed sequences (varlen; against transformers' own packed mask)."""
    ref = _build(family, _ref_impl(family)).train()
    mod = _build(family, "rove", ref.state_dict()).train()
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, H.VOCAB, (2, 24), generator=g)
    lengths = (24, 15)
    pids, mask, pos = _padded_batch(lengths, 24)
    alone = [(pids[i:i + 1, 24 - n:], {}) for i, n in enumerate(lengths)]
    packed = torch.cat([torch.arange(n) for n in (9, 1, 14)])[None].expand(2, 24)
    cases = [("plain", [(ids, {})], [(ids, {})]),
             ("padded", [(pids, dict(attention_mask=mask, position_ids=pos))], alone),
             ("packed", [(ids, dict(position_ids=packed))], [(ids, dict(position_ids=packed))])]
    for name, ours, theirs in cases:
        calls = RH.stats["attention_calls"], RH.stats["packed_calls"]
        got, want = _grads(mod, ours), _grads(ref, theirs)
        assert RH.stats["attention_calls"] > calls[0]
        if name == "packed":
            assert RH.stats["packed_calls"] > calls[1]
        assert want.keys() == got.keys() and len(got) > 0
        for n in want:
            assert _rel(got[n], want[n]) <= 1e-4, (family, name, n, _rel(got[n], want[n]))


def test_left_padded_loss_with_the_usual_labels():
    """The README's left-padding note: with transformers' usual labels (pads -100), the
    last pad position of a row predicts its first real token from a query row that sees no
    key. librove's output there is 0, as sdpa's, so the loss and its gradients equal sdpa's;
    eager's row is an average of the masked values, and its loss differs unless that label
    (the first real token's, at index = the row's pad count) is masked too."""
    state = _build("llama3", "eager").state_dict()
    pids, mask, pos = _padded_batch((24, 15), 24)
    labels = pids.masked_fill(mask == 0, -100)
    first_real_masked = labels.clone()
    for row, pads in enumerate((mask == 0).sum(1).tolist()):
        if pads:
            first_real_masked[row, pads] = -100
    assert (first_real_masked != labels).any()
    loss, masked = {}, {}
    for impl in ("rove", "sdpa", "eager"):
        m = _build("llama3", impl, state).train()
        for lab, into in ((labels, loss), (first_real_masked, masked)):
            m.zero_grad(set_to_none=True)
            out = m(pids, attention_mask=mask, position_ids=pos, labels=lab, use_cache=False)
            out.loss.backward()
            into[impl] = (out.loss.item(), m.model.layers[0].self_attn.q_proj.weight.grad.clone())
    assert abs(loss["rove"][0] - loss["sdpa"][0]) <= 1e-5 * abs(loss["sdpa"][0])
    assert _rel(loss["rove"][1], loss["sdpa"][1]) <= 1e-4
    assert abs(loss["rove"][0] - loss["eager"][0]) > 1e-4  # the one term that differs
    assert abs(masked["rove"][0] - masked["eager"][0]) <= 1e-5 * abs(masked["eager"][0])
    assert _rel(masked["rove"][1], masked["eager"][1]) <= 1e-4


@pytest.mark.parametrize("family", ["llama3", "gemma2"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "autocast"])
def test_register_half_precision_training(family, dtype):
    """A bfloat16 / float16 model (and a float32 one under bf16 autocast) trains through
    librove's backward: with grad enabled the logits are the no_grad ones, and every
    parameter's gradient (a left-padded batch) is as close to the float32 model's as
    transformers' own attention's in the same precision (sdpa; eager for Gemma-2)."""
    base = _build(family, "eager")
    state = base.state_dict()
    pids, mask, pos = _padded_batch((24, 15), 24)
    part = [(pids, dict(attention_mask=mask, position_ids=pos))]
    want = _grads(_build(family, _ref_impl(family), state).train(), part)
    got = {}
    for impl in ("rove", _ref_impl(family)):
        m = _build(family, impl, state).train()
        if dtype != "autocast":
            m = m.to(dtype)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "autocast"):
            if impl == "rove":
                with torch.no_grad():
                    nograd = m(pids, attention_mask=mask, position_ids=pos).logits
                assert torch.equal(m(pids, attention_mask=mask, position_ids=pos).logits, nograd)
            got[impl] = _grads(m, part)
    assert got["rove"].keys() == want.keys() and len(want) > 0
    for n in want:
        ours, theirs = (_rel(got[i][n].float(), want[n]) for i in ("rove", _ref_impl(family)))
        assert got["rove"][n].dtype == got[_ref_impl(family)][n].dtype
        assert ours <= 2 * theirs + 1e-3, (n, ours, theirs)


@pytest.mark.parametrize("family", ["llama3", "llama_yarn", "qwen3", "gemma2", "gptj", "phi3"])
def test_apply_training_gradients(family):
    """apply() models train too (no cache): librove rotates q and k (RoVE: v and the
    output) inside autograd. "rope": every parameter's gradient equals the unmodified
    model's (plain, left-padded against each sequence alone, packed); "rove": equals the
    float64 RoVE reference's (plain and packed)."""
    base = _build(family, "eager")
    state = base.state_dict()
    ref = _build(family, _ref_impl(family), state).train()
    rope = RH.apply(_build(family, "eager", state), "rope").train()
    rove_m = RH.apply(_build(family, "eager", state), "rove").train()
    rove_ref = _reference_model(family, state).train()
    g = torch.Generator().manual_seed(6)
    ids = torch.randint(3, H.VOCAB, (2, 24), generator=g)
    pos = torch.arange(24)[None].expand(2, 24)
    lengths = (24, 15)
    pids, mask, ppos = _padded_batch(lengths, 24)
    alone = [(pids[i:i + 1, 24 - n:], dict(position_ids=torch.arange(n)[None]))
             for i, n in enumerate(lengths)]
    packed = torch.cat([torch.arange(n) for n in (9, 1, 14)])[None].expand(2, 24)
    plain = [(ids, dict(position_ids=pos))]
    for mod, refm, cases in (
            (rope, ref, [("plain", plain, plain),
                         ("padded", [(pids, dict(attention_mask=mask, position_ids=ppos))], alone),
                         ("packed", [(ids, dict(position_ids=packed))],
                          [(ids, dict(position_ids=packed))])]),
            (rove_m, rove_ref, [("plain", plain, plain),
                                ("packed", [(ids, dict(position_ids=packed))],
                                 [(ids, dict(position_ids=packed))])])):
        for name, ours, theirs in cases:
            got, want = _grads(mod, ours), _grads(refm, theirs)
            assert want.keys() == got.keys() and len(got) > 0
            for n in want:
                assert _rel(got[n], want[n]) <= 1e-4, (family, name, n, _rel(got[n], want[n]))


@pytest.mark.parametrize("family", ["llama3", "gemma2"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "autocast"])
def test_apply_half_precision_training(family, dtype):
    """apply(mode="rope") trains in bf16 / fp16 / bf16 autocast (no cache): every
    parameter's gradient over a left-padded batch is as close to the float32 model's as
    the unmodified model's in that precision (sdpa; eager for Gemma-2)."""
    state = _build(family, "eager").state_dict()
    pids, mask, pos = _padded_batch((24, 15), 24)
    part = [(pids, dict(attention_mask=mask, position_ids=pos))]
    want = _grads(_build(family, _ref_impl(family), state).train(), part)
    got = {}
    for name in ("rove", "ref"):
        m = RH.apply(_build(family, "eager", state), "rope") if name == "rove" else \
            _build(family, _ref_impl(family), state)
        m = m.train() if dtype == "autocast" else m.to(dtype).train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "autocast"):
            got[name] = _grads(m, part)
    assert got["rove"].keys() == want.keys() and len(want) > 0
    for n in want:
        ours, theirs = (_rel(got[i][n].float(), want[n]) for i in ("rove", "ref"))
        assert ours <= 2 * theirs + 1e-3, (n, ours, theirs)


# ---- half-precision models ----------------------------------------------------------------
HALF_FAMILIES = ["llama3", "qwen2", "gemma2", "phi3", "gptj"]  # gptj: apply() checks its sin table


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("family", HALF_FAMILIES)
def test_half_precision_models(family, dtype):
    """A bf16 / fp16 model through librove (q / k / v read as they are, fp32 accumulation,
    output in the model's dtype) is at least as close to the float32 model as transformers'
    own attention in that dtype: register, apply(mode="rope") and apply(mode="rove") (the
    last against the float64 RoVE reference), each compared with the same dtype's sdpa /
    eager error against its float32 reference."""
    ref = _build(family, _ref_impl(family))
    state = ref.state_dict()
    theirs = _build(family, _ref_impl(family), state).to(dtype)
    ours = _build(family, "rove", state).to(dtype)
    rope = RH.apply(_build(family, "eager", state).to(dtype), "rope")
    rove64 = _reference_model(family, state)
    rove = RH.apply(_build(family, "eager", state).to(dtype), "rove")
    ids, _ = _prompt(ref, check=False)
    calls = RH.stats["attention_calls"]
    with torch.no_grad():
        a, b = ref(ids).logits, theirs(ids).logits.float()
        c, d = ours(ids), rope(ids)
        e, f = rove64(ids, use_cache=False).logits, rove(ids).logits.float()
    assert RH.stats["attention_calls"] > calls
    assert c.logits.dtype == dtype and d.logits.dtype == dtype
    e_ref = _rel(b, a)  # transformers in dtype against float32: the bar
    assert 0 < e_ref < 0.2, f"{family} {dtype}: reference error {e_ref:.2e}"
    for name, got, want in (("register", c.logits.float(), a), ("rope", d.logits.float(), a),
                            ("rove", f, e)):
        err = _rel(got, want)
        assert err <= 1.5 * e_ref, f"{family} {dtype} {name}: {err:.2e} vs {dtype} sdpa {e_ref:.2e}"
    # a decode step through the cache: the half model's greedy tokens come out in its dtype
    with torch.no_grad():
        out = ours.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                            pad_token_id=0)
        out_r = rove.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                              pad_token_id=0)
    assert out.shape == out_r.shape == (1, PROMPT + 4)


def test_apply_refuses_unknown_families_and_dynamic_beyond_max():
    gpt2 = T.AutoModelForCausalLM.from_config(T.GPT2Config(n_layer=1, n_embd=64, n_head=2,
                                                           vocab_size=64))
    with pytest.raises(ValueError, match="gpt2"):
        RH.apply(gpt2)
    cfg = H.llama3()
    cfg.rope_parameters = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    cfg.max_position_embeddings = 32
    torch.manual_seed(0)
    model = RH.apply(T.AutoModelForCausalLM.from_config(cfg).eval(), "rope")
    with torch.no_grad():
        model(torch.randint(3, H.VOCAB, (1, 32)))  # positions < 32: exactly plain RoPE
        with pytest.raises(ValueError, match="dynamic"):
            model(torch.randint(3, H.VOCAB, (1, 33)))


def test_apply_dynamic_at_max_after_growth():
    """transformers' dynamic NTK keeps the frequencies of its longest forward until one
    shorter than max_position_embeddings resets them, so a forward of exactly
    max_position_embeddings tokens after a longer one (before apply, or one apply refused:
    the rotary module runs before the attention) is not plain RoPE: refused; after a
    shorter forward it is again, and matches the unmodified model."""
    cfg = H.llama3()
    cfg.rope_parameters = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0}
    cfg.max_position_embeddings = 16
    torch.manual_seed(0)
    base = T.AutoModelForCausalLM.from_config(cfg).eval()
    ref = T.AutoModelForCausalLM.from_config(cfg).eval()
    ref.load_state_dict(base.state_dict())
    ids = torch.randint(3, H.VOCAB, (1, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        base(ids)  # grown to 40 positions before apply
        model = RH.apply(base, "rope")
        with pytest.raises(ValueError, match="40"):
            model(ids[:, :16])
        model(ids[:, :15])  # resets the model's frequencies
        got, want = model(ids[:, :16]).logits, ref(ids[:, :16]).logits
        assert _rel(got, want) < 1e-5
        with pytest.raises(ValueError, match="dynamic"):
            model(ids[:, :17])  # refused, but its rotary module grew to 17
        with pytest.raises(ValueError, match="17"):
            model(ids[:, :16])


# ---- (f): decode does not re-rotate the past ----------------------------------------------
@pytest.mark.parametrize("family", ["llama3", "gemma3", "gptj", "phi3"])
@pytest.mark.parametrize("mode", ["rope", "rove"])
def test_decode_rotates_only_new_tokens(family, mode):
    base = _build(family, "eager")
    mod = RH.apply(_build(family, "eager", base.state_dict()), mode)
    n_layers = mod.config.num_hidden_layers
    ids = torch.randint(3, H.VOCAB, (2, PROMPT), generator=torch.Generator().manual_seed(3))
    before = dict(RH.stats)
    _generate(mod, ids)
    k_rows = RH.stats["k_rows"] - before["k_rows"]
    v_rows = RH.stats["v_rows"] - before["v_rows"]
    expect = n_layers * 2 * (PROMPT + NEW - 1)  # prompt once, then one token per step
    assert k_rows == expect
    assert v_rows == (expect if mode == "rove" else 0)
    if mode == "rope":  # the cache holds keys rotated into the global frame, as HF's does
        with torch.no_grad():
            c_ref = base(ids, use_cache=True).past_key_values
            c_mod = mod(ids, use_cache=True).past_key_values
        for l_ref, l_mod in zip(c_ref.layers, c_mod.layers):
            kr, km = l_ref.keys, l_mod.keys
            assert km.shape == kr.shape
            assert _rel(km, kr) <= 1e-5
            assert _rel(l_mod.values, l_ref.values) <= 1e-5  # layer 0: equal; later: 1e-7 off


def test_apply_remove_restores_the_model():
    base = _build("qwen2", "eager")
    mod = RH.apply(_build("qwen2", "eager", base.state_dict()), "rove")
    ids = torch.randint(3, H.VOCAB, (1, 16))
    RH.remove(mod)
    with torch.no_grad():
        assert _rel(mod(ids).logits, base(ids).logits) <= RTOL
    mod.set_attn_implementation("eager")
    RH.apply(mod, "rope")
    mod.set_attn_implementation("sdpa")  # changing it after apply is refused loudly
    with torch.no_grad(), pytest.raises(RuntimeError, match="after apply"):
        mod(ids)


@pytest.mark.parametrize("family", ["llama3", "mistral", "gemma2"])
def test_static_cache_generate(family):
    """StaticCache: unfilled slots are masked keys (padding), sliding static layers too."""
    base = _build(family, _ref_impl(family))
    ids, out_ref = _prompt(base)
    kw = dict(max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, pad_token_id=0)
    for mode in ("register", "rope", "rove"):
        if mode == "register":
            mod = _build(family, "rove", base.state_dict())
        else:
            mod = RH.apply(_build(family, "eager", base.state_dict()), mode)
        with torch.no_grad():
            static = mod.generate(ids, cache_implementation="static", **kw)
        assert torch.equal(static, out_ref if mode != "rove" else _generate(mod, ids)), mode


@pytest.mark.parametrize("family", ["llama3", "gptj", "phi3"])
@pytest.mark.parametrize("mode", ["rope", "rove"])
def test_positions_that_are_not_cache_indices(family, mode):
    """position_ids with a jump (mask by cache index, rotation by position, as transformers
    does with a cache): librove rotates q / the output in Python then (general path)."""
    base = _build(family, "eager")
    mod = RH.apply(_build(family, "eager", base.state_dict()), mode)
    ids = torch.randint(3, H.VOCAB, (1, 24), generator=torch.Generator().manual_seed(5))
    pos = torch.cat([torch.arange(12), torch.arange(12) + 50])[None]
    ref = base if mode == "rope" else _reference_model(family, base.state_dict())
    before = RH.stats["fallback_calls"]
    with torch.no_grad():
        a = ref(ids, position_ids=pos, use_cache=True).logits  # cache: no packed detection
        b = mod(ids, position_ids=pos, use_cache=True).logits
    assert RH.stats["fallback_calls"] > before
    assert _rel(b, a) <= RTOL, (family, mode, _rel(b, a))


@pytest.mark.parametrize("family", ["mistral", "gemma3", "gptj"])
@pytest.mark.parametrize("mode", ["register", "rope", "rove"])
def test_chunked_prefill_matches_one_pass(family, mode):
    """Prefill in chunks over the cache (q_len > 1, kv_len > q_len, sliding layers that have
    dropped their oldest keys) gives the logits of one pass."""
    base = _build(family, "eager")
    if mode == "register":
        mod = _build(family, "rove", base.state_dict())
    else:
        mod = RH.apply(_build(family, "eager", base.state_dict()), mode)
    ids = torch.randint(3, H.VOCAB, (2, PROMPT), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        whole = mod(ids).logits
        cache = T.DynamicCache(config=mod.config)
        parts = [mod(ids[:, a:b], cache=cache, use_cache=True).logits
                 for a, b in ((0, 13), (13, 30), (30, PROMPT))]
        if mode != "rove":
            assert _rel(whole, base(ids).logits) <= RTOL
    assert _rel(torch.cat(parts, 1), whole) <= RTOL, (family, mode)


# ---- DeepSeek-V3 (MLA) through register(): v_head_dim < qk_head_dim --------------------
def _deepseek_v3(layers=1):
    # DeepSeek-V3's attention shape, small: qk head 128 nope + 64 rope (interleaved, last),
    # v head 128, YaRN factor 40 with mscale = mscale_all_dim = 1 (softmax scale x 1.874)
    return T.DeepseekV3Config(**_DS_COMMON, num_hidden_layers=layers,
                              first_k_dense_replace=layers)


_DS_COMMON = dict(vocab_size=H.VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                  hidden_size=256, num_attention_heads=4, num_key_value_heads=4,
                  intermediate_size=128, moe_intermediate_size=32, q_lora_rank=None,
                  kv_lora_rank=32, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                  max_position_embeddings=163840, rope_interleave=True,
                  rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0,
                                   "mscale": 1.0, "mscale_all_dim": 1.0,
                                   "original_max_position_embeddings": 4096})


def test_register_deepseek_v3_mla():
    """rove's attention function pads v (128) to the qk head (192) and slices the output:
    exact without rotations. Module level with weights large enough that attention is far
    from uniform, then the whole model against sdpa."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention, DeepseekV3RotaryEmbedding)
    config = _deepseek_v3()
    torch.manual_seed(0)
    attn = DeepseekV3Attention(config, 0).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0, 0.2)
    x = torch.randn(1, 40, config.hidden_size)
    pos = torch.arange(40)[None]
    pe = DeepseekV3RotaryEmbedding(config)(x, pos)
    out = {}
    for impl in ("sdpa", "rove"):
        config._attn_implementation = impl
        calls = RH.stats["attention_calls"]
        with torch.no_grad():
            out[impl] = attn(x, position_embeddings=pe, attention_mask=None, position_ids=pos)[0]
        assert (RH.stats["attention_calls"] > calls) == (impl == "rove")
    assert _rel(out["rove"], out["sdpa"]) <= 1e-5
    torch.manual_seed(0)
    ref = T.AutoModelForCausalLM.from_config(_deepseek_v3(2), attn_implementation="sdpa").eval()
    mod = T.AutoModelForCausalLM.from_config(_deepseek_v3(2), attn_implementation="rove").eval()
    mod.load_state_dict(ref.state_dict())
    ids, _ = _prompt(ref, check=False)
    with torch.no_grad():
        assert _rel(mod(ids).logits, ref(ids).logits) <= RTOL


# ---- threads and torch.compile ---------------------------------------------------------------
@pytest.mark.parametrize("mode", ["rope", "rove"])
def test_apply_forwards_in_several_threads(mode):
    """One apply()ed model run from 4 threads at once, each with its own position_ids
    (and length): every forward equals the same forward run alone. The positions of the
    forward in flight are per thread (they were one slot per module: other threads'
    positions, wrong logits without an error, or 'attention ran outside the patched
    module forward')."""
    import threading
    ref = _build("llama3", "sdpa")
    model = RH.apply(_build("llama3", "eager", ref.state_dict()), mode)
    jobs = []
    for i in range(4):
        g = torch.Generator().manual_seed(50 + i)
        n = 12 + 3 * i
        ids = torch.randint(3, H.VOCAB, (1, n), generator=g)
        pos = torch.cat([torch.arange(n // 2), torch.arange(n - n // 2) + n // 2 + 60 * i])[None]
        jobs.append((ids, pos))
    with torch.no_grad():
        want = [model(ids, position_ids=pos, use_cache=False).logits for ids, pos in jobs]
    errors, bad = [], []

    def run(i):
        ids, pos = jobs[i]
        try:
            for _ in range(15):
                with torch.no_grad():
                    got = model(ids, position_ids=pos, use_cache=False).logits
                if not torch.equal(got, want[i]):
                    bad.append(i)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert not bad, f"{len(bad)} forwards gave other logits than alone"


@pytest.mark.parametrize("how", ["register", "apply"])
def test_compiled_model(how):
    """torch.compile of a model with attention "rove" (register) or apply()ed: librove's
    functions run eagerly between the compiled graphs, with cold plan caches (dynamo used
    to trace plan creation and fail its own guard on every call), and the logits equal
    the uncompiled model's."""
    from rove.attention import clear_plan_cache
    ref = _build("llama3", "sdpa")
    model = _build("llama3", "rove", ref.state_dict())
    if how == "apply":
        model = RH.apply(model, "rope")
    ids = [torch.randint(3, H.VOCAB, (1, n), generator=torch.Generator().manual_seed(n))
           for n in (16, 16, 24)]
    with torch.no_grad():
        want = [model(x).logits for x in ids]
    clear_plan_cache()
    RH._rotate_plans.clear()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager")
    calls = RH.stats["attention_calls"]
    with torch.no_grad():
        got = [compiled(x).logits for x in ids]
        r = ref(ids[0]).logits
    assert RH.stats["attention_calls"] >= calls + 3 * model.config.num_hidden_layers
    for g, w in zip(got, want):
        assert _rel(g, w) <= 1e-6
    assert _rel(want[0], r) <= RTOL


def test_applied_model_saves_and_loads():
    """torch.save / torch.load of a whole apply()ed model (its hooks and per-module state
    are pickled; the per-thread forward state is not): the loaded model gives the same
    logits."""
    import io
    model = RH.apply(_build("llama3", "eager"), "rove")
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    x = torch.randint(3, H.VOCAB, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.equal(loaded(x).logits, model(x).logits)


# ---- Llama-4 chunked attention ---------------------------------------------------------------
def test_llama4_chunked_prefill_and_its_decode_refused():
    """Llama-4's chunked attention (causal within chunks of attention_chunk_size) runs as
    packed sequences in a prefill from an empty cache: the logits equal eager's and the
    varlen path ran. A decode step over the cache (a chunk mask with an offset) is refused
    with an error that names chunked attention (it used to give the generic 'not a causal
    or bidirectional mask' message)."""
    cfg = T.Llama4TextConfig(vocab_size=H.VOCAB, hidden_size=128, intermediate_size=256,
                             intermediate_size_mlp=256, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                             attention_chunk_size=8, num_local_experts=2, pad_token_id=0,
                             bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    ref = T.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation="eager").eval()
    mod = T.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation="rove").eval()
    mod.load_state_dict(ref.state_dict())
    ids = torch.randint(3, H.VOCAB, (1, 20), generator=torch.Generator().manual_seed(3))
    calls = RH.stats["packed_calls"]
    with torch.no_grad():
        got, want = mod(ids, use_cache=False).logits, ref(ids, use_cache=False).logits
    assert RH.stats["packed_calls"] > calls
    assert _rel(got, want) <= 1e-5
    with torch.no_grad(), pytest.raises(ValueError, match="chunked attention"):
        mod.generate(ids, max_new_tokens=2, do_sample=False, pad_token_id=0)


def test_output_attentions_where_the_model_does_not_pass_it():
    """StableLM and Falcon do not hand output_attentions to the attention function, so
    rove.hf cannot refuse it there (README): the model's result equals sdpa's (no weights,
    no error), and eager, which computes weights itself, shows the request was real."""
    ids = torch.randint(3, 256, (1, 6))
    small = dict(vocab_size=256, num_hidden_layers=2, hidden_size=64, num_attention_heads=4)
    for cfg in (T.StableLmConfig(intermediate_size=128, num_key_value_heads=4, **small),
                T.FalconConfig(**small)):
        got = {}
        for impl in ("rove", "sdpa", "eager"):
            torch.manual_seed(0)
            model = T.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl).eval()
            with torch.no_grad():
                got[impl] = model(ids, output_attentions=True)
        assert all(a is None for a in got["rove"].attentions)
        none = {k: [a is None for a in got[k].attentions] for k in ("rove", "sdpa")}
        assert none["rove"] == none["sdpa"]
        assert _rel(got["rove"].logits, got["sdpa"].logits) <= RTOL
        assert any(a is not None for a in got["eager"].attentions)


def test_bidirectional_packed_sequences_equal_each_alone():
    """Gemma-3 with use_bidirectional_attention (EmbeddingGemma): packed sequences get a
    bidirectional-within-sequence mask from transformers; librove runs it as one
    non-causal rove.attention_varlen call (it was refused as "not packed sequences")."""
    cfg = T.Gemma3TextConfig(vocab_size=H.VOCAB, hidden_size=64, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             head_dim=16, use_bidirectional_attention=True, sliding_window=4,
                             max_position_embeddings=256)
    torch.manual_seed(0)
    eager = T.AutoModel.from_config(cfg, attn_implementation="eager").eval()
    RH.register()
    mod = T.AutoModel.from_config(cfg, attn_implementation="rove").eval()
    mod.load_state_dict(eager.state_dict())
    lens = (6, 11, 4)
    ids = torch.randint(3, H.VOCAB, (1, sum(lens)), generator=torch.Generator().manual_seed(3))
    pos = torch.cat([torch.arange(n) for n in lens])[None]
    calls = RH.stats["packed_calls"]
    with torch.no_grad():
        got = mod(ids, position_ids=pos, use_cache=False).last_hidden_state[0]
        assert RH.stats["packed_calls"] > calls
        ref = eager(ids, position_ids=pos, use_cache=False).last_hidden_state[0]
        assert _rel(got, ref) <= RTOL
        o = 0
        for n in lens:
            alone = mod(ids[:, o:o + n], use_cache=False).last_hidden_state[0]
            assert _rel(got[o:o + n], alone) <= RTOL, n
            o += n

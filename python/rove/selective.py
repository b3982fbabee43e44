# SPDX-License-Identifier: MIT
"""Selective RoPE: temperatures, angle accumulation with a carry, the phase network."""
from __future__ import annotations

import numpy as np

from . import _autograd, _lib, _params, _tensor
from .varlen import packed_cu


def selective_temperatures(n_pairs: int) -> np.ndarray:
    """temp_k = 1 / 500000^(2k/r) (float64 [n_pairs]), bit for bit rove_rope_inv_freq's
    frequencies for theta 500000."""
    n = _params.positive_int("n_pairs", n_pairs)
    t = np.empty(n, dtype=np.float64)
    _lib.check("rove_selective_temperatures",
               _lib.lib.rove_selective_temperatures(n, t.__array_interface__["data"][0]))
    return t


def _batched(x, name, dtype, ndim4=True):
    """(contiguous obj, ptr, 4-D shape, was 3-D); an empty axis is refused by name."""
    v = _tensor.view(x, name, dtype)
    if len(v.shape) not in (3, 4):
        raise ValueError(f"{name} must be 4-D [batch, seq, heads, n] (or 3-D), got {v.shape}")
    if 0 in tuple(v.shape):
        raise ValueError(f"{name} has an empty axis (shape {tuple(v.shape)})")
    obj, ptr = _tensor.contiguous(x, name, dtype)
    shape = tuple(v.shape) if len(v.shape) == 4 else (1,) + tuple(v.shape)
    return obj, ptr, shape, len(v.shape) == 3


def selective_angles(phi, temp=None, carry=None, cu_seqlens=None):
    """(angles, carry_out): for each row b, head h, pair k, sequentially over t,
    c += phi[b, t, h, k] (double); angles[b, t, h, k] = temp[k] * c, from
    c = carry[b, h, k] (0 when carry is None).

    phi: float32 [batch, seq, heads, n_pairs] (3-D without batch), finite. temp: None
    (selective_temperatures) or float64 [n_pairs]. carry: None or float64 [batch, heads,
    n_pairs]. Returns float64 angles shaped like phi and the carry for the next chunk;
    chunks that pass the carry on give angles bit-identical to one call.
    cu_seqlens: None, or packed sequences of one row (flash-linear-attention's varlen,
    as rove.gla's): an integer array [N + 1] of cumulative lengths from 0 to seq; each
    sequence sums from its own carry (carry and carry_out [N, heads, n_pairs]) and its
    angles are those of a call on it alone, bit for bit.
    Differentiable for torch tensors that require grad (phi float32, temp / carry float64):
    the backward is rove_selective_angles_backward (packed: its packed form).
    """
    if not _tensor.is_torch(phi) and any(_tensor.is_torch(x) and x.requires_grad
                                         for x in (temp, carry)) and \
            _tensor._torch().is_grad_enabled():
        raise TypeError("phi must be a torch tensor when temp or carry requires grad "
                        "(gradients are recorded for torch tensors only)")
    if _autograd.needs_grad(phi, temp, carry):  # torch autograd or torch.func
        from ._autograd import selective_angles as differentiable
        return differentiable(phi, temp, carry, cu_seqlens)
    return _angles(phi, temp, carry, cu_seqlens)


def _angles(phi, temp, carry, cu_seqlens, cu=None):
    """selective_angles without autograd (cu: cu_seqlens already checked, or None)."""
    p, pp, (B, T, H, P), flat = _batched(phi, "phi", np.float32)
    if cu is None:
        cu = packed_cu(cu_seqlens, B, T, "phi")
    tmp = tp = None
    if temp is not None:
        tmp, tp = _tensor.contiguous(temp, "temp", np.float64, (P,))
    cshape = (cu.shape[0] - 1, H, P) if cu is not None else (H, P) if flat else (B, H, P)
    cin = cp = None
    if carry is not None:
        cin, cp = _tensor.contiguous(carry, "carry", np.float64, cshape)
    torch_kind = _tensor.is_torch(p)
    angles, ap = _tensor.empty(torch_kind, (B, T, H, P), np.float64)
    cout, cop = _tensor.empty(torch_kind, cshape, np.float64)
    if cu is not None:
        st = _lib.lib.rove_selective_angles_packed(cu.shape[0] - 1, cu.ctypes.data, H, P, pp,
                                                   tp, cp, cop, ap)
    else:
        st = _lib.lib.rove_selective_angles(B, T, H, P, pp, tp, cp, cop, ap)
    if st == _lib.ERR_INVALID_ARGUMENT:  # librove refuses non-finite inputs: say which (a
        # check here before every call cost half of a decode step's call)
        for name, x in (("phi", p), ("temp", tmp), ("carry", cin)):
            if x is not None and not np.all(np.isfinite(x.numpy() if _tensor.is_torch(x) else x)):
                raise ValueError(f"{name} has non-finite values")
    del tmp, cin
    _lib.check("rove_selective_angles", st)
    return (angles[0] if flat else angles), cout


# rove_phase_projection / rove_phase_activation / rove_phase_gate (include/rove.h), by the
# reference's names (phi_parametrization, conv_act, gate_parametrization).
PROJECTIONS = {"low-rank": 0, "full-rank": 1}
ACTIVATIONS = {None: 0, "silu": 1, "swish": 1}
GATES = {None: 0, "standard": 1, "low-rank": 2, "gla": 3}
MAX_CONV_WIDTH = 64  # ROVE_PHASE_MAX_CONV_WIDTH


def _weight(x, name, shape):
    """A float32 C-contiguous copy of exactly ``shape`` (None stays None)."""
    if x is None:
        return None
    v = _tensor.view(x, name)  # float32 only
    if tuple(v.shape) != tuple(shape):
        raise ValueError(f"SelectivePhaseWeights.{name} has shape {tuple(v.shape)}, "
                         f"expected {tuple(shape)}")
    a = np.array(x.detach().numpy() if v.torch else x, dtype=np.float32, order="C", copy=True)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"SelectivePhaseWeights.{name} has non-finite values")
    return a


def _shape_of(x, name, ndim):
    if x is None:
        raise ValueError(f"SelectivePhaseWeights: {name} is required")
    shape = tuple(_tensor.view(x, name).shape)
    if len(shape) != ndim:
        raise ValueError(f"SelectivePhaseWeights.{name} must be {ndim}-D, got {shape}")
    return shape


_POINTERS = ("proj_down", "proj_up", "proj_w", "proj_gain", "conv_w", "conv_b", "exp_bias",
             "gate_down", "gate_w", "gate_b")


class SelectivePhaseWeights:
    """Weights and options of the Selective RoPE phase network (rove_selective_phase_weights,
    the reference's SelectiveRoPE module), for n_heads heads and n_pairs rotation pairs
    over an input of d = n_heads * in_dim features (the layer input). float32, copied at
    construction (later changes to the originals are not seen). Matrices in nn.Linear
    layout [out, in]:

    - projection "low-rank" (the reference default): proj_down [rank, d], proj_up
      [n_heads * n_pairs, rank]; "full-rank": proj_w [n_heads, n_pairs, in_dim] (the
      reference's ChunkedLinear weight [n_heads, in_dim, n_pairs] transposed) and
      proj_gain [n_heads] or None (= 1). The projection is the one whose weights are given.
    - conv_w [n_heads, n_pairs, width] (phi_conv1d.weight reshaped), conv_act None or
      "silu", conv_b [n_heads, n_pairs] or None (added before the activation; not in the
      reference); skip_conv=True replaces the conv by a first difference (no conv_w).
    - exp_bias [n_heads, n_pairs] or None: exp(exp_bias) added after the activation (the
      reference's phi_bias with use_bias).
    - gate None, "standard" (gate_w [n_heads, d]), "low-rank" (gate_down [rank_g, d],
      gate_w [n_heads, rank_g]) or "gla" (gate_down [rank_g, d], gate_w
      [n_heads * n_pairs, rank_g]); gate_b [n_heads] (or [n_heads * n_pairs] for "gla") or
      None (= 0).
    - norm_eps: u = x_h / sqrt(||x_h||^2 + norm_eps) per head (fla's l2_norm), 1e-6.

    A weight the selected parts do not use is an error, not ignored.
    ``from_reference_state_dict`` reads the reference module's parameters.
    """

    def __init__(self, n_heads: int, n_pairs: int, *, proj_down=None, proj_up=None,
                 proj_w=None, proj_gain=None, conv_w=None, conv_act=None, conv_b=None,
                 skip_conv: bool = False, exp_bias=None, gate=None, gate_down=None,
                 gate_w=None, gate_b=None, norm_eps: float = 1e-6):
        H = _params.positive_int("n_heads", n_heads)
        P = _params.positive_int("n_pairs", n_pairs)
        if conv_act not in ACTIVATIONS:
            raise ValueError(f"conv_act must be None or 'silu', not {conv_act!r}")
        if gate not in GATES:
            raise ValueError(f"gate must be None, 'standard', 'low-rank' or 'gla', not {gate!r}")
        if not isinstance(skip_conv, (bool, np.bool_)):
            raise TypeError("skip_conv must be a bool")
        eps = float(norm_eps)
        if not (np.isfinite(eps) and eps > 0 and np.float32(eps) > 0):
            raise ValueError(f"norm_eps must be finite and > 0 (got {norm_eps})")
        low = proj_down is not None or proj_up is not None
        if low == (proj_w is not None or proj_gain is not None):
            raise ValueError("give either proj_down and proj_up (low-rank) or proj_w "
                             "(full-rank, with an optional proj_gain)")
        if low:
            rank, d = _shape_of(proj_down, "proj_down", 2)
            if d % H:
                raise ValueError(f"proj_down has {d} inputs, not a multiple of n_heads={H}")
            D = d // H
            proj_up_shape = (H * P, rank)
        else:
            _, _, D = _shape_of(proj_w, "proj_w", 3)
            d, rank = H * D, None
        if skip_conv:
            if conv_w is not None or conv_b is not None or conv_act is not None:
                raise ValueError("skip_conv takes no conv_w, conv_b or conv_act")
            width = None
        else:
            width = _shape_of(conv_w, "conv_w", 3)[2]
            if not 1 <= width <= MAX_CONV_WIDTH:
                raise ValueError(f"conv width must be 1..{MAX_CONV_WIDTH}, got {width}")
        grank = None
        if gate is None:
            if gate_down is not None or gate_w is not None or gate_b is not None:
                raise ValueError("gate weights given without a gate")
        elif gate == "standard":
            if gate_down is not None:
                raise ValueError("the standard gate takes no gate_down")
            gw_shape = (H, d)
        else:
            grank = _shape_of(gate_down, "gate_down", 2)[0]
            gw_shape = (H if gate == "low-rank" else H * P, grank)
        put = self.__dict__.__setitem__
        put("n_heads", H), put("n_pairs", P), put("in_dim", D), put("d", d)
        put("projection", "low-rank" if low else "full-rank"), put("proj_rank", rank)
        put("conv_width", width), put("conv_act", "silu" if conv_act else None)
        put("skip_conv", bool(skip_conv)), put("gate", gate), put("gate_rank", grank)
        put("norm_eps", eps)
        put("proj_down", _weight(proj_down, "proj_down", (rank, d)) if low else None)
        put("proj_up", _weight(proj_up, "proj_up", proj_up_shape) if low else None)
        put("proj_w", None if low else _weight(proj_w, "proj_w", (H, P, D)))
        put("proj_gain", None if low else _weight(proj_gain, "proj_gain", (H,)))
        put("conv_w", None if skip_conv else _weight(conv_w, "conv_w", (H, P, width)))
        put("conv_b", _weight(conv_b, "conv_b", (H, P)))
        put("exp_bias", _weight(exp_bias, "exp_bias", (H, P)))
        put("gate_down", None if gate in (None, "standard")
            else _weight(gate_down, "gate_down", (grank, d)))
        put("gate_w", None if gate is None else _weight(gate_w, "gate_w", gw_shape))
        put("gate_b", None if gate is None else _weight(
            gate_b, "gate_b", (H * P,) if gate == "gla" else (H,)))
        if gate is not None and self.gate_w is None:
            raise ValueError(f"the {gate} gate needs gate_w")
        self._check()

    def __setattr__(self, name, value):
        raise AttributeError("SelectivePhaseWeights is immutable")

    @property
    def state_len(self) -> int:
        """Conv state floats per head and pair (1 with skip_conv, else width - 1)."""
        return int(_lib.lib.rove_selective_phase_state_len(self._c()))

    def new_state(self, batch: int) -> np.ndarray:
        """A fresh conv state, zeros float32 [batch, n_heads, n_pairs, state_len]."""
        return np.zeros((_params.positive_int("batch", batch), self.n_heads, self.n_pairs,
                         self.state_len), dtype=np.float32)

    def _c(self):
        c = _lib.SelectivePhaseWeights()
        _lib.lib.rove_selective_phase_weights_init(c, self.n_heads, self.in_dim, self.n_pairs)
        c.norm_eps = self.norm_eps
        c.projection = PROJECTIONS[self.projection]
        if self.proj_rank is not None:
            c.proj_rank = self.proj_rank
        c.skip_conv = int(self.skip_conv)
        if self.conv_width is not None:
            c.conv_width = self.conv_width
        c.conv_act = ACTIVATIONS[self.conv_act]
        c.gate = GATES[self.gate]
        if self.gate_rank is not None:
            c.gate_rank = self.gate_rank
        for name in _POINTERS:
            a = getattr(self, name)
            setattr(c, name, None if a is None else a.__array_interface__["data"][0])
        return c

    def _check(self):
        """Let librove validate the options once (one token of zeros)."""
        x = np.zeros((1, self.d), np.float32)
        phi = np.empty((1, self.n_heads, self.n_pairs), np.float32)
        _lib.check("rove_selective_phase", _lib.lib.rove_selective_phase(
            self._c(), 1, 1, x.__array_interface__["data"][0], 0, None,
            phi.__array_interface__["data"][0]))

    @classmethod
    def from_reference_state_dict(cls, state_dict, num_heads: int, *, conv_act=None,
                                  norm_eps: float = 1e-6):
        """Weights of a reference SelectiveRoPE module from its ``state_dict()``: the
        projection from phi_proj.* (low-rank Sequential or full-rank ChunkedLinear), the
        conv from phi_conv1d.weight (absent: skip_conv), exp_bias from phi_bias (use_bias),
        the gate from phase_gate_proj.* (use_gate: one Linear is "standard"; a Sequential
        is "gla" when it has one output per head and pair, else "low-rank"). The module's
        conv_act is not in its state dict: pass it; without a conv (skip_conv) the
        reference applies no activation whatever conv_act says, and neither does this. Its
        temperature buffer is what selective_angles takes as temp (as float64). Tensors are
        read as float32."""
        H = _params.positive_int("num_heads", num_heads)
        sd = {k: np.ascontiguousarray(v.detach().cpu().float().numpy() if hasattr(v, "detach")
                                      else v, np.float32) for k, v in state_dict.items()}
        known = {"phi_proj.0.weight", "phi_proj.1.weight", "phi_proj.weight",
                 "phi_proj.scalar", "phi_conv1d.weight", "phi_bias", "temperature",
                 "phase_gate_proj.weight", "phase_gate_proj.bias", "phase_gate_proj.0.weight",
                 "phase_gate_proj.1.weight", "phase_gate_proj.1.bias"}
        unknown = sorted(set(sd) - known)
        if unknown:
            raise ValueError(f"not a SelectiveRoPE state dict: unknown keys {unknown}")
        kw = {"conv_act": conv_act, "norm_eps": norm_eps}
        if "phi_proj.weight" in sd:  # ChunkedLinear [H, in, P]
            kw["proj_w"] = np.ascontiguousarray(np.swapaxes(sd["phi_proj.weight"], -1, -2))
            kw["proj_gain"] = sd.get("phi_proj.scalar")
            P = _shape_of(kw["proj_w"], "phi_proj.weight", 3)[1]
        else:
            kw["proj_down"], kw["proj_up"] = sd.get("phi_proj.0.weight"), sd.get("phi_proj.1.weight")
            P = _shape_of(kw["proj_up"], "phi_proj.1.weight", 2)[0] // H
        if "phi_conv1d.weight" in sd:
            kw["conv_w"] = sd["phi_conv1d.weight"].reshape(H, P, -1)  # from [H*P, 1, W]
        else:
            kw["skip_conv"], kw["conv_act"] = True, None
        if "phi_bias" in sd:
            kw["exp_bias"] = sd["phi_bias"].reshape(H, P)
        if "phase_gate_proj.weight" in sd:
            kw.update(gate="standard", gate_w=sd["phase_gate_proj.weight"],
                      gate_b=sd.get("phase_gate_proj.bias"))
        elif "phase_gate_proj.0.weight" in sd:
            gw = sd["phase_gate_proj.1.weight"] if "phase_gate_proj.1.weight" in sd else None
            per_pair = gw is not None and gw.shape[0] == H * P and P > 1
            kw.update(gate="gla" if per_pair else "low-rank",
                      gate_down=sd["phase_gate_proj.0.weight"], gate_w=gw,
                      gate_b=sd.get("phase_gate_proj.1.bias"))
        return cls(H, P, **kw)


def selective_phase(x, weights: SelectivePhaseWeights, conv_state=None, cu_seqlens=None):
    """Increments phi float32 [batch, seq, n_heads, n_pairs] from the layer input x
    float32 [batch, seq, d] (bfloat16 / float16: widened to a float32 copy first) (2-D
    [seq, d] without batch gives phi [seq, n_heads, n_pairs];
    d = n_heads * in_dim, features of a token dense, any token stride), as the reference's
    SelectiveRoPE computes phi before its cumulative sum.

    conv_state: None (a fresh sequence, no state kept) or a float32 C-contiguous
    [batch, n_heads, n_pairs, weights.state_len] array (weights.new_state(batch) to start;
    for a 2-D x without the batch axis, [n_heads, n_pairs, state_len]:
    weights.new_state(1)[0]): read as the history before token 0 and updated in place, so
    a sequence fed in pieces gives the same phi as one call, bit for bit.

    cu_seqlens: None, or packed sequences of one row (as rove.gla's and
    rove.selective_angles'): x [1, seq, d] or [seq, d], an integer array [N + 1] of
    cumulative lengths from 0 to seq. Each sequence's causal conv runs from its own
    history (conv_state [N, n_heads, n_pairs, state_len], or None: every sequence fresh),
    and its phi is that of a call on it alone, bit for bit.
    """
    if not isinstance(weights, SelectivePhaseWeights):
        raise TypeError("weights must be a rove.SelectivePhaseWeights")
    x = _tensor.widened(x)  # a half-precision model's hidden states: a float32 copy
    v = _tensor.view(x, "x")
    ndim = len(v.shape)
    if ndim not in (2, 3):
        raise ValueError(f"x must be [batch, seq, d] (or 2-D [seq, d]), got {tuple(v.shape)}")
    shape = ((1,) if ndim == 2 else ()) + tuple(v.shape)
    strides = ((0,) if ndim == 2 else ()) + tuple(v.strides)
    B, T, d = shape
    if d != weights.d:
        raise ValueError(f"x has {d} features per token; the weights take n_heads * in_dim "
                         f"= {weights.d}")
    if B <= 0 or T <= 0:
        raise ValueError(f"x has an empty axis (shape {tuple(v.shape)})")
    v4 = _tensor.View(v.obj, v.torch, v.ptr, (B, T, 1, d), strides[:2] + (d,) + strides[2:])
    ts = _tensor.token_stride(v4.shape, v4.strides)
    if ts is None:
        v4 = _tensor.dense_copy(_tensor.View(v.obj[None] if ndim == 2 else v.obj, v.torch, 0,
                                             (), ()), (0, 1, 2))
        ts = d
    cu = packed_cu(cu_seqlens, B, T, "x")
    cs = csp = None
    if conv_state is not None:
        S = weights.state_len
        cshape = (cu.shape[0] - 1, weights.n_heads, weights.n_pairs, S) if cu is not None \
            else (B, weights.n_heads, weights.n_pairs, S) if ndim == 3 else \
            (weights.n_heads, weights.n_pairs, S)
        cs, csp = _tensor.contiguous(conv_state, "conv_state", np.float32, cshape, writable=True)
    phi, pp = _tensor.empty(v.torch, (B, T, weights.n_heads, weights.n_pairs))
    if cu is not None:
        st = _lib.lib.rove_selective_phase_packed(weights._c(), cu.shape[0] - 1, cu.ctypes.data,
                                                  v4.ptr, ts, csp, pp)
    else:
        st = _lib.lib.rove_selective_phase(weights._c(), B, T, v4.ptr, ts, csp, pp)
    del v, v4
    _lib.check("rove_selective_phase", st)
    _tensor.mark_written(cs)  # the convolution state, updated in place
    return phi[0] if ndim == 2 else phi

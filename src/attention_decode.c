/* Streaming decode: attention when each (batch, head) has a single query tile.
 *
 * Pre-packing K and V (phase 1) would write and re-read every key once more for nothing:
 * each key tile is used by one query tile per head. Here a task owns one (batch, kv head,
 * key split): it rotates each K/V tile into per-thread scratch (L1/L2) right before use,
 * and runs it against the query tiles of every head of the GQA group, so each KV head is
 * still rotated once. Results go to the partial buffer and phase 3 merges the splits. */
#include <string.h>

#include "attention_internal.h"

void rove_fwd_stream_task(int64_t task, int tid, void *vctx) {
  rove_fwd *f = vctx;
  const rove_plan *p = f->p;
  const rove_kernels *kn = p->kern;
  const int32_t d = p->cfg.head_dim, tq = kn->tile_q, tk = kn->tile_kv;
  const int64_t H = p->cfg.n_heads, hkv = p->cfg.n_kv_heads, group = H / hkv;
  const int64_t split = task % f->n_splits, b = task / f->n_splits / hkv, kvh = task / f->n_splits % hkv;
  const int64_t kt0 = f->n_kt * split / f->n_splits, kt1 = f->n_kt * (split + 1) / f->n_splits;
  float *qbufs = f->scratch + (int64_t)tid * f->scratch_floats;
  float *s = qbufs + group * tq * d, *kbuf = s + (int64_t)tq * tk, *vbuf = kbuf + (int64_t)tk * d;

  /* Head g of the group accumulates into its partial (o, m, l) for this split. */
  float *part0 = f->partial + ((b * H + kvh * group) * f->n_splits + split) * f->partial_floats;
  const int64_t part_step = f->n_splits * f->partial_floats;
  for (int64_t g = 0; g < group; g++) {
    const rove_qtile q = rove_fwd_qtile(f, b * H + kvh * group + g);
    float *o = part0 + g * part_step;
    rove_fwd_begin(f, &q, qbufs + g * tq * d, o, o + tq * d, o + tq * d + tq);
  }
  const int32_t *qpos = f->qpos + b * f->qpos_bstride;
  int32_t qmin, qmax, kmin, kmax;
  rove_pos_range(qpos, f->q_len, &qmin, &qmax);
  rove_tile_args t = {.d = d, .q_pos = qpos, .nq = (int32_t)f->q_len, .causal = p->cfg.causal,
                      .window = p->cfg.window, .softcap = p->cfg.softcap, .scratch = s,
                      .k = kbuf, .v = vbuf};
  for (int64_t kt = kt0; kt < kt1; kt++) {
    const int64_t j0 = kt * tk, row0 = b * f->kv_brows + j0;
    const int32_t nk = (int32_t)(f->kv_len - j0 < tk ? f->kv_len - j0 : tk);
    t.k_pos = f->kpos + b * f->kpos_bstride + j0;
    rove_pos_range(t.k_pos, nk, &kmin, &kmax);
    const int c = rove_classify(qmin, qmax, kmin, kmax, p->cfg.causal, p->cfg.window);
    if (c == 0) continue;
    rove_rot rk = rove_fwd_krot(f, b, j0, p->cfg.rotate & ROVE_ROTATE_K);
    rove_rot rv = rove_fwd_krot(f, b, j0, p->cfg.rotate & ROVE_ROTATE_V);
    kn->pack_k(kbuf, f->k + row0 * f->ks + kvh * d, f->ks, nk, d, &rk, f->k_mul);
    kn->rotate(vbuf, d, f->v + row0 * f->vs + kvh * d, f->vs, nk, d, &rv, 1.0f, 1.0f, 0);
    if (nk < tk) memset(vbuf + (int64_t)nk * d, 0, sizeof(float) * (size_t)(tk - nk) * (size_t)d);
    t.nk = nk;
    t.mask = c == 2;
    for (int64_t g = 0; g < group; g++) {
      float *o = part0 + g * part_step;
      t.q = qbufs + g * tq * d;
      t.o = o;
      t.m = o + tq * d;
      t.l = o + tq * d + tq;
      kn->attn_tile(&t);
    }
  }
}

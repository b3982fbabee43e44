/* Streaming decode: attention when each (batch, head) has a single query tile.
 *
 * Pre-packing K and V (phase 1) would write and re-read every key once more for nothing:
 * each key tile is used by one query tile per head. Here a task owns one (batch, key
 * split) and walks its key tiles; for each tile it rotates K and V of every KV head into
 * per-thread scratch right before use and runs them against the query tiles of that head's
 * GQA group, so each KV head is still rotated once. Taking all heads of a block of tokens
 * together touches the [token][head][dim] rows of that block in a short window (one head
 * per task would read 4-cache-line pieces at the stride of a whole token row across the
 * whole sequence). Results go to the partial buffer; phase 3 merges the splits.
 * Still slow: 1 query x 4096 keys x 12 x 64 reads 24 MB in ~2.5 ms on one core where a
 * plain read takes 0.65 ms (BENCHMARKS.md); the per-tile repacking of K and copy of V
 * dominate, and a cache stored in the packed layout would avoid both. */
#include <string.h>

#include "attention_internal.h"

/* Begin the query tile of every head of batch b; returns head 0's partial (o, m, l). */
static float *begin_heads(const rove_fwd *f, int64_t b, int64_t split, float *qbufs) {
  const int64_t H = f->p->cfg.n_heads, d = f->p->cfg.head_dim, tq = f->p->kern->tile_q;
  const int64_t step = f->n_splits * f->partial_floats;
  float *part0 = f->partial + (b * H * f->n_splits + split) * f->partial_floats;
  for (int64_t h = 0; h < H; h++) {
    const rove_qtile q = rove_fwd_qtile(f, b * H + h);
    float *o = part0 + h * step;
    rove_fwd_begin(f, &q, qbufs + h * tq * d, o, o + tq * d, o + tq * d + tq);
  }
  return part0;
}

void rove_fwd_stream_task(int64_t task, int tid, void *vctx) {
  rove_fwd *f = vctx;
  const rove_plan *p = f->p;
  const rove_kernels *kn = p->kern;
  const int32_t d = p->cfg.head_dim, tq = kn->tile_q, tk = kn->tile_kv;
  const int64_t H = p->cfg.n_heads, hkv = p->cfg.n_kv_heads, group = H / hkv;
  const int64_t split = task % f->n_splits, b = task / f->n_splits;
  const int64_t kt0 = f->n_kt * split / f->n_splits, kt1 = f->n_kt * (split + 1) / f->n_splits;
  float *qbufs = f->scratch + (int64_t)tid * f->scratch_floats;
  float *s = qbufs + H * tq * d, *kbuf = s + (int64_t)tq * tk, *vbuf = kbuf + (int64_t)tk * d;
  float *part0 = begin_heads(f, b, split, qbufs);
  const int64_t step = f->n_splits * f->partial_floats;
  const int32_t *qpos = f->qpos + b * f->qpos_bstride;
  int32_t qmin, qmax, kmin, kmax;
  rove_pos_range(qpos, f->q_len, &qmin, &qmax);
  rove_tile_args t = {.d = d, .q_pos = qpos, .nq = (int32_t)f->q_len, .causal = p->cfg.causal,
                      .window = p->cfg.window, .softcap = p->cfg.softcap, .scratch = s,
                      .k = kbuf, .v = vbuf};
  for (int64_t kt = kt0; kt < kt1; kt++) {
    const int64_t j0 = kt * tk;
    const int32_t nk = (int32_t)(f->kv_len - j0 < tk ? f->kv_len - j0 : tk);
    t.k_pos = f->kpos + b * f->kpos_bstride + j0;
    rove_pos_range(t.k_pos, nk, &kmin, &kmax);
    const int c = rove_classify(qmin, qmax, kmin, kmax, p->cfg.causal, p->cfg.window);
    if (c == 0) continue;
    t.nk = nk;
    t.mask = c == 2;
    if (nk < tk) memset(vbuf + (int64_t)nk * d, 0, sizeof(float) * (size_t)(tk - nk) * (size_t)d);
    for (int64_t kvh = 0; kvh < hkv; kvh++) {
      const rove_rot rk = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_K);
      const rove_rot rv = rove_fwd_krot(f, b, kvh, j0, p->cfg.rotate & ROVE_ROTATE_V);
      kn->pack_k(kbuf, rove_fwd_krow(f, b, kvh, j0), f->ks, nk, d, &rk, f->k_mul);
      kn->rotate(vbuf, d, rove_fwd_vrow(f, b, kvh, j0), f->vs, nk, d, &rv, 1.0f, 1.0f, 0);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; h++) {
        float *o = part0 + h * step;
        t.q = qbufs + h * tq * d;
        t.o = o;
        t.m = o + tq * d;
        t.l = o + tq * d + tq;
        kn->attn_tile(&t);
      }
    }
  }
}

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rove_bench JSON -> gnuplot data files and markdown tables (stdlib only).

    python3 bench/report.py RESULTS.json [--data-dir DIR] [--mem MEM.tsv] [--markdown OUT.md]

Reads the Google Benchmark JSON written by rove_bench (--benchmark_out=FILE
--benchmark_out_format=json). With repetitions, the "median" aggregate of each case is
used (or the median of its runs). smoke/... cases are ignored. --data-dir writes the
*.dat files and vars.gp that the bench/plots/*.gp scripts read; the markdown tables go to
stdout (and to --markdown OUT.md).
"""
import argparse
import json
import math
import os
import statistics
import sys

ISA_ORDER = ["avx512", "avx2", "neon", "scalar"]
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def isa_rank(isa):
    return ISA_ORDER.index(isa) if isa in ISA_ORDER else len(ISA_ORDER)


def parse_name(name):
    """'prefill/avx512/n:256/d:64/.../real_time' -> ('prefill', 'avx512', {'n': 256, ...})."""
    parts = [p for p in name.split("/") if p not in ("real_time", "manual_time")]
    params = {}
    rest = []
    for p in parts:
        if ":" in p:
            k, v = p.split(":", 1)
            try:
                params[k] = int(v)
            except ValueError:
                params[k] = v
        else:
            rest.append(p)
    kind = rest[0] if rest else ""
    sub = rest[1] if len(rest) > 1 else ""
    return kind, sub, params


def merge_runs(runs):
    """One record from several repetitions: the median of every numeric field."""
    rec = dict(runs[0])
    if len(runs) > 1:
        for k, v in runs[0].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                rec[k] = statistics.median(r[k] for r in runs if k in r)
    return rec


def load(path):
    with open(path) as f:
        doc = json.load(f)
    groups = {}
    for b in doc.get("benchmarks", []):
        name = b.get("run_name", b.get("name", ""))
        if name.startswith("smoke/") or b.get("error_occurred"):
            continue
        g = groups.setdefault(name, {"median": None, "runs": []})
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                g["median"] = b
        else:
            g["runs"].append(b)
    cases = []
    for name, g in groups.items():
        rec = g["median"] or (merge_runs(g["runs"]) if g["runs"] else None)
        if rec is None:
            continue
        kind, sub, params = parse_name(name)
        rec = dict(rec)
        rec["time_ms"] = rec.get("real_time", 0.0) * TO_MS.get(rec.get("time_unit", "ns"), 1e-6)
        cases.append({"kind": kind, "sub": sub, "p": params, "b": rec})
    return doc.get("context", {}), cases


def select(cases, kind, **want):
    out = [c for c in cases if c["kind"] == kind
           and all(c["p"].get(k) == v for k, v in want.items())]
    return out


def shape_text(p):
    heads = "%dx%d" % (p["h"], p["d"])
    attn = "MHA" if p["h"] == p["kvh"] else "GQA %d:%d" % (p["h"], p["kvh"])
    return "%s %s" % (heads, attn)


def fmt(x, digits=2):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.*f" % (digits, x)


def table(header, rows, align=None):
    align = align or ["---:"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def peaks(ctx):
    out = {}
    for k, v in ctx.items():
        if k.startswith("peak_gflops_"):
            try:
                out[k[len("peak_gflops_"):]] = float(v)
            except ValueError:
                pass
    return out


def machine_line(ctx):
    caches = ctx.get("caches", [])
    l3 = [c for c in caches if c.get("level") == 3]
    cache = (", L3 %d MiB" % (l3[0]["size"] // (1 << 20))) if l3 else ""
    pk = peaks(ctx)
    pk_text = ", ".join("%s %.0f" % (k, pk[k]) for k in sorted(pk, key=isa_rank))
    line = ("%s, %s CPUs at %s MHz%s; single-core fp32 FMA peak (GFLOP/s): %s; librove %s "
            "(ISAs %s); run %s" % (ctx.get("cpu_model", "unknown CPU"), ctx.get("num_cpus", "?"),
                                   ctx.get("mhz_per_cpu", "?"), cache, pk_text or "not measured",
                                   ctx.get("rove_version", "?"), ctx.get("rove_isas", "?"),
                                   ctx.get("date", "?")))
    load = ctx.get("load_avg") or []
    if load:
        line += ("; 1-minute load average at start %.2f (it includes the build that "
                 "scripts/bench.sh runs just before)" % load[0])
        cpus = ctx.get("num_cpus") or 1
        if load[0] > 0.75 * cpus:
            line += (" (**the machine was busy**: other processes share the cores, which "
                     "distorts above all the multi-threaded cases)")
    return line


def prefill_tables(cases):
    out = []
    pre = [c for c in cases if c["kind"] == "prefill" and c["p"].get("causal") == 1]
    shapes = sorted({(c["p"]["d"], c["p"]["h"], c["p"]["kvh"]) for c in pre},
                    key=lambda s: (s[0], -s[2]))
    header = ["shape", "threads", "ISA", "RoVE ms", "RoPE ms", "ratio", "GFLOP/s",
              "% of peak"]
    align = ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:"]
    for d, h, kvh in shapes:
        rows = []
        sel = [c for c in pre if (c["p"]["d"], c["p"]["h"], c["p"]["kvh"]) == (d, h, kvh)]
        sel.sort(key=lambda c: (c["p"]["n"], c["p"]["thr"], isa_rank(c["sub"])))
        for c in sel:
            b, p = c["b"], c["p"]
            rows.append(["n=%d %s causal" % (p["n"], shape_text(p)), p["thr"], c["sub"],
                         fmt(b.get("rove_ms")), fmt(b.get("rope_ms")),
                         "%.3f" % b.get("ratio", float("nan")), fmt(b.get("gflops"), 1),
                         fmt(b.get("pct_peak"), 1)])
        out.append("### Prefill, %s, causal\n\n%s" % (shape_text({"h": h, "d": d, "kvh": kvh}),
                                                      table(header, rows, align)))
    return out


def causal_vs_full(cases):
    full = [c for c in cases if c["kind"] == "prefill" and c["p"].get("causal") == 0]
    rows = []
    for c in sorted(full, key=lambda c: (isa_rank(c["sub"]), c["p"]["thr"])):
        p = c["p"]
        twin = select(cases, "prefill", n=p["n"], d=p["d"], h=p["h"], kvh=p["kvh"],
                      thr=p["thr"], causal=1)
        twin = [t for t in twin if t["sub"] == c["sub"]]
        cz = twin[0]["b"] if twin else {}
        fz = c["b"]
        ratio = fz.get("rove_ms", 0) / cz["rove_ms"] if cz.get("rove_ms") else float("nan")
        rows.append(["n=%d %s" % (p["n"], shape_text(p)), p["thr"], c["sub"],
                     fmt(cz.get("rove_ms")), fmt(fz.get("rove_ms")), "%.2f" % ratio,
                     fmt(cz.get("gflops"), 1), fmt(fz.get("gflops"), 1)])
    if not rows:
        return []
    header = ["shape", "threads", "ISA", "causal RoVE ms", "full RoVE ms", "full/causal",
              "causal GFLOP/s", "full GFLOP/s"]
    return ["### Causal vs full attention (RoVE; full does twice the FLOPs)\n\n" +
            table(header, rows, ["---", "---:", "---"] + ["---:"] * 5)]


def bandwidth_refs(cases):
    """{(MB, threads): bytes/s} of the read-bandwidth reference."""
    return {(c["p"]["MB"], c["p"]["thr"]): c["b"].get("bytes_per_second", 0.0)
            for c in cases if c["kind"] == "bandwidth"}


DECODE_TITLES = {
    "decode_cache": "Decode through the KV cache (K, V stored rotated; the read reference "
                    "sums a buffer of the K+V size in the same loop)",
    "decode": "Decode through rove_attention_forward (K, V rotated on every call)",
}


# rove_dtype of a decode case's `kv` argument (the cache's storage type; f32 without it)
KV_TYPES = {0: "f32", 1: "bf16", 2: "f16", 3: "q8"}


def decode_table(cases, kind):
    dec = [c for c in cases if c["kind"] == kind]
    rows = []
    for c in sorted(dec, key=lambda c: (c["p"].get("q", 1), c["p"]["kvh"], c["p"]["n"],
                                        c["p"]["thr"], isa_rank(c["sub"]), c["p"].get("kv", 0))):
        p, b = c["p"], c["b"]
        gbps = b.get("kv_bytes_per_second", 0.0) / 1e9
        rows.append([p["n"], "%s" % shape_text(p), KV_TYPES.get(p.get("kv", 0), "?"),
                     p.get("q", 1), p["thr"], c["sub"],
                     "%.3f" % b.get("rove_ms", 0), "%.3f" % b.get("rope_ms", 0),
                     "%.3f" % b.get("ratio", float("nan")), fmt(gbps, 1),
                     "%.3f" % b["read_ms"] if "read_ms" in b else "-",
                     "%.0f%%" % b["pct_read"] if "pct_read" in b else "-"])
    if not rows:
        return []
    header = ["cache length", "shape", "KV type", "q_len", "threads", "ISA", "RoVE ms",
              "RoPE ms", "ratio", "K+V GB/s", "read of K+V bytes ms", "RoVE % of read"]
    return ["### %s\n\n" % DECODE_TITLES[kind] +
            table(header, rows, ["---:", "---", "---", "---:", "---:", "---"] + ["---:"] * 6)]


def rotate_table(cases):
    rot = [c for c in cases if c["kind"] == "rotate"]
    rows = []
    for c in sorted(rot, key=lambda c: (c["p"]["n"], c["p"]["thr"], isa_rank(c["sub"]))):
        p, b = c["p"], c["b"]
        ns_tok = 1e9 / b["items_per_second"] if b.get("items_per_second") else float("nan")
        rows.append(["[%d][%d][%d]" % (p["n"], p["h"], p["d"]), p["thr"], c["sub"],
                     "%.3f" % b["time_ms"], fmt(b.get("bytes_per_second", 0) / 1e9, 1),
                     fmt(ns_tok, 1)])
    if not rows:
        return []
    return ["### rove_rotate alone (in place; GB/s counts read + write)\n\n" +
            table(["x", "threads", "ISA", "ms", "GB/s", "ns/token"], rows,
                  ["---", "---:", "---", "---:", "---:", "---:"])]


def bandwidth_table(cases):
    rows = [[mb, thr, fmt(bps / 1e9, 1)]
            for (mb, thr), bps in sorted(bandwidth_refs(cases).items())]
    if not rows:
        return []
    return ["### Read-bandwidth reference (sum of a buffer)\n\n" +
            table(["buffer MB", "threads", "GB/s"], rows)]


def mem_table(path):
    if not path or not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        lines = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    if len(lines) < 2:
        return []
    head, data = lines[0], lines[1:]
    col = {k: i for i, k in enumerate(head)}
    prev = None
    for r in data:
        ws = float(r[col["workspace_mib"]])
        growth = "%.2fx" % (ws / prev) if prev else ""
        prev = ws
        rows.append([r[col["n"]], "%sx%s" % (r[col["heads"]], r[col["dim"]]),
                     r[col["peak_rss_mib"]], r[col["inputs_mib"]], r[col["workspace_mib"]],
                     growth, r[col["nxn_fp32_mib"]], r[col["seconds"]],
                     "%s, %s thr" % (r[col["isa"]], r[col["threads"]])])
    header = ["n", "heads x dim", "peak RSS MiB", "q,k,v,out MiB", "forward extra MiB",
              "extra growth", "one n x n fp32 MiB", "forward s", "run"]
    return ["### Peak resident memory of one RoVE forward (fresh process per n)\n\n" +
            table(header, rows, ["---:", "---"] + ["---:"] * 6 + ["---"])]


def summary(cases):
    pre = [c for c in cases if c["kind"] == "prefill" and c["p"].get("causal") == 1
           and c["b"].get("ratio")]
    rows = []
    for isa in sorted({c["sub"] for c in pre}, key=isa_rank):
        sel = [c["b"]["ratio"] for c in pre if c["sub"] == isa]
        big = [c["b"]["ratio"] for c in pre if c["sub"] == isa and c["p"]["n"] >= 2048]
        gm = math.exp(sum(math.log(r) for r in sel) / len(sel))
        gmb = math.exp(sum(math.log(r) for r in big) / len(big)) if big else float("nan")
        best = max((c for c in pre if c["sub"] == isa), key=lambda c: c["b"].get("gflops", 0))
        rows.append([isa, len(sel), "%.3f" % gm, "%.3f" % gmb if big else "-",
                     "%.3f .. %.3f" % (min(sel), max(sel)),
                     "%s (n=%d, %s, %d thr)" % (fmt(best["b"]["gflops"], 1), best["p"]["n"],
                                                shape_text(best["p"]), best["p"]["thr"])])
    if not rows:
        return []
    header = ["ISA", "cases", "RoVE/RoPE geo-mean", "geo-mean n >= 2048", "range",
              "best GFLOP/s"]
    return ["### Summary: cost of RoVE over RoPE (causal prefill)\n\n" +
            table(header, rows, ["---", "---:", "---:", "---:", "---:", "---"])]


def layer_tables(cases):
    out = []
    rows = [[c["p"]["n"], c["p"]["thr"], c["sub"], fmt(c["b"].get("layer_ms")),
             fmt(c["b"].get("parts_ms")), "%.3f" % c["b"].get("ratio", float("nan"))]
            for c in sorted(select(cases, "layer"), key=lambda c: (c["p"]["n"], c["p"]["thr"]))]
    if rows:
        out.append("### Attention layer forward (d_model 768, 12x64, RoVE) vs its parts\n\n" +
                   table(["n", "threads", "ISA", "layer ms", "parts ms", "layer / parts"], rows,
                         ["---:", "---:", "---"] + ["---:"] * 3))
    rows = []
    for c in sorted(select(cases, "layer_decode"), key=lambda c: (c["p"]["kv"], c["p"]["thr"])):
        b = c["b"]
        rows.append([c["p"]["kv"], c["p"]["thr"], c["sub"], "%.3f" % b.get("step_ms", 0),
                     "%.3f" % b.get("parts_ms", 0), "%.3f" % b.get("ratio", float("nan")),
                     "%.3f" % b.get("cache_step_ms", 0), "%.3f" % b.get("bare_ms", 0),
                     "%.3f" % b.get("cache_vs_bare", float("nan"))])
    if rows:
        out.append("### Decode step of the layer and of the RoVE cache\n\n" +
                   table(["cache", "threads", "ISA", "layer step ms", "its parts ms",
                          "step / parts", "cache step ms (append + attention)",
                          "bare kernel ms (no rotation)", "cache step / bare"], rows,
                         ["---:", "---:", "---"] + ["---:"] * 6))
    return out


def gla_table(cases):
    rows = []
    for c in sorted(select(cases, "gla"), key=lambda c: (c["p"]["thr"], c["p"]["n"],
                                                         -c["p"].get("chunk", 64))):
        p, b = c["p"], c["b"]
        soft = [s for s in select(cases, "prefill", n=p["n"], h=12, kvh=12, d=64, causal=1,
                                  thr=p["thr"]) if s["sub"] == c["sub"]]
        sm = soft[0]["b"].get("rove_ms") if soft else None
        gm = b.get("gla_ms", b["time_ms"])
        rows.append([p["n"], p.get("chunk", 64), p["thr"], c["sub"], "%.2f" % gm, fmt(p["n"] / gm, 0),
                     fmt(sm) if sm else "-", fmt(p["n"] / sm, 0) if sm else "-",
                     "%.2f" % (sm / gm) if sm else "-", fmt(b.get("step_us"), 1)])
    if not rows:
        return []
    return ["### Gated linear attention vs softmax attention (12x64, causal, RoVE rotations)\n\n" +
            table(["n", "chunk", "threads", "ISA", "GLA ms", "GLA k tokens/s", "softmax ms",
                   "softmax k tokens/s", "softmax / GLA", "GLA decode step us"], rows,
                  ["---:", "---:", "---:", "---"] + ["---:"] * 6)]


def selective_table(cases):
    rows = []
    for c in sorted(select(cases, "selective"), key=lambda c: (c["p"]["thr"], c["p"]["n"])):
        p, b = c["p"], c["b"]
        rows.append([p["n"], p["thr"], c["sub"], "%.2f" % b.get("attn_pos_ms", 0),
                     "%.2f" % b.get("attn_angles_ms", 0), "%.3f" % b.get("angles_ms", 0),
                     "%.3f" % b.get("ratio", float("nan"))])
    if not rows:
        return []
    return ["### Selective RoPE in softmax attention (12x64, causal RoVE)\n\n" +
            table(["n", "threads", "ISA", "positions ms", "explicit angles ms",
                   "rove_selective_angles ms", "(angles + attention) / positions"], rows,
                  ["---:", "---:", "---"] + ["---:"] * 4)]


def markdown(ctx, cases, mem):
    parts = ["Machine: " + machine_line(ctx)]
    parts += summary(cases) + prefill_tables(cases) + causal_vs_full(cases)
    parts += decode_table(cases, "decode_cache") + decode_table(cases, "decode")
    parts += rotate_table(cases) + bandwidth_table(cases)
    parts += layer_tables(cases) + gla_table(cases) + selective_table(cases)
    parts += mem_table(mem)
    return "\n\n".join(parts) + "\n"


# ---- gnuplot data ------------------------------------------------------------------------

def write_dat(path, header, rows):
    with open(path, "w") as f:
        f.write("# " + " ".join(header) + "\n")
        for r in rows:
            f.write(" ".join("%.6g" % x for x in r) + "\n")


def gp_list(items):
    return '"%s"' % " ".join(items)


def write_prefill(data_dir, cases, gp):
    pre = [c for c in cases if c["kind"] == "prefill" and c["p"].get("causal") == 1]
    series = {}
    for c in pre:
        p = c["p"]
        key = (c["sub"], p["d"], p["h"], p["kvh"], p["thr"])
        series.setdefault(key, []).append(c)
    files = {}
    for key, cs in series.items():
        isa, d, h, kvh, thr = key
        name = "prefill_%s_d%d_h%d_kv%d_t%d.dat" % key
        cs.sort(key=lambda c: c["p"]["n"])
        write_dat(os.path.join(data_dir, name),
                  ["n", "rove_ms", "rope_ms", "ratio", "gflops", "gflops_rope", "pct_peak"],
                  [[c["p"]["n"], c["b"].get("rove_ms", 0), c["b"].get("rope_ms", 0),
                    c["b"].get("ratio", 0), c["b"].get("gflops", 0),
                    c["b"].get("gflops_rope", 0), c["b"].get("pct_peak", 0)] for c in cs])
        files[key] = (name, cs)
    if not files:
        return
    isas = sorted({k[0] for k in files}, key=isa_rank)
    best = isas[0]
    # Headline shape: d 64 MHA if measured, else the first shape of the best ISA.
    shapes = sorted({k[1:4] for k in files if k[0] == best}, key=lambda s: (s[0] != 64, -s[2]))
    d, h, kvh = shapes[0]
    head = sorted([k for k in files if k[0] == best and k[1:4] == (d, h, kvh)],
                  key=lambda k: k[4])
    gp["TIME_FILES"] = gp_list(files[k][0] for k in head)
    gp["TIME_TITLES"] = gp_list("%d_thread%s" % (k[4], "s" if k[4] > 1 else "") for k in head)
    gp["TIME_SHAPE"] = '"%s"' % ("%s, causal, %s" % (shape_text({"h": h, "d": d, "kvh": kvh}),
                                                     best))
    # n^2 reference through the largest n of the first (1-thread) series.
    cs = files[head[0]][1]
    n_max, t_max = cs[-1]["p"]["n"], cs[-1]["b"].get("rove_ms", 0)
    ns = [c["p"]["n"] for c in cs]
    write_dat(os.path.join(data_dir, "nsq.dat"), ["n", "ms"],
              [[n, t_max * (n / n_max) ** 2] for n in ns])
    per_isa = sorted([k for k in files if k[1:4] == (d, h, kvh)],
                     key=lambda k: (isa_rank(k[0]), k[4]))
    gp["ISA_FILES"] = gp_list(files[k][0] for k in per_isa)
    gp["ISA_TITLES"] = gp_list("%s,_%d_thr" % (k[0], k[4]) for k in per_isa)
    gp["ISA_SHAPE"] = '"%s, causal"' % shape_text({"h": h, "d": d, "kvh": kvh})


def write_decode(data_dir, cases, gp):
    # The plot shows decode through the KV cache when it was measured (a real decode
    # step), else decode through rove_attention_forward.
    kind = "decode_cache" if any(c["kind"] == "decode_cache" for c in cases) else "decode"
    dec = [c for c in cases if c["kind"] == kind and c["p"].get("q", 1) == 1
           and c["p"]["kvh"] == c["p"]["h"]]
    series = {}
    for c in dec:
        series.setdefault((c["sub"], c["p"]["thr"]), []).append(c)
    names, titles = [], []
    for key in sorted(series, key=lambda k: (isa_rank(k[0]), k[1])):
        cs = sorted(series[key], key=lambda c: c["p"]["n"])
        name = "decode_%s_t%d.dat" % key
        write_dat(os.path.join(data_dir, name), ["kv", "rove_ms", "rope_ms", "kv_GBps"],
                  [[c["p"]["n"], c["b"].get("rove_ms", 0), c["b"].get("rope_ms", 0),
                    c["b"].get("kv_bytes_per_second", 0) / 1e9] for c in cs])
        names.append(name)
        titles.append("%s,_%d_thr" % key)
    gp["DEC_FILES"] = gp_list(names)
    gp["DEC_TITLES"] = gp_list(titles)
    if not dec:
        return
    p0 = dec[0]["p"]
    kvs = sorted({c["p"]["n"] for c in dec})
    refs = bandwidth_refs(cases)
    bw_names, bw_titles = [], []
    for (mb, thr), bps in sorted(refs.items()):
        if bps <= 0:
            continue
        name = "decode_bw%d_t%d.dat" % (mb, thr)
        write_dat(os.path.join(data_dir, name), ["kv", "ms"],
                  [[kv, 2.0 * kv * p0["kvh"] * p0["d"] * 4 / bps * 1e3] for kv in kvs])
        bw_names.append(name)
        bw_titles.append("reading_K+V_at_%.0f_GB/s_(%d_MB_sum,_%d_thr)" % (bps / 1e9, mb, thr))
    gp["BW_FILES"] = gp_list(bw_names)
    gp["BW_TITLES"] = gp_list(bw_titles)
    gp["DEC_SHAPE"] = '"%s, %s"' % (shape_text(p0), "KV cache" if kind == "decode_cache"
                                     else "no cache: K, V rotated on every call")


def write_mem(data_dir, mem, gp):
    gp["HAVE_MEM"] = "0"
    if not mem or not os.path.exists(mem):
        return
    with open(mem) as f:
        lines = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    if len(lines) < 2:
        return
    col = {k: i for i, k in enumerate(lines[0])}
    rows = [[float(r[col[k]]) for k in ("n", "peak_rss_mib", "workspace_mib", "inputs_mib",
                                         "nxn_fp32_mib")] for r in lines[1:]]
    write_dat(os.path.join(data_dir, "mem.dat"),
              ["n", "peak_rss_mib", "workspace_mib", "inputs_mib", "nxn_fp32_mib"], rows)
    gp["HAVE_MEM"] = "1"
    gp["MEM_SHAPE"] = '"%sx%s"' % (lines[1][col["heads"]], lines[1][col["dim"]])


def write_gla(data_dir, cases, gp):
    """gla_<isa>_t<thr>.dat: n, GLA ms, softmax (causal RoVE prefill) ms at the same n."""
    names, titles = [], []
    series = {}
    for c in select(cases, "gla", chunk=64):
        series.setdefault((c["sub"], c["p"]["thr"]), []).append(c)
    for key in sorted(series, key=lambda k: (isa_rank(k[0]), k[1])):
        rows = []
        for c in sorted(series[key], key=lambda c: c["p"]["n"]):
            soft = [s for s in select(cases, "prefill", n=c["p"]["n"], h=12, kvh=12, d=64,
                                      causal=1, thr=key[1]) if s["sub"] == key[0]]
            rows.append([c["p"]["n"], c["b"].get("gla_ms", c["b"]["time_ms"]),
                         soft[0]["b"].get("rove_ms", float("nan")) if soft else float("nan")])
        name = "gla_%s_t%d.dat" % key
        write_dat(os.path.join(data_dir, name), ["n", "gla_ms", "softmax_ms"], rows)
        names.append(name)
        titles.append("%s,_%d_thr" % key)
    gp["GLA_FILES"] = gp_list(names)
    gp["GLA_TITLES"] = gp_list(titles)


def write_data(data_dir, ctx, cases, mem):
    os.makedirs(data_dir, exist_ok=True)
    gp = {"TIME_FILES": '""', "ISA_FILES": '""', "DEC_FILES": '""', "BW_FILES": '""',
          "GLA_FILES": '""'}
    write_prefill(data_dir, cases, gp)
    write_decode(data_dir, cases, gp)
    write_gla(data_dir, cases, gp)
    write_mem(data_dir, mem, gp)
    pk = peaks(ctx)
    order = sorted(pk, key=isa_rank)
    gp["PEAK_VALUES"] = gp_list("%.2f" % pk[k] for k in order)
    gp["PEAK_TITLES"] = gp_list("%s_FMA_peak,_1_core" % k for k in order)
    gp["MACHINE"] = '"%s, %s CPUs, librove %s"' % (ctx.get("cpu_model", "CPU"),
                                                 ctx.get("num_cpus", "?"),
                                                 ctx.get("rove_version", "?"))
    with open(os.path.join(data_dir, "vars.gp"), "w") as f:
        for k in sorted(gp):
            f.write("%s = %s\n" % (k, gp[k]))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--data-dir")
    ap.add_argument("--mem", help="mem_probe --tsv output")
    ap.add_argument("--markdown", help="also write the tables to this file")
    a = ap.parse_args()
    ctx, cases = load(a.json)
    if not cases:
        print("report.py: no benchmark results in %s" % a.json, file=sys.stderr)
        return 1
    if a.data_dir:
        write_data(a.data_dir, ctx, cases, a.mem)
    md = markdown(ctx, cases, a.mem)
    sys.stdout.write(md)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

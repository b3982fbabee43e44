/* SPDX-License-Identifier: MIT */
/* rove_rope_config_init and rove_rope_inv_freq (docs/DESIGN.md §1 "Frequencies") against
 * reference values computed independently of librove, for real model configurations,
 * every scaling, per-pair divisors, the YaRN attention factor and bad inputs.
 * Links the public librove.so only. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define REL_TOL 1e-12   /* docs/DESIGN.md §1: the formulas evaluated in double, to 1e-12 rel */
#define SENTINEL (-777.25)
#define HALF_MAX (ROVE_MAX_HEAD_DIM / 2)

/* ---- reference values ---------------------------------------------------------------
 * Produced by the Python script below (python3 + mpmath 1.3, 40 significant digits),
 * which implements the HuggingFace transformers formulas (modeling_rope_utils.py:
 * default, linear, static NTK-aware, yarn with truncate and the +0.001 guard, llama3)
 * from their definitions, and printed with repr(float(x)) (the nearest double):
 *
 * # Independent reference for tests/test_rope_freq.c: the transformers RoPE formulas
 * # (modeling_rope_utils.py) evaluated in 40-digit mpmath, then rounded to double.
 * from mpmath import mp, mpf, log, pi, floor, ceil
 * mp.dps = 40
 *
 * def base(theta, r):
 *     return [mpf(theta) ** (-mpf(2 * k) / r) for k in range(r // 2)]
 *
 * def linear(theta, r, s):
 *     return [w / s for w in base(theta, r)]
 *
 * def ntk(theta, r, s):
 *     return base(mpf(theta) * mpf(s) ** (mpf(r) / (r - 2)), r)
 *
 * def yarn(theta, r, s, L0, bf=32, bs=1, truncate=True, m=0):
 *     corr = lambda n: r * log(mpf(L0) / (n * 2 * pi)) / (2 * log(mpf(theta)))
 *     lo, hi = corr(bf), corr(bs)
 *     if truncate:
 *         lo, hi = floor(lo), ceil(hi)
 *     lo, hi = max(lo, 0), min(hi, r - 1)
 *     if lo == hi:
 *         hi += mpf(0.001)
 *     out = []
 *     for k, w in enumerate(base(theta, r)):
 *         ramp = min(max((k - lo) / (hi - lo), 0), 1)
 *         out.append((w / s) * ramp + w * (1 - ramp))
 *     att = m if m > 0 else (mpf(0.1) * log(s) + 1 if s > 1 else mpf(1))
 *     return out, att, lo, hi
 *
 * def llama3(theta, r, s, L0, lf=1, hf=4):
 *     lw, hw = mpf(L0) / lf, mpf(L0) / hf
 *     out = []
 *     for w in base(theta, r):
 *         wl = 2 * pi / w
 *         if wl > lw:
 *             out.append(w / s)
 *         elif wl < hw:
 *             out.append(w)
 *         else:
 *             g = (mpf(L0) / wl - lf) / (mpf(hf) - lf)
 *             out.append((1 - g) * w / s + g * w)
 *     return out
 *
 * def emit(name, vals):
 *     print("static const double %s[%d] = {" % (name, len(vals)))
 *     for i in range(0, len(vals), 3):
 *         print("    " + " ".join("%s," % repr(float(v)) for v in vals[i:i + 3]))
 *     print("};")
 *
 * emit("k_llama31_8b", llama3(500000, 128, 8, 8192, 1, 4))
 * q, qm, ql, qh = yarn(1000000, 128, 4, 32768)
 * emit("k_qwen25_yarn", q)
 * g, gm, gl, gh = yarn(150000, 64, 32, 4096, 32, 1, False)
 * emit("k_gpt_oss", g)
 * d, dm, dl, dh = yarn(10000, 64, 40, 4096, 32, 1, True, 1.0)
 * emit("k_deepseek_v3", d)
 * emit("k_neox20b", base(10000, 24))
 * emit("k_pythia69b", base(10000, 32))
 * emit("k_gptj6b", base(10000, 64))
 * emit("k_linear2", linear(10000, 128, 2))
 * emit("k_ntk4", ntk(10000, 128, 4))
 * ff = [1 + mpf(k) / 4 for k in range(32)]
 * emit("k_factors_none", [w / f for w, f in zip(base(10000, 64), ff)])
 * y, _, _, _ = yarn(10000, 64, 16, 2048)
 * emit("k_factors_yarn", [w / f for w, f in zip(y, ff)])
 * e, em, el, eh = yarn(10000, 8, 4, 4)
 * emit("k_yarn_equal", e)
 * f, fm, fl, fh = yarn(10000, 8, 4, 4096, 0.6525, 0.6525, False)
 * emit("k_yarn_equal_frac", f)
 * for nm, v in (("qwen", (qm, ql, qh)), ("gptoss", (gm, gl, gh)), ("ds", (dm, dl, dh)),
 *               ("eq", (em, el, eh)), ("eqf", (fm, fl, fh))):
 *     print("// %s: m=%r low=%s high=%s" % (nm, float(v[0]), mp.nstr(v[1], 12),
 *                                           mp.nstr(v[2], 12)))
 * ms = (float(mpf(0.1) * log(s) + 1) for s in (4, 32, 40))
 * print("// m(s=4)=%r m(s=32)=%r m(s=40)=%r" % tuple(ms))
 */
static const double k_llama31_8b[64] = {
    1.0, 0.8146172338565447, 0.6636012376960885,
    0.540581004635767, 0.44036660267178046, 0.3587302237512899,
    0.2922278225730151, 0.23805382048035073, 0.19392274474868576,
    0.1579728099090432, 0.12868737343265052, 0.10483095217796996,
    0.08539710028576561, 0.06956594961416032, 0.05666962144529105,
    0.04616405026546052, 0.03760603093086393, 0.030634520893224042,
    0.024955408670558694, 0.020329105980970152, 0.016560440080994446,
    0.013490419890226748, 0.010989528534539826, 0.0089522593361944,
    0.007292664737217109, 0.005940730375674967, 0.004839421345719893,
    0.003942276030116656, 0.003211445994752591, 0.0021665707635033587,
    0.0013718935677611381, 0.0008567514129196321, 0.0005248461609929547,
    0.0003126937503840651, 0.0001785078127679964, 9.556212353964683e-05,
    7.78465527393245e-05, 6.341514345777615e-05, 5.165906874818956e-05,
    4.208236768725526e-05, 3.428102195952591e-05, 2.7925911282444468e-05,
    2.2748928601828183e-05, 1.8531669290821308e-05, 1.509621717643313e-05,
    1.2297638677963614e-05, 1.0017868402809974e-05, 8.160728247435943e-06,
    6.647869871181235e-06, 5.415469365499922e-06, 4.411534674558404e-06,
    3.5937121736509995e-06, 2.9274998701761677e-06, 2.3847918463583033e-06,
    1.942692537204043e-06, 1.58255082089091e-06, 1.2891731721515574e-06,
    1.0501826834601687e-06, 8.554969126443659e-07, 6.969025285511674e-07,
    5.677088100759837e-07, 4.6246538050008837e-07, 3.767322690173964e-07,
    3.068925988914511e-07,
};
static const double k_qwen25_yarn[64] = {
    1.0, 0.8058421877614819, 0.6493816315762113,
    0.5232991146814947, 0.4216965034285822, 0.33982083289425596,
    0.27384196342643613, 0.220673406908459, 0.1778279410038923,
    0.14330125702369628, 0.11547819846894582, 0.0930572040929699,
    0.07498942093324558, 0.060429639023813285, 0.04869675251658631,
    0.03924189758484536, 0.03162277660168379, 0.025482967479793464,
    0.02053525026457146, 0.016548170999431813, 0.01333521432163324,
    0.010746078283213174, 0.008659643233600654, 0.006978305848598663,
    0.005375321490790102, 0.004131738022518393, 0.003168422574711092,
    0.002423422380407644, 0.0018482765647068783, 0.001405112481595912,
    0.0010643609812470017, 0.0008029597275452303, 0.0006029411764705882,
    0.00045032357551376927, 0.0003342405456642264, 0.0002462584069089387,
    0.0001798411558739542, 0.00012993149493015669, 9.262301704129457e-05,
    6.490394320837029e-05, 4.445698525097307e-05, 3.582531425592407e-05,
    2.8869549617236455e-05, 2.3264301023242475e-05, 1.8747355233311396e-05,
    1.510740975595332e-05, 1.2174188129146578e-05, 9.81047439621134e-06,
    7.905694150420949e-06, 6.370741869948366e-06, 5.133812566142866e-06,
    4.137042749857953e-06, 3.33380358040831e-06, 2.686519570803294e-06,
    2.1649108084001634e-06, 1.7445764621496658e-06, 1.4058533129758728e-06,
    1.1328959094002045e-06, 9.129353181370943e-07, 7.356817940523204e-07,
    5.928434264154138e-07, 4.777382437426101e-07, 3.84981631514873e-07,
    3.102344401879299e-07,
};
static const double k_gpt_oss[32] = {
    1.0, 0.6890443058881632, 0.4747820554769007,
    0.3271458718642365, 0.22541800020287084, 0.15532298948448497,
    0.10702442147781144, 0.07374456821026082, 0.050813274815461475,
    0.03170569618466377, 0.01933500112654036, 0.011592049256286919,
    0.006794959489732218, 0.0038603593171920663, 0.002093792378969688,
    0.0010526021013863348, 0.00045648391922324016, 0.00012931870124506273,
    3.8308812373753384e-05, 2.639646903147278e-05, 1.818833668168956e-05,
    1.2532569824095001e-05, 8.63549587543848e-06, 5.950239261491605e-06,
    4.09997848180298e-06, 2.8250668271503398e-06, 1.9465962110014815e-06,
    1.3412910350540445e-06, 9.242089502428302e-07, 6.36820914615699e-07,
    4.387978250864396e-07, 3.0235114281192144e-07,
};
static const double k_deepseek_v3[32] = {
    1.0, 0.7498942093324559, 0.5623413251903491,
    0.4216965034285822, 0.31622776601683794, 0.23713737056616552,
    0.1778279410038923, 0.1333521432163324, 0.1,
    0.07498942093324558, 0.05623413251903491, 0.03900692656714386,
    0.026879360111431223, 0.018378146218877827, 0.01244795587027246,
    0.008334508951020775, 0.0055, 0.003561997494329165,
    0.0022493653007613964, 0.0013705136361428923, 0.0007905694150420948,
    0.0004149903984907897, 0.00017782794100389227, 3.33380358040831e-05,
    2.5e-05, 1.8747355233311396e-05, 1.4058533129758727e-05,
    1.0542412585714556e-05, 7.905694150420949e-06, 5.9284342641541385e-06,
    4.445698525097307e-06, 3.33380358040831e-06,
};
static const double k_neox20b[12] = {
    1.0, 0.46415888336127786, 0.21544346900318836,
    0.1, 0.04641588833612779, 0.021544346900318836,
    0.01, 0.004641588833612779, 0.002154434690031884,
    0.001, 0.0004641588833612779, 0.00021544346900318837,
};
static const double k_pythia69b[16] = {
    1.0, 0.5623413251903491, 0.31622776601683794,
    0.1778279410038923, 0.1, 0.05623413251903491,
    0.03162277660168379, 0.01778279410038923, 0.01,
    0.005623413251903491, 0.0031622776601683794, 0.0017782794100389228,
    0.001, 0.0005623413251903491, 0.00031622776601683794,
    0.00017782794100389227,
};
static const double k_gptj6b[32] = {
    1.0, 0.7498942093324559, 0.5623413251903491,
    0.4216965034285822, 0.31622776601683794, 0.23713737056616552,
    0.1778279410038923, 0.1333521432163324, 0.1,
    0.07498942093324558, 0.05623413251903491, 0.042169650342858224,
    0.03162277660168379, 0.023713737056616554, 0.01778279410038923,
    0.01333521432163324, 0.01, 0.007498942093324558,
    0.005623413251903491, 0.004216965034285823, 0.0031622776601683794,
    0.0023713737056616554, 0.0017782794100389228, 0.001333521432163324,
    0.001, 0.0007498942093324559, 0.0005623413251903491,
    0.00042169650342858224, 0.00031622776601683794, 0.00023713737056616554,
    0.00017782794100389227, 0.0001333521432163324,
};
static const double k_linear2[64] = {
    0.5, 0.4329821616800327, 0.37494710466622794,
    0.32469081578810566, 0.28117066259517454, 0.24348376258293156,
    0.2108482517142911, 0.18258706362741886, 0.15811388300841897,
    0.13692098171321807, 0.11856868528308276, 0.1026762513228573,
    0.08891397050194615, 0.0769963263029746, 0.0666760716081662,
    0.05773909923447291, 0.05, 0.043298216168003265,
    0.03749471046662279, 0.032469081578810566, 0.028117066259517456,
    0.024348376258293156, 0.021084825171429112, 0.018258706362741885,
    0.015811388300841896, 0.013692098171321807, 0.011856868528308277,
    0.01026762513228573, 0.008891397050194615, 0.00769963263029746,
    0.00666760716081662, 0.005773909923447291, 0.005,
    0.004329821616800327, 0.003749471046662279, 0.0032469081578810565,
    0.0028117066259517455, 0.0024348376258293155, 0.0021084825171429115,
    0.0018258706362741886, 0.0015811388300841897, 0.0013692098171321806,
    0.0011856868528308277, 0.001026762513228573, 0.0008891397050194614,
    0.000769963263029746, 0.000666760716081662, 0.0005773909923447291,
    0.0005, 0.0004329821616800327, 0.00037494710466622793,
    0.00032469081578810567, 0.00028117066259517455, 0.00024348376258293155,
    0.00021084825171429112, 0.00018258706362741885, 0.00015811388300841897,
    0.00013692098171321805, 0.00011856868528308277, 0.0001026762513228573,
    8.891397050194613e-05, 7.69963263029746e-05, 6.66760716081662e-05,
    5.773909923447291e-05,
};
static const double k_ntk4[64] = {
    1.0, 0.8471171851512068, 0.717607525378504,
    0.6078976669419616, 0.5149605604798603, 0.436231940457587,
    0.36953957347348, 0.3130433232828319, 0.26518437884973184,
    0.22464224455725604, 0.19029830587539176, 0.16120496521220523,
    0.1365594963629615, 0.11568189616465842, 0.09799612225195962,
    0.08301419923781359, 0.0703227547859181, 0.0595716140863255,
    0.05046413803972204, 0.04274903856729127, 0.03621344521904416,
    0.030677031778584118, 0.025987040809068294, 0.022014068860587474,
    0.018648496046905695, 0.01579746147855816, 0.013382301100250812,
    0.011336377238890366, 0.009603239976421016, 0.008135069617157313,
    0.006891357275095408, 0.005837787176750113, 0.004945289840680367,
    0.0041892400095940125, 0.0035487772048500943, 0.0030062301565013795,
    0.0025466292280921206, 0.002157293383325188, 0.0018274802984277565,
    0.0015480899663234083, 0.0013114136146327123, 0.0011109210097966326,
    0.0009410802787442597, 0.0007972052767311504, 0.000675326290012181,
    0.0005720805058537263, 0.00048461922779868713, 0.0004105292761229753,
    0.0003477664048114574, 0.0002945988979340369, 0.000249559789166529,
    0.0002114063861256787, 0.00017908598273777408, 0.0001517068135968608,
    0.00012851344890243155, 0.00010886595108830125, 9.222221804473072e-05,
    7.812302575845312e-05, 6.617935767599603e-05, 5.6061671189604666e-05,
    4.7490805093010414e-05, 4.023027713095558e-05, 3.407975912102806e-05,
    2.8869549617236455e-05,
};
static const double k_factors_none[32] = {
    1.0, 0.5999153674659646, 0.37489421679356605,
    0.24096943053061842, 0.15811388300841897, 0.1053943869182958,
    0.07113117640155692, 0.04849168844230269, 0.03333333333333333,
    0.02307366797946018, 0.016066895005438547, 0.01124524009142886,
    0.007905694150420948, 0.005579702836850954, 0.003951732022308718,
    0.002807413541396472, 0.002, 0.0014283699225380111,
    0.001022438773073362, 0.0007333852233540561, 0.0005270462766947299,
    0.00037941979290586486, 0.0002735814476982958, 0.00019755873069086282,
    0.00014285714285714287, 0.00010343368404585598, 7.497884335871321e-05,
    5.4412452055300934e-05, 3.952847075210474e-05, 2.874392370498976e-05,
    2.0920934235752032e-05, 1.5240244939009418e-05,
};
static const double k_factors_yarn[32] = {
    1.0, 0.5999153674659646, 0.37489421679356605,
    0.24096943053061842, 0.15811388300841897, 0.1053943869182958,
    0.07113117640155692, 0.04849168844230269, 0.03333333333333333,
    0.021409701538633724, 0.01374955437965414, 0.008812375648571655,
    0.005625205453184136, 0.003567790756255658, 0.0022418479741943683,
    0.0013902095902107528, 0.0008461538461538462, 0.0005013029055061289,
    0.0002851031194146875, 0.00015161329136646352, 7.094853724736748e-05,
    2.3713737056616554e-05, 1.709884048114349e-05, 1.2347420668178926e-05,
    8.92857142857143e-06, 6.464605252865999e-06, 4.686177709919576e-06,
    3.4007782534563084e-06, 2.4705294220065464e-06, 1.79649523156186e-06,
    1.307558389734502e-06, 9.525153086880886e-07,
};
static const double k_yarn_equal[4] = {
    1.0, 0.025, 0.0025,
    0.00025,
};
static const double k_yarn_equal_frac[4] = {
    1.0, 0.1, 0.01,
    0.0006996726995055567,
};
/* Script check values: qwen: m=1.138629436111989 low=23.0 high=40.0
 * gptoss: m=1.3465735902799727 low=8.09277911551 high=17.3980245016
 * ds: m=1.0 low=10.0 high=23.0
 * eq: m=1.138629436111989 low=0 high=0.001
 * eqf: m=1.138629436111989 low=2.9995995636 high=3.0005995636
 * m(s=4)=1.138629436111989 m(s=32)=1.3465735902799727 m(s=40)=1.3688879454113936 */

/* YaRN attention factors 0.1 ln s + 1 from the same script (and m = 1 for s <= 1). */
#define M_S4 1.138629436111989
#define M_S32 1.3465735902799727

/* LongRoPE-style divisors used with k_factors_*: f_k = 1 + k/4. */
static void fill_factors(double *f, int32_t n) {
  for (int32_t k = 0; k < n; k++) f[k] = 1.0 + k / 4.0;
}

static int rel_close(double got, double want) {
  return fabs(got - want) <= REL_TOL * fabs(want);
}

/* rove_rope_inv_freq must succeed, write exactly `half` values matching `want` to
 * REL_TOL, leave the rest of the buffer alone and return attention factor want_m. */
static void expect_freqs_tol(const rove_rope_config *c, int32_t head_dim, const double *want,
                             int32_t half, double want_m, double tol) {
  double out[HALF_MAX + 1];
  for (int32_t k = 0; k <= HALF_MAX; k++) out[k] = SENTINEL;
  double m = SENTINEL;
  assert_int_equal(rove_rope_inv_freq(c, head_dim, out, &m), ROVE_OK);
  for (int32_t k = 0; k < half; k++) {
    if (!(fabs(out[k] - want[k]) <= tol * fabs(want[k])))
      fail_msg("k=%d: got %.17g want %.17g (rel %.3g)", (int)k, out[k], want[k],
               fabs(out[k] - want[k]) / fabs(want[k]));
  }
  for (int32_t k = half; k <= HALF_MAX; k++) assert_true(out[k] == SENTINEL);
  if (!rel_close(m, want_m)) fail_msg("attention factor %.17g want %.17g", m, want_m);
  /* attention_factor may be NULL; the frequencies do not change. */
  double again[HALF_MAX];
  assert_int_equal(rove_rope_inv_freq(c, head_dim, again, NULL), ROVE_OK);
  assert_memory_equal(again, out, (size_t)half * sizeof(double));
}

static void expect_freqs(const rove_rope_config *c, int32_t head_dim, const double *want,
                         int32_t half, double want_m) {
  expect_freqs_tol(c, head_dim, want, half, want_m, REL_TOL);
}

/* rove_rope_inv_freq must fail with `want` and touch neither output. */
static void expect_fail_at(const rove_rope_config *c, int32_t head_dim, rove_status want,
                           int line) {
  double out[HALF_MAX];
  for (int32_t k = 0; k < HALF_MAX; k++) out[k] = SENTINEL;
  double m = SENTINEL;
  rove_status st = rove_rope_inv_freq(c, head_dim, out, &m);
  if (st != want) fail_msg("line %d: status %d (%s), want %d", line, (int)st,
                           rove_status_string(st), (int)want);
  for (int32_t k = 0; k < HALF_MAX; k++)
    if (out[k] != SENTINEL) fail_msg("line %d: inv_freq[%d] written on failure", line, (int)k);
  if (m != SENTINEL) fail_msg("line %d: attention factor written on failure", line);
}
#define expect_fail(c, hd, st) expect_fail_at((c), (hd), (st), __LINE__)

static rove_rope_config make(double theta, rove_scaling sc, double factor, int32_t L0) {
  rove_rope_config c;
  rove_rope_config_init(&c);
  c.theta = theta;
  c.scaling = sc;
  c.factor = factor;
  c.original_max_position = L0;
  return c;
}

/* ---- defaults ---------------------------------------------------------------------- */

static void test_config_init_defaults(void **state) {
  (void)state;
  rove_rope_config c;
  memset(&c, 0xA5, sizeof c); /* garbage everywhere: init must set every field */
  rove_rope_config_init(&c);
  assert_int_equal(c.rotary_dim, 0);
  assert_int_equal(c.pairing, ROVE_PAIRING_HALF);
  assert_true(c.theta == 10000.0);
  assert_int_equal(c.scaling, ROVE_SCALING_NONE);
  assert_true(c.factor == 1.0);
  assert_int_equal(c.original_max_position, 0);
  assert_true(c.beta_fast == 32.0);
  assert_true(c.beta_slow == 1.0);
  assert_true(c.attention_factor == 0.0);
  assert_int_equal(c.truncate, 1);
  assert_true(c.low_freq_factor == 1.0);
  assert_true(c.high_freq_factor == 4.0);
  assert_null(c.freq_factors);
  assert_int_equal(c.placement, ROVE_ROTARY_FIRST);
  assert_true(c.mscale == 0.0);
  assert_true(c.mscale_all_dim == 0.0);
  assert_null(c.long_freq_factors);
  assert_int_equal(c.max_position, 0);
  rove_rope_config_init(NULL); /* no-op, no crash */
}

static void test_default_config_is_plain_rope(void **state) {
  (void)state;
  /* A freshly initialised config is valid for any even head_dim: w_k = 10000^(-2k/d),
   * m = 1. d = 64 is GPT-J's rotary part, so its table serves as the reference. */
  rove_rope_config c;
  rove_rope_config_init(&c);
  expect_freqs(&c, 64, k_gptj6b, 32, 1.0);
  /* Smallest head: one pair, w_0 = 1. */
  const double one = 1.0;
  expect_freqs(&c, 2, &one, 1, 1.0);
}

/* ---- real model configurations -------------------------------------------------------- */

static void test_llama31_8b(void **state) {
  (void)state;
  /* Llama-3.1-8B: head_dim 128, rope_theta 500000, rope_type llama3, factor 8,
   * low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192. */
  rove_rope_config c = make(500000.0, ROVE_SCALING_LLAMA3, 8.0, 8192);
  c.low_freq_factor = 1.0;
  c.high_freq_factor = 4.0;
  expect_freqs(&c, 128, k_llama31_8b, 64, 1.0);
  /* The three bands are all present: high frequencies untouched, low ones / 8. */
  assert_true(k_llama31_8b[0] == 1.0);
  assert_true(rel_close(k_llama31_8b[63], pow(500000.0, -126.0 / 128) / 8.0));
}

static void test_llama4_scout(void **state) {
  (void)state;
  /* Llama-4 Scout: head_dim 128, rope_theta 500000, llama3 factor 16, low_freq_factor =
   * high_freq_factor = 1, L0 8192: no smoothing band, w / 16 where the wavelength exceeds
   * 8192, w elsewhere (transformers' _compute_llama3_parameters gives the same). */
  rove_rope_config c = make(500000.0, ROVE_SCALING_LLAMA3, 16.0, 8192);
  c.low_freq_factor = 1.0;
  c.high_freq_factor = 1.0;
  double w[64], m = 0.0;
  assert_int_equal(rove_rope_inv_freq(&c, 128, w, &m), ROVE_OK);
  int low = 0;
  for (int k = 0; k < 64; k++) {
    const double base = pow(500000.0, -2.0 * k / 128), wl = 2.0 * 3.14159265358979323846 / base;
    assert_true(isfinite(w[k]));
    assert_true(rel_close(w[k], wl > 8192.0 ? base / 16.0 : base));
    low += wl > 8192.0;
  }
  assert_true(low > 0 && low < 64); /* both sides present */
  assert_true(m == 1.0);
}

static void test_qwen25_yarn(void **state) {
  (void)state;
  /* Qwen2.5 long context: head_dim 128, rope_theta 1e6, yarn factor 4,
   * original_max_position_embeddings 32768 (beta 32/1, truncate: ramp k = 23 .. 40). */
  rove_rope_config c = make(1e6, ROVE_SCALING_YARN, 4.0, 32768);
  expect_freqs(&c, 128, k_qwen25_yarn, 64, M_S4);
}

static void test_gpt_oss_yarn(void **state) {
  (void)state;
  /* gpt-oss: head_dim 64, rope_theta 150000, yarn factor 32, L0 4096, beta_fast 32,
   * beta_slow 1, truncate false (fractional ramp bounds 8.0928 .. 17.398). */
  rove_rope_config c = make(150000.0, ROVE_SCALING_YARN, 32.0, 4096);
  c.beta_fast = 32.0;
  c.beta_slow = 1.0;
  c.truncate = 0;
  expect_freqs(&c, 64, k_gpt_oss, 32, M_S32);
}

static void test_deepseek_v3_yarn(void **state) {
  (void)state;
  /* DeepSeek-V3: qk_rope_head_dim 64, rope_theta 10000, yarn factor 40, L0 4096,
   * beta 32/1, mscale = mscale_all_dim = 1 -> attention factor 1 given explicitly
   * (derived would be 0.1 ln 40 + 1 = 1.3689), interleaved pairs. */
  rove_rope_config c = make(10000.0, ROVE_SCALING_YARN, 40.0, 4096);
  c.rotary_dim = 64;
  c.pairing = ROVE_PAIRING_INTERLEAVED;
  c.attention_factor = 1.0;
  expect_freqs(&c, 64, k_deepseek_v3, 32, 1.0);
  /* The pairing does not change the frequencies. */
  c.pairing = ROVE_PAIRING_HALF;
  expect_freqs(&c, 64, k_deepseek_v3, 32, 1.0);
  /* Any explicit factor > 0 is returned as given. */
  c.attention_factor = 0.707;
  expect_freqs(&c, 64, k_deepseek_v3, 32, 0.707);
}

static void test_partial_rotary_neox(void **state) {
  (void)state;
  /* GPT-NeoX-20B: hidden 6144 / 64 heads = head_dim 96, rotary_pct 0.25 -> r = 24;
   * Pythia-6.9B: 4096 / 32 = 128, rotary_pct 0.25 -> r = 32; rotary_emb_base 10000.
   * The exponent uses r, not head_dim. */
  rove_rope_config c = make(10000.0, ROVE_SCALING_NONE, 1.0, 0);
  c.rotary_dim = 24;
  expect_freqs(&c, 96, k_neox20b, 12, 1.0);
  c.rotary_dim = 32;
  expect_freqs(&c, 128, k_pythia69b, 16, 1.0);
}

static void test_gptj_6b(void **state) {
  (void)state;
  /* GPT-J-6B: n_embd 4096 / 16 heads = head_dim 256, rotary_dim 64, interleaved. */
  rove_rope_config c = make(10000.0, ROVE_SCALING_NONE, 1.0, 0);
  c.rotary_dim = 64;
  c.pairing = ROVE_PAIRING_INTERLEAVED;
  expect_freqs(&c, 256, k_gptj6b, 32, 1.0);
  c.rotary_dim = 0; /* 0 = head_dim: 128 pairs, w_k = 10000^(-2k/256) */
  double out[HALF_MAX];
  assert_int_equal(rove_rope_inv_freq(&c, 256, out, NULL), ROVE_OK);
  assert_true(out[0] == 1.0);
  assert_true(rel_close(out[127], pow(10000.0, -254.0 / 256)));
}

/* ---- the other scalings ---------------------------------------------------------------- */

static void test_linear_and_ntk(void **state) {
  (void)state;
  /* Position interpolation, factor 2 (head_dim 128, theta 10000): w_k / 2. */
  rove_rope_config c = make(10000.0, ROVE_SCALING_LINEAR, 2.0, 0);
  expect_freqs(&c, 128, k_linear2, 64, 1.0);
  /* Static NTK-aware, factor 4: theta' = 10000 * 4^(128/126). */
  c = make(10000.0, ROVE_SCALING_NTK, 4.0, 0);
  expect_freqs(&c, 128, k_ntk4, 64, 1.0);
  /* An attention_factor set where no m exists is refused (it used to be ignored), and
   * NONE refuses a factor other than its default 1 (a NaN one too): tests/
   * test_rope_fields.c covers every field of every scaling. */
  c = make(10000.0, ROVE_SCALING_LINEAR, 2.0, 0);
  c.attention_factor = 2.0;
  expect_fail(&c, 128, ROVE_ERR_INVALID_ARGUMENT);
  c = make(10000.0, ROVE_SCALING_NONE, NAN, 0);
  expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
}

static void test_freq_factors(void **state) {
  (void)state;
  double f[32];
  fill_factors(f, 32);
  /* Divisors on plain RoPE (head_dim 64): w_k / f_k. */
  rove_rope_config c = make(10000.0, ROVE_SCALING_NONE, 1.0, 0);
  c.freq_factors = f;
  expect_freqs(&c, 64, k_factors_none, 32, 1.0);
  /* Applied after the scaling: YaRN factor 16, L0 2048, then / f_k. */
  c = make(10000.0, ROVE_SCALING_YARN, 16.0, 2048);
  c.freq_factors = f;
  expect_freqs(&c, 64, k_factors_yarn, 32, 0.1 * log(16.0) + 1.0);
  /* Partial rotary: exactly r/2 divisors are read (r = 64 of head_dim 128). */
  c = make(10000.0, ROVE_SCALING_NONE, 1.0, 0);
  c.rotary_dim = 64;
  c.freq_factors = f;
  expect_freqs(&c, 128, k_factors_none, 32, 1.0);
}

static void test_yarn_equal_bounds(void **state) {
  (void)state;
  /* r = 8, theta 1e4, L0 = 4 < 2 pi: floor(corr(32)) < 0 -> low = 0 and
   * ceil(corr(1)) = ceil(-0.196) = 0 = high, so high becomes 0.001: pair 0 keeps its
   * frequency, pairs 1..3 are interpolated (/4). Without the guard this is 0/0. */
  rove_rope_config c = make(10000.0, ROVE_SCALING_YARN, 4.0, 4);
  expect_freqs(&c, 8, k_yarn_equal, 4, M_S4);
  /* Equal fractional bounds (truncate off, beta_fast = beta_slow = 0.6525, L0 4096):
   * low = high = corr = 2.99959956..., so pair 3 sits inside the 0.001-wide ramp
   * (ramp 0.40044). The 1/0.001 slope amplifies the few-ulp rounding of corr about
   * 1000-fold, hence 1e-9 here: that still pins the guard to 0.001 (0.002 -> ramp 0.2). */
  c = make(10000.0, ROVE_SCALING_YARN, 4.0, 4096);
  c.truncate = 0;
  c.beta_fast = c.beta_slow = 0.6525;
  expect_freqs_tol(&c, 8, k_yarn_equal_frac, 4, M_S4, 1e-9);
}

static void test_yarn_attention_factor(void **state) {
  (void)state;
  double base[64], out[64], m = 0.0;
  rove_rope_config c = make(10000.0, ROVE_SCALING_NONE, 1.0, 0);
  assert_int_equal(rove_rope_inv_freq(&c, 128, base, &m), ROVE_OK);
  assert_true(m == 1.0);
  /* s <= 1: m = 1; s = 1 leaves the frequencies as they are. */
  c = make(10000.0, ROVE_SCALING_YARN, 1.0, 4096);
  assert_int_equal(rove_rope_inv_freq(&c, 128, out, &m), ROVE_OK);
  assert_true(m == 1.0);
  for (int k = 0; k < 64; k++) assert_true(rel_close(out[k], base[k]));
  c.factor = 0.5;
  assert_int_equal(rove_rope_inv_freq(&c, 128, out, &m), ROVE_OK);
  assert_true(m == 1.0);
  /* s > 1: 0.1 ln s + 1. */
  c.factor = 4.0;
  assert_int_equal(rove_rope_inv_freq(&c, 128, out, &m), ROVE_OK);
  assert_true(rel_close(m, M_S4));
  c.factor = 32.0;
  assert_int_equal(rove_rope_inv_freq(&c, 128, out, &m), ROVE_OK);
  assert_true(rel_close(m, M_S32));
  /* Explicit factor wins, even below 1 or with s <= 1. */
  c.attention_factor = 0.25;
  assert_int_equal(rove_rope_inv_freq(&c, 128, out, &m), ROVE_OK);
  assert_true(m == 0.25);
  c.factor = 0.5;
  c.attention_factor = 1.5;
  assert_int_equal(rove_rope_inv_freq(&c, 128, out, &m), ROVE_OK);
  assert_true(m == 1.5);
}


/* ---- DeepSeek-style YaRN: mscale / mscale_all_dim ------------------------------------
 * transformers' _compute_yarn_parameters: attention_factor if given, else
 * get_mscale(s, mscale) / get_mscale(s, mscale_all_dim) when both are truthy, else
 * get_mscale(s); get_mscale(s, x) = 0.1 x ln s + 1 for s > 1, else 1. Reference values
 * from 40-digit mpmath (the same script style as above):
 *   get_mscale = lambda s, m=1: 1 if s <= 1 else mpf('0.1') * mpf(m) * log(s) + 1
 *   ds_v3 (40, 1, 1) -> 1.0; ds_v2_lite (40, 0.707, 0.707) -> 1.0;
 *   (40, 1, 0.5) -> 1.155721990196261; (4, 0.25, 2) -> 0.8100608118904195;
 *   get_mscale(40, 1)^2 = 1.8738542070926265; get_mscale(40, 0.707)^2 = 1.5896261651208734. */
#define M_RATIO_40_1_05 1.155721990196261
#define M_RATIO_4_025_2 0.8100608118904195
#define MSCALE2_40_1 1.8738542070926265
#define MSCALE2_40_0707 1.5896261651208734

static void test_deepseek_mscale(void **state) {
  (void)state;
  /* DeepSeek-V3 as its config says it: mscale = mscale_all_dim = 1, no attention_factor:
   * m = 1 (not the 1.3689 of get_mscale(40)), same frequencies as above. */
  rove_rope_config c = make(10000.0, ROVE_SCALING_YARN, 40.0, 4096);
  c.rotary_dim = 64;
  c.pairing = ROVE_PAIRING_INTERLEAVED;
  c.mscale = c.mscale_all_dim = 1.0;
  expect_freqs(&c, 64, k_deepseek_v3, 32, 1.0);
  /* The rotated part sits last in DeepSeek's 192-dim qk head; frequencies are the same. */
  c.placement = ROVE_ROTARY_LAST;
  expect_freqs(&c, 192, k_deepseek_v3, 32, 1.0);
  c.mscale = c.mscale_all_dim = 0.707; /* DeepSeek-V2-Lite */
  expect_freqs(&c, 192, k_deepseek_v3, 32, 1.0);
  c.mscale = 1.0;
  c.mscale_all_dim = 0.5;
  expect_freqs(&c, 192, k_deepseek_v3, 32, M_RATIO_40_1_05);
  /* An explicit attention_factor wins over the pair, as in transformers. */
  c.attention_factor = 0.75;
  expect_freqs(&c, 192, k_deepseek_v3, 32, 0.75);
  /* Another s: the Qwen2.5 ramp (s = 4) with mscale 0.25 / 2. */
  c = make(1e6, ROVE_SCALING_YARN, 4.0, 32768);
  c.mscale = 0.25;
  c.mscale_all_dim = 2.0;
  expect_freqs(&c, 128, k_qwen25_yarn, 64, M_RATIO_4_025_2);
  /* s <= 1: get_mscale is 1 for both, m = 1. */
  c.factor = 1.0;
  double w[64], m = 0.0;
  assert_int_equal(rove_rope_inv_freq(&c, 128, w, &m), ROVE_OK);
  assert_true(m == 1.0);
  c.factor = 0.5;
  assert_int_equal(rove_rope_inv_freq(&c, 128, w, &m), ROVE_OK);
  assert_true(m == 1.0);
  /* Exactly one of the pair set: transformers would silently use get_mscale(s); refused. */
  c = make(10000.0, ROVE_SCALING_YARN, 40.0, 4096);
  c.mscale = 1.0;
  expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  c.mscale = 0.0;
  c.mscale_all_dim = 1.0;
  expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  /* Each must be finite and > 0 when set. */
  const double bad[] = {NAN, INFINITY, -INFINITY, -1.0, -0.5};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    c.mscale = bad[i];
    c.mscale_all_dim = 1.0;
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
    c.mscale = 1.0;
    c.mscale_all_dim = bad[i];
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
}

static void test_rope_mscale_recipe(void **state) {
  (void)state;
  /* rove_rope_mscale is transformers' get_mscale (and DeepSeek's yarn_get_mscale). */
  assert_true(rove_rope_mscale(1.0, 1.0) == 1.0);
  assert_true(rove_rope_mscale(0.5, 3.0) == 1.0);
  assert_true(rove_rope_mscale(-2.0, 1.0) == 1.0);
  assert_true(rel_close(rove_rope_mscale(40.0, 1.0), 0.1 * log(40.0) + 1.0));
  assert_true(rel_close(rove_rope_mscale(4.0, 1.0), M_S4));
  assert_true(rel_close(rove_rope_mscale(32.0, 1.0), M_S32));
  assert_true(isnan(rove_rope_mscale(NAN, 1.0)));
  assert_true(isnan(rove_rope_mscale(40.0, NAN)));
  assert_true(isnan(rove_rope_mscale(INFINITY, 1.0)));
  assert_true(isnan(rove_rope_mscale(40.0, -INFINITY)));
  /* DeepSeek's softmax-scale correction: scale = get_mscale(s, mscale_all_dim)^2 /
   * sqrt(qk_head_dim) (tests/python/test_hf_config.py checks it against
   * DeepseekV3Attention.scaling itself). */
  const double g = rove_rope_mscale(40.0, 1.0);
  assert_true(rel_close(g * g, MSCALE2_40_1));
  const double g2 = rove_rope_mscale(40.0, 0.707);
  assert_true(rel_close(g2 * g2, MSCALE2_40_0707));
}

/* ---- LongRoPE ----------------------------------------------------------------------------
 * transformers' _compute_longrope_parameters: inv_freq = 1 / (ext_k * theta^(2k/r)), ext =
 * long_factor when seq_len > original_max_position_embeddings, else short_factor;
 * attention factor = attention_factor if given, else 1 for s <= 1, else
 * sqrt(1 + ln s / ln L0). The reference below is that formula written here in double;
 * m from mpmath: Phi-3 (s = 131072 / 4096 = 32, L0 4096) sqrt(17/12) =
 * 1.1902380714238083; s = 1.5, L0 2: 1.2589529382471596. */
#define M_PHI3 1.1902380714238083
#define M_S15_L2 1.2589529382471596

static void longrope_ref(double theta, int32_t r, const double *ext, double *w) {
  for (int32_t k = 0; k < r / 2; k++) w[k] = 1.0 / (ext[k] * pow(theta, (double)(2 * k) / r));
}

/* Two distinct factor sets of n pairs (Phi-3 shapes: short near 1, long growing). */
static void fill_longrope_sets(double *shrt, double *lng, int32_t n) {
  for (int32_t k = 0; k < n; k++) {
    shrt[k] = 1.0 + 0.05 * k / n;
    lng[k] = 1.0 + 40.0 * (double)k * k / ((double)n * n);
  }
}

static rove_rope_config make_longrope(const double *shrt, const double *lng) {
  rove_rope_config c = make(10000.0, ROVE_SCALING_LONGROPE, 32.0, 4096);
  c.freq_factors = shrt;
  c.long_freq_factors = lng;
  return c;
}

static void test_longrope_phi3(void **state) {
  (void)state;
  /* Phi-3-mini-128k shape: head_dim 96, theta 10000, L0 4096, max_position_embeddings
   * 131072 (factor 32), 48 short and 48 long factors. */
  double shrt[48], lng[48], want_s[48], want_l[48];
  fill_longrope_sets(shrt, lng, 48);
  longrope_ref(10000.0, 96, shrt, want_s);
  longrope_ref(10000.0, 96, lng, want_l);
  rove_rope_config c = make_longrope(shrt, lng);
  expect_freqs(&c, 96, want_s, 48, M_PHI3);   /* max_position 0: short */
  c.max_position = 4096;                       /* = L0: still short (seq_len <= L0) */
  expect_freqs(&c, 96, want_s, 48, M_PHI3);
  c.max_position = 4097;                       /* beyond L0: long */
  expect_freqs(&c, 96, want_l, 48, M_PHI3);
  c.max_position = INT32_MAX;
  expect_freqs(&c, 96, want_l, 48, M_PHI3);
  /* The long set is optional while the short one serves. */
  c.long_freq_factors = NULL;
  c.max_position = 4096;
  expect_freqs(&c, 96, want_s, 48, M_PHI3);
  c.max_position = 4097; /* ... and required beyond L0 */
  expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
  /* The short set is always required. */
  c = make_longrope(NULL, lng);
  expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
  c.max_position = 8192;
  expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
  c = make_longrope(shrt, lng);
  c.max_position = -1;
  expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
  c.max_position = INT32_MIN;
  expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
}

static void test_longrope_attention_factor(void **state) {
  (void)state;
  double shrt[48], lng[48], want[48];
  fill_longrope_sets(shrt, lng, 48);
  longrope_ref(10000.0, 96, shrt, want);
  rove_rope_config c = make_longrope(shrt, lng);
  /* An explicit attention_factor wins (Phi-3.5-MoE ships one), even below 1. */
  c.attention_factor = 1.19;
  expect_freqs(&c, 96, want, 48, 1.19);
  c.attention_factor = 0.5;
  expect_freqs(&c, 96, want, 48, 0.5);
  c.attention_factor = 0.0;
  /* s <= 1: m = 1; s only feeds m (the frequencies do not change). */
  c.factor = 1.0;
  expect_freqs(&c, 96, want, 48, 1.0);
  c.factor = 0.25;
  expect_freqs(&c, 96, want, 48, 1.0);
  /* A small L0 and fractional s. */
  c.factor = 1.5;
  c.original_max_position = 2;
  expect_freqs(&c, 96, want, 48, M_S15_L2);
  /* L0 = 1: ln L0 = 0 makes the derived factor infinite (transformers divides by zero):
   * refused; an explicit factor is fine. */
  c.original_max_position = 1;
  expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
  c.attention_factor = 1.25;
  expect_freqs(&c, 96, want, 48, 1.25);
  /* L0 is required, s must be finite and > 0. */
  c = make_longrope(shrt, lng);
  c.original_max_position = 0;
  expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
  const double bad_s[] = {0.0, -1.0, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad_s / sizeof bad_s[0]; i++) {
    c = make_longrope(shrt, lng);
    c.factor = bad_s[i];
    expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
  }
}

static void test_longrope_partial_and_bad_sets(void **state) {
  (void)state;
  /* Phi-4-mini shape: head_dim 128, partial_rotary_factor 0.75 -> r = 96, 48 factors
   * per set; the exponent uses r. Pairing and placement do not change frequencies. */
  double shrt[48], lng[48], want[48];
  fill_longrope_sets(shrt, lng, 48);
  longrope_ref(10000.0, 96, lng, want);
  rove_rope_config c = make_longrope(shrt, lng);
  c.rotary_dim = 96;
  c.max_position = 131072;
  expect_freqs(&c, 128, want, 48, M_PHI3);
  c.placement = ROVE_ROTARY_LAST;
  c.pairing = ROVE_PAIRING_INTERLEAVED;
  expect_freqs(&c, 128, want, 48, M_PHI3);
  /* Every entry of both sets is checked (finite, > 0), whichever set is chosen. */
  const double bad[] = {0.0, -0.0, -1.0, NAN, INFINITY};
  const int at[] = {0, 23, 47};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    for (size_t j = 0; j < sizeof at / sizeof at[0]; j++) {
      for (int which = 0; which < 2; which++) {
        for (int32_t mp = 0; mp <= 8192; mp += 8192) {
          fill_longrope_sets(shrt, lng, 48);
          (which ? lng : shrt)[at[j]] = bad[i];
          c = make_longrope(shrt, lng);
          c.max_position = mp;
          expect_fail(&c, 96, ROVE_ERR_INVALID_ARGUMENT);
        }
      }
    }
  }
}

/* ---- bad input --------------------------------------------------------------------------- */

static void test_bad_pointers_and_dims(void **state) {
  (void)state;
  rove_rope_config c;
  rove_rope_config_init(&c);
  double out[4], m = SENTINEL;
  expect_fail(NULL, 64, ROVE_ERR_INVALID_ARGUMENT);
  assert_int_equal(rove_rope_inv_freq(&c, 64, NULL, &m), ROVE_ERR_INVALID_ARGUMENT);
  assert_true(m == SENTINEL);
  assert_int_equal(rove_rope_inv_freq(NULL, 64, NULL, NULL), ROVE_ERR_INVALID_ARGUMENT);
  (void)out;
  /* head_dim: even and >= 2. */
  const int32_t bad_hd[] = {127, 1, 0, -2, -64, INT32_MIN, 1025, INT32_MAX};
  for (size_t i = 0; i < sizeof bad_hd / sizeof bad_hd[0]; i++)
    expect_fail(&c, bad_hd[i], ROVE_ERR_INVALID_ARGUMENT);
  /* Valid but larger than the library serves. */
  expect_fail(&c, ROVE_MAX_HEAD_DIM + 2, ROVE_ERR_UNSUPPORTED);
  expect_fail(&c, INT32_MAX - 1, ROVE_ERR_UNSUPPORTED);
  c.rotary_dim = 64;
  expect_fail(&c, 2048, ROVE_ERR_UNSUPPORTED);
  /* rotary_dim: 0 or even in 2 .. head_dim. */
  const int32_t bad_r[] = {63, 1, -2, 130, 256, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof bad_r / sizeof bad_r[0]; i++) {
    c.rotary_dim = bad_r[i];
    expect_fail(&c, 128, ROVE_ERR_INVALID_ARGUMENT);
  }
  c.rotary_dim = 128; /* == head_dim is fine */
  assert_int_equal(rove_rope_inv_freq(&c, 128, (double[64]){0}, NULL), ROVE_OK);
  c.rotary_dim = ROVE_MAX_HEAD_DIM;
  double big[HALF_MAX];
  assert_int_equal(rove_rope_inv_freq(&c, ROVE_MAX_HEAD_DIM, big, NULL), ROVE_OK);
}

static void test_bad_theta_and_enums(void **state) {
  (void)state;
  rove_rope_config c;
  const double bad_theta[] = {NAN, INFINITY, -INFINITY, -1.0, 0.0, 0.5, 1.0};
  for (size_t i = 0; i < sizeof bad_theta / sizeof bad_theta[0]; i++) {
    c = make(bad_theta[i], ROVE_SCALING_NONE, 1.0, 0);
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
  const int bad_enum[] = {-1, ROVE_SCALING_LONGROPE + 1, 99, 0x7fffffff};
  for (size_t i = 0; i < sizeof bad_enum / sizeof bad_enum[0]; i++) {
    c = make(10000.0, (rove_scaling)bad_enum[i], 2.0, 4096);
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
  const int bad_pair[] = {-1, 2, 99};
  for (size_t i = 0; i < sizeof bad_pair / sizeof bad_pair[0]; i++) {
    rove_rope_config_init(&c);
    c.pairing = (rove_pairing)bad_pair[i];
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
}

static int reads_l0(rove_scaling sc) {
  return sc == ROVE_SCALING_YARN || sc == ROVE_SCALING_LLAMA3 || sc == ROVE_SCALING_LONGROPE;
}

static void test_bad_factor(void **state) {
  (void)state;
  const rove_scaling sc[] = {ROVE_SCALING_LINEAR, ROVE_SCALING_NTK, ROVE_SCALING_YARN,
                             ROVE_SCALING_LLAMA3};
  const double bad[] = {NAN, 0.0, -0.0, -2.0, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
    for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
      rove_rope_config c = make(10000.0, sc[i], bad[j], reads_l0(sc[i]) ? 4096 : 0);
      expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
    }
    rove_rope_config ok = make(10000.0, sc[i], 2.0, reads_l0(sc[i]) ? 4096 : 0); /* control */
    assert_int_equal(rove_rope_inv_freq(&ok, 64, (double[32]){0}, NULL), ROVE_OK);
  }
}

static void test_bad_scaling_params(void **state) {
  (void)state;
  rove_rope_config c;
  /* YARN and LLAMA3 need L0 > 0; no scaling takes a negative L0. */
  const rove_scaling need_l0[] = {ROVE_SCALING_YARN, ROVE_SCALING_LLAMA3};
  for (size_t i = 0; i < 2; i++) {
    c = make(10000.0, need_l0[i], 4.0, 0);
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
    c.original_max_position = -4096;
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
  c = make(10000.0, ROVE_SCALING_LINEAR, 2.0, -1);
  expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  /* LLAMA3 band factors: finite, > 0 (equal ones: test_llama4_scout). */
  const double lf[] = {NAN, 0.0, -1.0, INFINITY, 1.0, 1.0, 1.0};
  const double hf[] = {4.0, 4.0, 4.0, 4.0, NAN, 0.0, -INFINITY};
  for (size_t i = 0; i < sizeof lf / sizeof lf[0]; i++) {
    c = make(500000.0, ROVE_SCALING_LLAMA3, 8.0, 8192);
    c.low_freq_factor = lf[i];
    c.high_freq_factor = hf[i];
    expect_fail(&c, 128, ROVE_ERR_INVALID_ARGUMENT);
  }
  /* YaRN knobs. */
  const double bad_beta[] = {NAN, 0.0, -1.0, INFINITY};
  for (size_t i = 0; i < sizeof bad_beta / sizeof bad_beta[0]; i++) {
    c = make(10000.0, ROVE_SCALING_YARN, 4.0, 4096);
    c.beta_fast = bad_beta[i];
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
    c.beta_fast = 32.0;
    c.beta_slow = bad_beta[i];
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
  const double bad_m[] = {NAN, -1.0, INFINITY};
  for (size_t i = 0; i < sizeof bad_m / sizeof bad_m[0]; i++) {
    c = make(10000.0, ROVE_SCALING_YARN, 4.0, 4096);
    c.attention_factor = bad_m[i];
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
  const int32_t bad_trunc[] = {2, -1, 7};
  for (size_t i = 0; i < sizeof bad_trunc / sizeof bad_trunc[0]; i++) {
    c = make(10000.0, ROVE_SCALING_YARN, 4.0, 4096);
    c.truncate = bad_trunc[i];
    expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  }
  /* NTK needs r > 2 (exponent r/(r-2)); its derived base must stay finite. */
  c = make(10000.0, ROVE_SCALING_NTK, 4.0, 0);
  expect_fail(&c, 2, ROVE_ERR_INVALID_ARGUMENT);
  c.rotary_dim = 2;
  expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  c.rotary_dim = 4;
  assert_int_equal(rove_rope_inv_freq(&c, 64, (double[2]){0}, NULL), ROVE_OK);
  c = make(1e300, ROVE_SCALING_NTK, 1e300, 0);
  expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
  /* A finite factor so small that w / s overflows is refused, not turned into inf. */
  c = make(10000.0, ROVE_SCALING_LINEAR, 1e-310, 0);
  expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
}

static void test_bad_freq_factors(void **state) {
  (void)state;
  double f[32];
  const double bad[] = {0.0, -0.0, NAN, -1.0, INFINITY, -INFINITY};
  const int at[] = {0, 17, 31}; /* first, middle, last of r/2 = 32 */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    for (size_t j = 0; j < sizeof at / sizeof at[0]; j++) {
      fill_factors(f, 32);
      f[at[j]] = bad[i];
      rove_rope_config c = make(10000.0, ROVE_SCALING_NONE, 1.0, 0);
      c.freq_factors = f;
      expect_fail(&c, 64, ROVE_ERR_INVALID_ARGUMENT);
    }
  }
  /* Only r/2 entries are read: a bad value just past them does not matter. */
  double g[33];
  fill_factors(g, 32);
  g[32] = NAN;
  rove_rope_config c = make(10000.0, ROVE_SCALING_NONE, 1.0, 0);
  c.freq_factors = g;
  expect_freqs(&c, 64, k_factors_none, 32, 1.0);
}

int main(void) {
  rove_test_isa_gate();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_init_defaults),
      cmocka_unit_test(test_default_config_is_plain_rope),
      cmocka_unit_test(test_llama31_8b),
      cmocka_unit_test(test_llama4_scout),
    cmocka_unit_test(test_qwen25_yarn),
      cmocka_unit_test(test_gpt_oss_yarn),
      cmocka_unit_test(test_deepseek_v3_yarn),
      cmocka_unit_test(test_partial_rotary_neox),
      cmocka_unit_test(test_gptj_6b),
      cmocka_unit_test(test_linear_and_ntk),
      cmocka_unit_test(test_freq_factors),
      cmocka_unit_test(test_yarn_equal_bounds),
      cmocka_unit_test(test_yarn_attention_factor),
      cmocka_unit_test(test_deepseek_mscale),
      cmocka_unit_test(test_rope_mscale_recipe),
      cmocka_unit_test(test_longrope_phi3),
      cmocka_unit_test(test_longrope_attention_factor),
      cmocka_unit_test(test_longrope_partial_and_bad_sets),
      cmocka_unit_test(test_bad_pointers_and_dims),
      cmocka_unit_test(test_bad_theta_and_enums),
      cmocka_unit_test(test_bad_factor),
      cmocka_unit_test(test_bad_scaling_params),
      cmocka_unit_test(test_bad_freq_factors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

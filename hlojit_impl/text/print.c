/* text/print.c — the HLO text printer: writes a module as text that XLA's own parser (and
   ours) reads back, in the form JAX's `as_text(dialect="hlo")` produces:

     HloModule m, entry_computation_layout={(f32[2,3]{1,0}, s32[])->f32[2]{0}}
   (with `, input_output_alias={ {0}: (0, {}, may-alias) }` before the layout when the
   module has aliases, as XLA prints it)

     add {
       x = f32[] parameter(0)
       y = f32[] parameter(1)
       ROOT s = f32[] add(x, y)
     }

     ENTRY main {
       ...
       ROOT r = f32[2]{0} reduce(p, c), dimensions={1}, to_apply=add
     }

   Conventions (chosen once, kept everywhere):
   - names without `%`; the computation header is the short form `[ENTRY ]name {`;
   - every instruction shape is printed in full with its layout (default when absent);
   - attributes follow XLA's spelling and order for each opcode, and optional ones are
     printed only where XLA prints them (empty batch dims, default window parts, ...);
   - computations are printed callees first: a depth-first walk over m->comps in
     definition order, emitting each computation after the ones it calls, with the entry
     last. A parsed module is already in that order, so parse → print keeps it;
   - literals: floats in the shortest decimal that reads back to the same bits (checked by
     reading them back), inf/-inf/nan as XLA spells them, -0 printed as `-0.0` (XLA reads `-0` as +0); pred as
     true/false; rank >= 2 nested as XLA prints them: `{ { 1, 2 }, { 3, 4 } }`. Large
     constants are printed in full: a canonical round trip matters more than brevity. */
#include "text.h"
#include <math.h>
#include <stdlib.h>

/* ---- numbers ------------------------------------------------------------------------------ */

/* f16/bf16 parse as decimal -> float -> half; check both strtof and strtod paths. */
static bool pr_half_reads_back(const char *s, hlo_type t, uint16_t bits) {
  float a = strtof(s, NULL), b = (float)strtod(s, NULL);
  if (t == HLO_F16) return hlo_f32_to_f16(a) == bits && hlo_f32_to_f16(b) == bits;
  return hlo_f32_to_bf16(a) == bits && hlo_f32_to_bf16(b) == bits;
}

/* The shortest %.Ng text of element |i| that reads back to the same value. */
static void pr_float(char **sb, hlo_type t, const void *base, int64_t i) {
  double v = hlo_load_f64(t, base, i);
  if (isnan(v)) { sb_puts(sb, signbit(v) ? "-nan" : "nan"); return; }
  if (isinf(v)) { sb_puts(sb, v < 0 ? "-inf" : "inf"); return; }
  char buf[40];
  if (v == 0 && signbit(v)) { sb_puts(sb, "-0.0"); return; } /* XLA's parser reads "-0" as +0 */
  if (v == floor(v) && fabs(v) < 1e7) {   /* small integers in full: 65504, not 6.55e+04 */
    sb_printf(sb, "%.0f", v);
    return;
  }
  int maxp = t == HLO_F64 ? 17 : 9;
  for (int p = 1; p <= maxp; p++) {
    snprintf(buf, sizeof buf, "%.*g", p, v);
    bool ok;
    if (t == HLO_F64) ok = strtod(buf, NULL) == v;
    else if (t == HLO_F32) ok = strtof(buf, NULL) == (float)v && (float)strtod(buf, NULL) == (float)v;
    else ok = pr_half_reads_back(buf, t, ((const uint16_t *)base)[i]);
    if (ok) break;
  }
  sb_puts(sb, buf);
}

static void pr_scalar(char **sb, hlo_type t, const void *base, int64_t i) {
  switch (hlo_type_class_of(t)) {
  case HLO_CLASS_PRED: sb_puts(sb, ((const uint8_t *)base)[i] ? "true" : "false"); break;
  case HLO_CLASS_SINT: sb_printf(sb, "%lld", (long long)hlo_load_s64(t, base, i)); break;
  case HLO_CLASS_UINT: sb_printf(sb, "%llu", (unsigned long long)hlo_load_u64(t, base, i)); break;
  case HLO_CLASS_FLOAT: pr_float(sb, t, base, i); break;
  default: sb_puts(sb, "?"); break;
  }
}

/* ---- literals ----------------------------------------------------------------------------- */

/* Elements of dims [d, rank) starting at flat index |*pos|; XLA puts spaces inside the
   braces of nested levels (`{ { 1, 2 }, { 3, 4 } }`) but not for rank 1 (`{1, 2}`). */
static void pr_array_level(char **sb, const hlo_literal *l, int d, int64_t *pos) {
  const hlo_shape *s = &l->shape;
  bool nested = s->rank > 1;
  sb_puts(sb, nested && s->dims[d] > 0 ? "{ " : "{");
  for (int64_t k = 0; k < s->dims[d]; k++) {
    if (k) sb_puts(sb, ", ");
    if (d + 1 < s->rank) {
      pr_array_level(sb, l, d + 1, pos);
    } else {
      pr_scalar(sb, s->type, l->data, *pos);
      (*pos)++;
    }
  }
  sb_puts(sb, nested && s->dims[d] > 0 ? " }" : "}");
}

void hlo_print_literal(char **sb, const hlo_literal *l) {
  if (!l) { sb_puts(sb, "{...}"); return; }
  if (l->shape.type == HLO_TUPLE) {
    sb_puts(sb, "(");
    for (int i = 0; i < l->nelems; i++) {
      if (i) sb_puts(sb, ", ");
      hlo_print_literal(sb, l->elems[i]);
    }
    sb_puts(sb, ")");
    return;
  }
  /* a zero-element array has no data but still prints a brace per level ({ {}, {} } for
     f32[2,0]), which is what the parser reads back (fuzz_hlo, issue 14) */
  if (l->shape.type == HLO_TOKEN || (!l->data && hlo_shape_numel(&l->shape) != 0)) {
    sb_puts(sb, l->shape.rank == 0 ? "0" : "{}");
    return;
  }
  if (l->shape.rank == 0) {
    pr_scalar(sb, l->shape.type, l->data, 0);
    return;
  }
  int64_t pos = 0;
  pr_array_level(sb, l, 0, &pos);
}

/* ---- attributes --------------------------------------------------------------------------- */

static void pr_ints(char **sb, const char *key, hlo_ints v) {
  sb_printf(sb, ", %s={", key);
  for (int i = 0; i < v.n; i++) sb_printf(sb, "%s%lld", i ? "," : "", (long long)v.v[i]);
  sb_puts(sb, "}");
}

static void pr_ints_if(char **sb, const char *key, hlo_ints v) {
  if (v.n > 0) pr_ints(sb, key, v);
}

static int64_t pr_at(hlo_ints v, int i, int64_t dflt) { return i < v.n ? v.v[i] : dflt; }

static bool pr_any_not(hlo_ints v, int64_t dflt) {
  for (int i = 0; i < v.n; i++)
    if (v.v[i] != dflt) return true;
  return false;
}

/* window={size=1x10 stride=.. pad=0_0x9_0 lhs_dilate=.. rhs_dilate=..}: parts at their
   defaults are left out, as window_util::ToString does. */
static void pr_window(char **sb, const hlo_window *w) {
  int n = w->size.n;
  sb_puts(sb, ", window={");
  const char *sep = "";
  if (n > 0) {
    sb_puts(sb, "size=");
    for (int i = 0; i < n; i++) sb_printf(sb, "%s%lld", i ? "x" : "", (long long)w->size.v[i]);
    sep = " ";
  }
  const struct { const char *key; hlo_ints v; } parts[] = {
    { "stride", w->stride }, { "lhs_dilate", w->base_dilation }, { "rhs_dilate", w->window_dilation },
  };
  if (pr_any_not(parts[0].v, 1)) {
    sb_printf(sb, "%sstride=", sep);
    for (int i = 0; i < n; i++) sb_printf(sb, "%s%lld", i ? "x" : "", (long long)pr_at(w->stride, i, 1));
    sep = " ";
  }
  if (pr_any_not(w->pad_lo, 0) || pr_any_not(w->pad_hi, 0)) {
    sb_printf(sb, "%spad=", sep);
    for (int i = 0; i < n; i++)
      sb_printf(sb, "%s%lld_%lld", i ? "x" : "", (long long)pr_at(w->pad_lo, i, 0),
                (long long)pr_at(w->pad_hi, i, 0));
    sep = " ";
  }
  for (int p = 1; p < 3; p++) {
    if (!pr_any_not(parts[p].v, 1)) continue;
    sb_printf(sb, "%s%s=", sep, parts[p].key);
    for (int i = 0; i < n; i++) sb_printf(sb, "%s%lld", i ? "x" : "", (long long)pr_at(parts[p].v, i, 1));
    sep = " ";
  }
  if (pr_any_not(w->reversal, 0)) {
    sb_printf(sb, "%srhs_reversal=", sep);
    for (int i = 0; i < n; i++) sb_printf(sb, "%s%lld", i ? "x" : "", (long long)pr_at(w->reversal, i, 0));
  }
  sb_puts(sb, "}");
}

/* dim_labels=b01f_01io->b01f, then the group counts that are not 1 (XLA's order). */
static void pr_conv(char **sb, const hlo_instr *ins) {
  const hlo_conv_dims *cd = &ins->conv;
  int rank = cd->in_spatial.n + 2;
  struct { int64_t a, b; hlo_ints sp; char ca, cb; const char *sep; } parts[3] = {
    { cd->in_batch, cd->in_feature, cd->in_spatial, 'b', 'f', "_" },
    { cd->k_in, cd->k_out, cd->k_spatial, 'i', 'o', "->" },
    { cd->out_batch, cd->out_feature, cd->out_spatial, 'b', 'f', "" },
  };
  if (ins->window.size.n > 0) pr_window(sb, &ins->window);
  sb_puts(sb, ", dim_labels=");
  for (int p = 0; p < 3; p++) {
    char s[HLO_MAX_RANK + 3] = { 0 };
    for (int d = 0; d < rank && d <= HLO_MAX_RANK; d++) s[d] = '?';
    if (parts[p].a >= 0 && parts[p].a < rank) s[parts[p].a] = parts[p].ca;
    if (parts[p].b >= 0 && parts[p].b < rank) s[parts[p].b] = parts[p].cb;
    for (int i = 0; i < parts[p].sp.n; i++)
      if (parts[p].sp.v[i] >= 0 && parts[p].sp.v[i] < rank) s[parts[p].sp.v[i]] = (char)('0' + i);
    sb_printf(sb, "%s%s", s, parts[p].sep);
  }
  if (cd->feature_groups != 1) sb_printf(sb, ", feature_group_count=%lld", (long long)cd->feature_groups);
  if (cd->batch_groups != 1) sb_printf(sb, ", batch_group_count=%lld", (long long)cd->batch_groups);
}

static void pr_padding(char **sb, const hlo_instr *ins) {
  bool interior = pr_any_not(ins->pad_interior, 0);
  sb_puts(sb, ", padding=");
  for (int i = 0; i < ins->pad_lo.n; i++) {
    sb_printf(sb, "%s%lld_%lld", i ? "x" : "", (long long)ins->pad_lo.v[i],
              (long long)pr_at(ins->pad_hi, i, 0));
    if (interior) sb_printf(sb, "_%lld", (long long)pr_at(ins->pad_interior, i, 0));
  }
}

static void pr_slice(char **sb, const hlo_instr *ins) {
  sb_puts(sb, ", slice={");
  for (int i = 0; i < ins->slice_start.n; i++) {
    int64_t st = pr_at(ins->slice_stride, i, 1);
    sb_printf(sb, "%s[%lld:%lld", i ? ", " : "", (long long)ins->slice_start.v[i],
              (long long)pr_at(ins->slice_limit, i, 0));
    if (st != 1) sb_printf(sb, ":%lld", (long long)st);
    sb_puts(sb, "]");
  }
  sb_puts(sb, "}");
}

static void pr_gather(char **sb, const hlo_gather_dims *g) {
  pr_ints(sb, "offset_dims", g->offset_dims);
  pr_ints(sb, "collapsed_slice_dims", g->collapsed_slice_dims);
  pr_ints(sb, "start_index_map", g->start_index_map);
  pr_ints_if(sb, "operand_batching_dims", g->operand_batching_dims);
  pr_ints_if(sb, "start_indices_batching_dims", g->start_indices_batching_dims);
  sb_printf(sb, ", index_vector_dim=%lld", (long long)g->index_vector_dim);
  pr_ints(sb, "slice_sizes", g->slice_sizes);
  if (g->indices_are_sorted) sb_puts(sb, ", indices_are_sorted=true");
}

static void pr_scatter(char **sb, const hlo_scatter_dims *s) {
  pr_ints(sb, "update_window_dims", s->update_window_dims);
  pr_ints(sb, "inserted_window_dims", s->inserted_window_dims);
  pr_ints(sb, "scatter_dims_to_operand_dims", s->scatter_dims_to_operand_dims);
  pr_ints_if(sb, "input_batching_dims", s->input_batching_dims);
  pr_ints_if(sb, "scatter_indices_batching_dims", s->scatter_indices_batching_dims);
  sb_printf(sb, ", index_vector_dim=%lld", (long long)s->index_vector_dim);
  if (s->indices_are_sorted) sb_puts(sb, ", indices_are_sorted=true");
  if (s->unique_indices) sb_puts(sb, ", unique_indices=true");
}

static void pr_dot(char **sb, const hlo_dot_dims *d) {
  pr_ints_if(sb, "lhs_batch_dims", d->lhs_batch);
  pr_ints_if(sb, "lhs_contracting_dims", d->lhs_contract);
  pr_ints_if(sb, "rhs_batch_dims", d->rhs_batch);
  pr_ints_if(sb, "rhs_contracting_dims", d->rhs_contract);
}

/* Names print bare, like JAX's dumps, except those XLA's lexer would not read as a name
   without the `%` sigil (e.g. "30", which it would take for a number). */
static const char *pr_pct(const char *name) {
  char c = name[0];
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ? "" : "%";
}
#define PR_NM(n) pr_pct(n), (n)

static const char *pr_call(const hlo_instr *ins, int i) {
  return i < ins->ncalls && ins->calls[i] ? ins->calls[i]->name : "?";
}

/* Called computations, after the op's own attributes (XLA's order). A pred-indexed
   conditional must use true_computation/false_computation: XLA's parser insists. */
static void pr_calls(char **sb, const hlo_instr *ins) {
  switch (ins->op) {
  case HLO_OP_FUSION: sb_printf(sb, ", calls=%s%s", PR_NM(pr_call(ins, 0))); break;
  case HLO_OP_WHILE:
    sb_printf(sb, ", condition=%s%s, body=%s%s", PR_NM(pr_call(ins, 0)), PR_NM(pr_call(ins, 1)));
    break;
  case HLO_OP_SELECT_AND_SCATTER:
    sb_printf(sb, ", select=%s%s, scatter=%s%s", PR_NM(pr_call(ins, 0)), PR_NM(pr_call(ins, 1)));
    break;
  case HLO_OP_CONDITIONAL:
    if (ins->noperands > 0 && ins->operands[0]->shape.type == HLO_PRED && ins->ncalls == 2) {
      sb_printf(sb, ", true_computation=%s%s, false_computation=%s%s", PR_NM(pr_call(ins, 0)),
                PR_NM(pr_call(ins, 1)));
    } else {
      sb_puts(sb, ", branch_computations={");
      for (int i = 0; i < ins->ncalls; i++) sb_printf(sb, "%s%s%s", i ? ", " : "", PR_NM(pr_call(ins, i)));
      sb_puts(sb, "}");
    }
    break;
  default:
    if (ins->ncalls > 0) sb_printf(sb, ", to_apply=%s%s", PR_NM(pr_call(ins, 0)));
    break;
  }
}

/* jaxlib's LAPACK targets: matrix operands (not orgqr's tau) column-major in their last two dims (the constraint
   XLA's layout assignment honours), the typed FFI, the attribute dictionary. */
static void pr_custom(char **sb, const hlo_instr *ins) {   /* keys sorted, as JAX prints them */
  const hlo_custom_call *cc = &ins->custom;
  sb_printf(sb, ", custom_call_target=\"%s\", operand_layout_constraints={", hlo_custom_target_name(cc->target));
  for (int k = 0; k < ins->noperands; k++) {
    hlo_shape s = ins->operands[k]->shape;
    bool vec = k == 1 && cc->target > HLO_CUSTOM_NONE && hlo_custom_lapack_op(cc->target) == HLO_LAPACK_ORGQR;
    if (hlo_shape_is_array(&s) && s.rank >= 2 && !vec) {   /* minor-to-major {r-2, r-1, r-3, ..., 0} */
      s.minor_to_major[0] = (int8_t)(s.rank - 2), s.minor_to_major[1] = (int8_t)(s.rank - 1);
      for (int i = 2; i < s.rank; i++) s.minor_to_major[i] = (int8_t)(s.rank - 1 - i);
      s.has_layout = true;
    }
    if (k) sb_puts(sb, ", ");
    hlo_shape_print(sb, &s, true);
  }
  sb_puts(sb, "}, api_version=API_VERSION_TYPED_FFI, backend_config={");
  const struct { const char *k; int64_t v; } kv[] = { { "diag", cc->diag }, { "mode", cc->mode },
                                                      { "side", cc->side }, { "trans_x", cc->trans_x },
                                                      { "uplo", cc->uplo } };
  bool first = true;
  for (int i = 0; i < 5; i++)
    if (kv[i].v) {
      sb_printf(sb, "%s%s = %lld : ui8", first ? "" : ", ", kv[i].k, (long long)kv[i].v);
      first = false;
    }
  sb_puts(sb, "}");
}

static void pr_attrs(char **sb, const hlo_instr *ins) {
  switch (ins->op) {
  case HLO_OP_IOTA: sb_printf(sb, ", iota_dimension=%lld", (long long)ins->index); break;
  case HLO_OP_GET_TUPLE_ELEMENT: sb_printf(sb, ", index=%lld", (long long)ins->index); break;
  case HLO_OP_BROADCAST: case HLO_OP_TRANSPOSE: case HLO_OP_REVERSE: case HLO_OP_CONCATENATE:
  case HLO_OP_REDUCE: case HLO_OP_MAP: case HLO_OP_GET_DIMENSION_SIZE:
    pr_ints(sb, "dimensions", ins->dims);
    break;
  case HLO_OP_SORT:
    pr_ints(sb, "dimensions", ins->dims);
    if (ins->is_stable) sb_puts(sb, ", is_stable=true");
    break;
  case HLO_OP_SLICE: pr_slice(sb, ins); break;
  case HLO_OP_DYNAMIC_SLICE: pr_ints(sb, "dynamic_slice_sizes", ins->ds_sizes); break;
  case HLO_OP_PAD: pr_padding(sb, ins); break;
  case HLO_OP_COMPARE:
    sb_printf(sb, ", direction=%s", hlo_cmp_dir_name(ins->cmp_dir));
    if (ins->cmp_type != HLO_CMPT_DEFAULT) sb_printf(sb, ", type=%s", hlo_cmp_type_name(ins->cmp_type));
    break;
  case HLO_OP_DOT: pr_dot(sb, &ins->dot); break;
  case HLO_OP_TOPK:
    sb_printf(sb, ", k=%lld, largest=%s", (long long)ins->k, ins->largest ? "true" : "false");
    break;
  case HLO_OP_REDUCE_PRECISION:
    sb_printf(sb, ", exponent_bits=%lld, mantissa_bits=%lld", (long long)ins->exponent_bits,
              (long long)ins->mantissa_bits);
    break;
  case HLO_OP_GATHER: pr_gather(sb, &ins->gather); break;
  case HLO_OP_SCATTER: pr_scatter(sb, &ins->scatter); break;
  case HLO_OP_REDUCE_WINDOW: case HLO_OP_SELECT_AND_SCATTER: pr_window(sb, &ins->window); break;
  case HLO_OP_CONVOLUTION: pr_conv(sb, ins); break;
  case HLO_OP_FUSION: sb_printf(sb, ", kind=%s", hlo_fusion_kind_name(ins->fusion_kind)); break;
  case HLO_OP_CUSTOM_CALL: pr_custom(sb, ins); break;
  case HLO_OP_RNG_BIT_GENERATOR: sb_printf(sb, ", algorithm=%s", hlo_rng_algorithm_name(ins->rng_algorithm)); break;
  default: break;
  }
  pr_calls(sb, ins);
}

/* ---- instructions, computations, modules ------------------------------------------------ */

void hlo_print_instr(char **sb, const hlo_instr *ins) {
  bool root = ins->parent ? ins->parent->root == ins : ins->is_root;
  sb_printf(sb, "%s%s%s = ", root ? "ROOT " : "", PR_NM(ins->name));
  hlo_shape_print(sb, &ins->shape, true);
  sb_printf(sb, " %s(", hlo_opcode_name(ins->op));
  if (ins->op == HLO_OP_PARAMETER) {
    sb_printf(sb, "%lld", (long long)ins->index);
  } else if (ins->op == HLO_OP_CONSTANT) {
    hlo_print_literal(sb, ins->literal);
  } else {
    for (int i = 0; i < ins->noperands; i++)
      sb_printf(sb, "%s%s%s", i ? ", " : "", PR_NM(ins->operands[i] ? ins->operands[i]->name : "?"));
  }
  sb_puts(sb, ")");
  pr_attrs(sb, ins);
}

static void pr_comp(char **sb, const hlo_comp *c) {
  bool entry = c->is_entry || (c->module && c->module->entry == c);
  sb_printf(sb, "%s%s%s {\n", entry ? "ENTRY " : "", PR_NM(c->name));
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    sb_puts(sb, "  ");
    hlo_print_instr(sb, c->instrs[i]);
    sb_puts(sb, "\n");
  }
  sb_puts(sb, "}\n");
}

/* Post-order over the call graph: callees first. |state|: 0 new, 1 on the stack (a cycle,
   which the verifier reports; here it only must not loop), 2 printed. */
static void pr_comp_dfs(char **sb, const hlo_module *m, const hlo_comp *c, uint8_t *state) {
  ptrdiff_t k = 0;
  while (k < arrlen(m->comps) && m->comps[k] != c) k++;
  if (k == arrlen(m->comps) || state[k]) return;
  state[k] = 1;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    for (int j = 0; j < c->instrs[i]->ncalls; j++)
      if (c->instrs[i]->calls[j]) pr_comp_dfs(sb, m, c->instrs[i]->calls[j], state);
  if (*sb && arrlen(*sb) > 1) sb_puts(sb, "\n");
  pr_comp(sb, c);
  state[k] = 2;
}

static void pr_entry_layout(char **sb, const hlo_comp *e) {
  sb_puts(sb, ", entry_computation_layout={(");
  for (ptrdiff_t i = 0; i < arrlen(e->params); i++) {
    if (i) sb_puts(sb, ", ");
    if (e->params[i]) hlo_shape_print(sb, &e->params[i]->shape, true);
  }
  sb_puts(sb, ")->");
  if (e->root) hlo_shape_print(sb, &e->root->shape, true);
  sb_puts(sb, "}");
}

static void pr_shape_index(char **sb, hlo_ints idx) {
  sb_puts(sb, "{");
  for (int i = 0; i < idx.n; i++) sb_printf(sb, "%s%lld", i ? "," : "", (long long)idx.v[i]);
  sb_puts(sb, "}");
}

/* XLA's HloInputOutputAliasConfig::ToShortString, in the header where XLA puts it:
   `, input_output_alias={ {0}: (0, {}, may-alias), {1}: (2, {1}, must-alias) }`. */
static void pr_io_alias(char **sb, const hlo_module *m) {
  if (m->naliases == 0) return;
  sb_puts(sb, ", input_output_alias={ ");
  for (int k = 0; k < m->naliases; k++) {
    const hlo_alias *a = &m->aliases[k];
    if (k) sb_puts(sb, ", ");
    pr_shape_index(sb, a->output);
    sb_printf(sb, ": (%lld, ", (long long)a->param);
    pr_shape_index(sb, a->param_index);
    sb_puts(sb, a->must ? ", must-alias)" : ", may-alias)");
  }
  sb_puts(sb, " }");
}

hj_status hlo_print_module(const hlo_module *m, char **out) {
  *out = NULL;
  char *head = NULL, *body = NULL;
  sb_printf(&head, "HloModule %s", m->name);
  pr_io_alias(&head, m);
  if (m->entry) pr_entry_layout(&head, m->entry);
  sb_puts(&head, "\n\n");
  ptrdiff_t n = arrlen(m->comps);
  uint8_t *state = calloc((size_t)n + 1, 1);
  if (!state) {
    arrfree(head);
    return hj__err(m->ctx, HJ_ERR_OOM, "out of memory printing module '%s'", m->name);
  }
  for (ptrdiff_t i = 0; i < n; i++)
    if (m->comps[i] != m->entry) pr_comp_dfs(&body, m, m->comps[i], state);
  if (m->entry) pr_comp_dfs(&body, m, m->entry, state);
  free(state);
  size_t lh = strlen(head), lb = body ? strlen(body) : 0;
  char *s = malloc(lh + lb + 1);
  if (s) {
    memcpy(s, head, lh);
    if (lb) memcpy(s + lh, body, lb);
    s[lh + lb] = 0;
  }
  arrfree(head);
  arrfree(body);
  if (!s) return hj__err(m->ctx, HJ_ERR_OOM, "out of memory printing module '%s'", m->name);
  *out = s;
  return HJ_OK;
}
#undef PR_NM

/* ir/alias.c — the entry computation's input_output_alias (XLA's HloInputOutputAliasConfig,
   what JAX's donate_argnums lowers to): which output leaves are written into which
   parameter's buffer.

   XLA names both sides by ShapeIndex (a path of tuple indices; {} for the whole, non-tuple
   shape) and the text spells the config in the module header:
       HloModule m, input_output_alias={ {0}: (2, {}, may-alias), {1}: (3, {}, may-alias) }
   The runtime counts buffers as flattened leaves (depth first: hj_exec_run's order), so
   this file converts between the two: for root (f32[4], (f32[2], s32[])), ShapeIndex {1,0}
   is leaf 1 and {1,1} leaf 2; for parameters, leaf numbers run over all parameters in
   order (parameter 0's leaves first).

   Invariants (hlo_verify_aliases): each entry names an array leaf on both sides, the two
   have the same byte size (XLA's rule; dims may differ), no output leaf and no parameter
   leaf appears in two entries. Entries are kept sorted by output leaf, the order XLA prints
   them in (its ShapeTree walks leaves depth first too). Passes keep the entry's signature
   (the API's flattened leaves depend on it), so an entry stays valid through them. */
#include "ir.h"

/* Leaves of |s| (1 for an array or token). */
static int ira_nleaves(const hlo_shape *s) {
  if (s->type != HLO_TUPLE) return 1;
  int n = 0;
  for (int i = 0; i < s->ntuple; i++) n += ira_nleaves(&s->tuple[i]);
  return n;
}

int hlo_shape_index_leaf(const hlo_shape *s, hlo_ints idx) {
  int leaf = 0;
  for (int d = 0; d < idx.n; d++) {
    if (s->type != HLO_TUPLE || idx.v[d] < 0 || idx.v[d] >= s->ntuple) return -1;
    for (int64_t k = 0; k < idx.v[d]; k++) leaf += ira_nleaves(&s->tuple[k]);
    s = &s->tuple[idx.v[d]];
  }
  return hlo_shape_is_array(s) ? leaf : -1;
}

int hlo_leaf_shape_index(const hlo_shape *s, int leaf, int64_t *idx) {
  int n = 0;
  if (leaf < 0 || leaf >= ira_nleaves(s)) return -1;
  while (s->type == HLO_TUPLE) {
    int k = 0;
    while (k < s->ntuple && leaf >= ira_nleaves(&s->tuple[k])) leaf -= ira_nleaves(&s->tuple[k++]);
    if (k == s->ntuple || n == HLO_MAX_SHAPE_INDEX) return -1;
    idx[n++] = k;
    s = &s->tuple[k];
  }
  return n;
}

/* First flattened leaf of entry parameter |p| and the shape's leaf of |idx| in it. */
static int ira_param_leaf(const hlo_comp *e, int64_t p, hlo_ints idx) {
  if (p < 0 || p >= arrlen(e->params) || !e->params[p]) return -1;
  int base = 0;
  for (int64_t k = 0; k < p; k++) base += e->params[k] ? ira_nleaves(&e->params[k]->shape) : 0;
  int l = hlo_shape_index_leaf(&e->params[p]->shape, idx);
  return l < 0 ? -1 : base + l;
}

bool hlo_alias_flat(const hlo_module *m, int k, int *out_leaf, int *in_leaf) {
  if (!m || !m->entry || !m->entry->root || k < 0 || k >= m->naliases) return false;
  const hlo_alias *a = &m->aliases[k];
  *out_leaf = hlo_shape_index_leaf(&m->entry->root->shape, a->output);
  *in_leaf = ira_param_leaf(m->entry, a->param, a->param_index);
  return *out_leaf >= 0 && *in_leaf >= 0;
}

int hlo_module_output_alias(const hlo_module *m, int out_leaf) {
  for (int k = 0; m && k < m->naliases; k++) {
    int o, i;
    if (hlo_alias_flat(m, k, &o, &i) && o == out_leaf) return i;
  }
  return -1;
}

/* Lexicographic order of ShapeIndices: depth-first leaf order. */
static int ira_cmp(hlo_ints a, hlo_ints b) {
  for (int i = 0; i < a.n && i < b.n; i++)
    if (a.v[i] != b.v[i]) return a.v[i] < b.v[i] ? -1 : 1;
  return a.n < b.n ? -1 : a.n > b.n;
}

hj_status hlo_module_add_alias(hlo_module *m, const int64_t *output, int noutput, int64_t param,
                               const int64_t *param_index, int nparam_index, bool must) {
  if (noutput < 0 || noutput > HLO_MAX_SHAPE_INDEX || nparam_index < 0 ||
      nparam_index > HLO_MAX_SHAPE_INDEX)
    return hj__err(m->ctx, HJ_ERR_INVALID_ARG, "input_output_alias: shape index too deep");
  hlo_alias a = { .param = param, .must = must };
  a.output = hlo_ints_dup(m, output, noutput);
  a.param_index = hlo_ints_dup(m, param_index, nparam_index);
  hlo_alias *v = hlo_alloc(m, sizeof *v * (size_t)(m->naliases + 1));
  if ((noutput && !a.output.v) || (nparam_index && !a.param_index.v) || !v)
    return hj__err(m->ctx, HJ_ERR_OOM, "out of memory for an input_output_alias entry");
  int at = 0;
  while (at < m->naliases && ira_cmp(m->aliases[at].output, a.output) < 0) at++;
  if (at < m->naliases && ira_cmp(m->aliases[at].output, a.output) == 0)
    return hj__err(m->ctx, HJ_ERR_INVALID_ARG, "input_output_alias: output already aliases parameter %lld",
                   (long long)m->aliases[at].param);
  if (m->naliases) memcpy(v, m->aliases, sizeof *v * (size_t)at);
  v[at] = a;
  if (m->naliases > at) memcpy(v + at + 1, m->aliases + at, sizeof *v * (size_t)(m->naliases - at));
  m->aliases = v;     /* the old array stays in the arena: entries are few */
  m->naliases++;
  return HJ_OK;
}

bool hlo_module_copy_aliases(hlo_module *dst, const hlo_module *src) {
  for (int k = 0; k < src->naliases; k++) {
    const hlo_alias *a = &src->aliases[k];
    if (hlo_module_add_alias(dst, a->output.v, a->output.n, a->param, a->param_index.v,
                             a->param_index.n, a->must) != HJ_OK)
      return false;
  }
  return true;
}

/* "{1,0}" of |idx| into |buf|. */
static const char *ira_idx_str(hlo_ints idx, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "{");
  for (int i = 0; i < idx.n && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)idx.v[i]);
  if (k < n) snprintf(buf + k, n - k, "}");
  return buf;
}

hj_status hlo_verify_aliases(const hlo_module *m) {
  if (m->naliases == 0) return HJ_OK;
  const hlo_comp *e = m->entry;
  int nout = e->root ? ira_nleaves(&e->root->shape) : 0, nin = 0;
  for (ptrdiff_t p = 0; p < arrlen(e->params); p++) nin += e->params[p] ? ira_nleaves(&e->params[p]->shape) : 0;
  char *seen = calloc((size_t)(nout + nin) + 1, 1);
  if (!seen) return hj__err(m->ctx, HJ_ERR_OOM, "out of memory verifying '%s'", m->name);
  hj_status st = HJ_OK;
  const hlo_shape **outs = NULL, **ins = NULL;
  if (e->root) hlo_shape_leaves(&e->root->shape, &outs);
  for (ptrdiff_t p = 0; p < arrlen(e->params); p++)
    if (e->params[p]) hlo_shape_leaves(&e->params[p]->shape, &ins);
  for (int k = 0; k < m->naliases && st == HJ_OK; k++) {
    const hlo_alias *a = &m->aliases[k];
    char b0[64], b1[64], s0[160], s1[160];
    int o = e->root ? hlo_shape_index_leaf(&e->root->shape, a->output) : -1;
    int i = ira_param_leaf(e, a->param, a->param_index);
    ira_idx_str(a->output, b0, sizeof b0);
    ira_idx_str(a->param_index, b1, sizeof b1);
    if (o < 0)
      st = hj__err(m->ctx, HJ_ERR_SHAPE, "verifier: input_output_alias: output %s is not an array "
                   "of the entry's result %s", b0, hlo_shape_str(&e->root->shape, s0, sizeof s0));
    else if (i < 0)
      st = hj__err(m->ctx, HJ_ERR_SHAPE, "verifier: input_output_alias: parameter %lld at %s is not "
                   "an array parameter leaf of the entry (%d parameters)", (long long)a->param, b1,
                   (int)arrlen(e->params));
    else if (hlo_shape_bytes(outs[o]) != hlo_shape_bytes(ins[i]))
      st = hj__err(m->ctx, HJ_ERR_SHAPE, "verifier: input_output_alias: output %s (%s) and parameter "
                   "%lld at %s (%s) differ in size", b0, hlo_shape_str(outs[o], s0, sizeof s0),
                   (long long)a->param, b1, hlo_shape_str(ins[i], s1, sizeof s1));
    else if (seen[o] || seen[nout + i])
      st = hj__err(m->ctx, HJ_ERR_SHAPE, "verifier: input_output_alias: %s %s appears twice",
                   seen[o] ? "output" : "parameter", seen[o] ? b0 : b1);
    else
      seen[o] = seen[nout + i] = 1;
  }
  arrfree(outs);
  arrfree(ins);
  free(seen);
  return st;
}

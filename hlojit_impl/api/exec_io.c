/* api/exec_io.c — an executable's inputs and outputs by name, its donated pairs, and the
   inputs bound to it (hlojit.h: hj_exec_input_name, hj_exec_find_input, hj_exec_bind, ...).

   Names are made once, at compile time, one per flattened leaf (hlojit.h states the rules):
   from the graph when it was compiled with hj_compile (graph_io.c kept the caller's
   names), else from the module (parameter instruction names; outputs out<k>). A tuple
   parameter or output leaf appends its ShapeIndex: "state{1}", "kv{0,1}".

   Bindings: e->bound[i] holds one reference to the buffer bound to input i (checked
   against the leaf's dtype and shape when bound); exec.c's run takes the unbound inputs
   from the caller and the rest from here. */
#include "api.h"
#include <stdlib.h>

static char *eio_name(const char *base, const hlo_shape *s, int leaf, const char *dflt, int k) {
  char buf[512];
  int64_t idx[HLO_MAX_SHAPE_INDEX];
  int n = s->type == HLO_TUPLE ? hlo_leaf_shape_index(s, leaf, idx) : 0;
  if (!base) snprintf(buf, sizeof buf, "%s%d", dflt, k);
  else if (n <= 0) snprintf(buf, sizeof buf, "%s", base);
  else {
    size_t at = (size_t)snprintf(buf, sizeof buf, "%.400s{", base);
    for (int i = 0; i < n && at < sizeof buf; i++)
      at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%lld", i ? "," : "", (long long)idx[i]);
    if (at < sizeof buf) snprintf(buf + at, sizeof buf - at, "}");
  }
  size_t len = strlen(buf) + 1;
  char *d = malloc(len);
  if (d) memcpy(d, buf, len);
  return d;
}

static int eio_nleaves(const hlo_shape *s) {
  if (s->type != HLO_TUPLE) return 1;
  int n = 0;
  for (int i = 0; i < s->ntuple; i++) n += eio_nleaves(&s->tuple[i]);
  return n;
}

hj_status hj__exec_io_init(hj_exec_t *e, const hj_graph_t *g) {
  const hlo_comp *c = e->m->entry;
  bool ok = true;
  for (ptrdiff_t p = 0, k = 0; p < arrlen(c->params); p++) {
    const hlo_shape *s = &c->params[p]->shape;
    const char *base = g ? (p < arrlen(g->param_names) ? g->param_names[p] : NULL) : c->params[p]->name;
    for (int j = 0; j < eio_nleaves(s); j++, k++) {
      char *nm = eio_name(base, s, j, "in", (int)k);
      ok = ok && nm;
      arrput(e->in_names, nm);
    }
  }
  const hlo_instr **outs = NULL;     /* the graph's outputs, or the root */
  if (g) for (ptrdiff_t j = 0; j < arrlen(g->outputs); j++) arrput(outs, g->outputs[j]);
  else if (c->root) arrput(outs, c->root);
  for (ptrdiff_t j = 0, k = 0; j < arrlen(outs); j++) {
    const hlo_shape *s = &outs[j]->shape;
    const char *base = g && j < arrlen(g->output_names) ? g->output_names[j] : NULL;
    for (int l = 0; l < eio_nleaves(s); l++, k++) {
      char *nm = eio_name(base, s, l, "out", (int)k);
      ok = ok && nm;
      arrput(e->out_names, nm);
    }
  }
  arrfree(outs);
  int nin = (int)arrlen(e->ins), nout = (int)arrlen(e->outs);
  e->bound = calloc((size_t)nin + 1, sizeof *e->bound);
  e->alias_in = malloc(sizeof(int) * ((size_t)nout + 1));
  ok = ok && e->bound && e->alias_in && arrlen(e->in_names) == nin && arrlen(e->out_names) == nout;
  for (int k = 0; ok && k < nout; k++) e->alias_in[k] = hlo_module_output_alias(e->m, k);
  return ok ? HJ_OK : hj__err(e->ctx, HJ_ERR_OOM, "out of memory naming the inputs of '%s'", e->m->name);
}

void hj__exec_io_free(hj_exec_t *e) {
  for (ptrdiff_t i = 0; i < arrlen(e->in_names); i++) free(e->in_names[i]);
  for (ptrdiff_t i = 0; i < arrlen(e->out_names); i++) free(e->out_names[i]);
  for (ptrdiff_t i = 0; e->bound && i < arrlen(e->ins); i++) hj_buffer_destroy(e->bound[i]);
  arrfree(e->in_names);
  arrfree(e->out_names);
  free(e->bound);
  free(e->alias_in);
  e->bound = NULL;
  e->alias_in = NULL;
}

const char *hj_exec_input_name(const hj_exec_t *e, int i) {
  return e && i >= 0 && i < arrlen(e->in_names) ? e->in_names[i] : NULL;
}
const char *hj_exec_output_name(const hj_exec_t *e, int i) {
  return e && i >= 0 && i < arrlen(e->out_names) ? e->out_names[i] : NULL;
}

static int eio_find(const hj_exec_t *e, char **names, const char *what, const char *name) {
  if (!e) return -1;
  if (!name) return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_find_%s: name is NULL", what), -1;
  int at = -1, n = 0;
  for (ptrdiff_t i = 0; i < arrlen(names); i++)
    if (strcmp(names[i], name) == 0 && n++ == 0) at = (int)i;
  if (n == 1) return at;
  if (n > 1) {
    hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_find_%s: %d %ss of '%s' are named '%.200s' (the first "
            "is %d): look them up by index", what, n, what, e->m->name, name, at);
    return -1;
  }
  char list[600];
  size_t k = 0;
  list[0] = 0;
  for (ptrdiff_t i = 0; i < arrlen(names) && k + 8 < sizeof list; i++)
    k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", names[i]);
  if (k >= sizeof list) snprintf(list + sizeof list - 5, 5, "...");
  hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_find_%s: '%s' has no %s named '%.200s' (%ss: %s)", what,
          e->m->name, what, name, what, list);
  return -1;
}

int hj_exec_find_input(const hj_exec_t *e, const char *name) { return eio_find(e, e ? e->in_names : NULL, "input", name); }
int hj_exec_find_output(const hj_exec_t *e, const char *name) { return eio_find(e, e ? e->out_names : NULL, "output", name); }

int hj_exec_output_alias(const hj_exec_t *e, int output) {
  return e && output >= 0 && output < arrlen(e->outs) ? e->alias_in[output] : -1;
}

int hj_module_output_alias(const hj_module_t *m, int output) { return hlo_module_output_alias(m, output); }

hj_status hj_exec_bind(hj_exec_t *e, int i, hj_buffer_t *b) {
  if (!e) return HJ_ERR_INVALID_ARG;
  int n = (int)arrlen(e->ins);
  if (i < 0 || i >= n)
    return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_bind: input %d out of range ('%s' has %d)", i,
                   e->m->name, n);
  if (b && !hj__buffer_fits(b, e->ins[i])) {
    char b0[128], b1[128];
    hlo_shape bs = hj__buffer_hlo_shape(b);
    return hj__err(e->ctx, HJ_ERR_SHAPE, "hj_exec_bind: input %d ('%s') of '%s' is %s, the buffer is %s", i,
                   e->in_names[i], e->m->name, hlo_shape_str(e->ins[i], b0, sizeof b0),
                   hlo_shape_str(&bs, b1, sizeof b1));
  }
  hj_buffer_t *old = e->bound[i];
  e->bound[i] = hj_buffer_retain(b);
  e->nbound += (b != NULL) - (old != NULL);
  hj_buffer_destroy(old);
  return HJ_OK;
}

hj_status hj_exec_bind_name(hj_exec_t *e, const char *name, hj_buffer_t *b) {
  if (!e) return HJ_ERR_INVALID_ARG;
  int i = hj_exec_find_input(e, name);
  return i < 0 ? HJ_ERR_INVALID_ARG : hj_exec_bind(e, i, b);
}

int hj_exec_num_unbound_inputs(const hj_exec_t *e) { return e ? (int)arrlen(e->ins) - e->nbound : 0; }

hj_buffer_t *hj_exec_bound(const hj_exec_t *e, int i) {
  return e && i >= 0 && i < arrlen(e->ins) ? e->bound[i] : NULL;
}

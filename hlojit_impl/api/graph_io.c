/* api/graph_io.c — what a graph says about its inputs and outputs beyond their shapes:
   names (hj_param's name, hj_graph_output_named) and donation (hj_graph_alias,
   hj_graph_output_aliased). graph_module.c turns the aliases into the module's
   input_output_alias; exec.c turns the names into the executable's look-up tables.

   Invariants: g->param_names[i] is parameter i's name as the caller gave it (NULL when
   none) — the instruction's own name is an HLO identifier made unique with ".<id>", so it
   is not what a look-up should match; g->output_names may be shorter than g->outputs (the
   missing entries are unnamed). g->aliases holds (flattened output leaf, parameter
   instruction) pairs, checked here for everything a message must name: a top graph, an
   array parameter of it, an existing output leaf, equal byte sizes, no repeats. */
#include "api.h"
#include <stdlib.h>

hj_status hj_graph_output_named(hj_graph_t *g, hj_tensor_t t, const char *name) {
  hj_status st = hj_graph_output(g, t);
  if (st != HJ_OK || !name || !*name) return st;
  while (arrlen(g->output_names) < arrlen(g->outputs)) arrput(g->output_names, NULL);
  char *d = hj__strdup(name);
  if (!d) return hj__err(g->ctx, HJ_ERR_OOM, "hj_graph_output_named: out of memory");
  g->output_names[arrlen(g->outputs) - 1] = d;
  return HJ_OK;
}

/* The shape of flattened output leaf |k| of |g|, NULL when there is none. */
static const hlo_shape *gio_output_leaf(const hj_graph_t *g, int k) {
  const hlo_shape *r = NULL;
  for (ptrdiff_t j = 0; j < arrlen(g->outputs) && !r; j++) {
    const hlo_shape **v = NULL;
    hlo_shape_leaves(&g->outputs[j]->shape, &v);
    if (k < arrlen(v)) r = v[k];
    else k -= (int)arrlen(v);
    arrfree(v);
  }
  return r;
}

static int gio_output_leaves(const hj_graph_t *g) {
  int n = 0;
  for (ptrdiff_t j = 0; j < arrlen(g->outputs); j++) {
    const hlo_shape **v = NULL;
    hlo_shape_leaves(&g->outputs[j]->shape, &v);
    n += (int)arrlen(v);
    arrfree(v);
  }
  return n;
}

hj_status hj_graph_alias(hj_graph_t *g, int output, hj_tensor_t param) {
  const char *fn = "hj_graph_alias";
  if (!g) return HJ_ERR_INVALID_ARG;
  if (g->top != g)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "%s: '%s' is a sub-graph: only a top graph's outputs "
                   "alias its parameters", fn, hj__graph_name(g));
  hlo_instr *p = param.graph == g ? hj__tensor_instr(fn, param) : NULL;
  if (!p || p->op != HLO_OP_PARAMETER || !hlo_shape_is_array(&p->shape))
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "%s: the tensor is not an array parameter of graph '%s'",
                   fn, hj__graph_name(g));
  const hlo_shape *o = output >= 0 ? gio_output_leaf(g, output) : NULL;
  if (!o)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "%s: output %d does not exist (graph '%s' has %d output "
                   "leaves so far)", fn, output, hj__graph_name(g), gio_output_leaves(g));
  char s0[160], s1[160];
  if (!hlo_shape_is_array(o) || hlo_shape_bytes(o) != hlo_shape_bytes(&p->shape))
    return hj__err(g->ctx, HJ_ERR_SHAPE, "%s: output %d (%s) and parameter '%s' (%s) differ in size", fn,
                   output, hlo_shape_str(o, s0, sizeof s0), p->name, hlo_shape_str(&p->shape, s1, sizeof s1));
  for (ptrdiff_t k = 0; k < arrlen(g->aliases); k++) {
    if (g->aliases[k].output == output)
      return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "%s: output %d already aliases parameter '%s'", fn,
                     output, g->aliases[k].param->name);
    if (g->aliases[k].param == p)
      return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "%s: parameter '%s' is already aliased by output %d", fn,
                     p->name, g->aliases[k].output);
  }
  struct hj_graph_alias a = { output, p };
  arrput(g->aliases, a);
  return HJ_OK;
}

hj_status hj_graph_output_aliased(hj_graph_t *g, hj_tensor_t t, hj_tensor_t param) {
  if (!g) return HJ_ERR_INVALID_ARG;
  hlo_instr *ins = t.graph == g ? hj__tensor_instr("hj_graph_output_aliased", t) : NULL;
  if (ins && !hlo_shape_is_array(&ins->shape))
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "hj_graph_output_aliased: the output is a tuple");
  int k = gio_output_leaves(g);
  hj_status st = hj_graph_output(g, t);
  if (st == HJ_OK && (st = hj_graph_alias(g, k, param)) != HJ_OK) arrpop(g->outputs);
  return st;
}

/* eval_sprog.c — scalar programs and map: the evaluator's fast path for the small scalar
   computations that reduce, scatter, sort, map and reduce-window apply per element.

   A computation whose instructions are all rank-0 parameters, constants and elementwise
   ops (the usual reducer, comparator or map body), its root possibly a tuple of them, is
   a scalar program. evs_vprog runs one directly on element storage: for one call
   (hlo_eval_scalar_call) without allocating per instruction, and for map over all lanes at
   once, one kernel call (eval_elem.c) per instruction. Anything else goes to the frame
   walker (eval.c, hlo_eval_computation). */
#include "eval_internal.h"
#include <stdlib.h>

/* ---- scalar programs ------------------------------------------------------------------------ */

#define EVS_MAX 64

static bool evs_is_scalar(const hlo_shape *s) { return hlo_shape_is_array(s) && s->rank == 0; }

/* |c| is a scalar program: rank-0 parameters, constants and elementwise ops only, the root
   possibly a tuple of them. */
static bool evs_is_sprog(const hlo_comp *c) {
  int m = (int)arrlen(c->instrs);
  if (m > EVS_MAX || !c->root) return false;
  for (ptrdiff_t i = 0; i < arrlen(c->params); i++)
    if (!c->params[i]) return false;
  for (int j = 0; j < m; j++) {
    const hlo_instr *ins = c->instrs[j];
    hlo_elem_op e;
    if (ins->op == HLO_OP_TUPLE) {
      if (ins != c->root || ins->noperands > EVS_MAX) return false;
      for (int k = 0; k < ins->noperands; k++)
        if (!evs_is_scalar(&ins->operands[k]->shape)) return false;
      continue;
    }
    if (!evs_is_scalar(&ins->shape)) return false;
    if (ins->op == HLO_OP_PARAMETER) continue;
    if (ins->op == HLO_OP_CONSTANT) {
      if (!ins->literal || ins->literal->shape.type != ins->shape.type ||
          ins->literal->nbytes != hlo_type_size(ins->shape.type))
        return false;
      continue;
    }
    if (!hlo_elem_op_of(ins, &e) || hlo_elem_unsupported(&e)) return false;
    for (int k = 0; k < ins->noperands; k++)
      if (!evs_is_scalar(&ins->operands[k]->shape)) return false;
  }
  return true;
}

/* Position of |op| among the instructions of |c| before |j| (usually right before). */
static int evs_find(const hlo_comp *c, int j, const hlo_instr *op) {
  for (int q = j - 1; q >= 0; q--)
    if (c->instrs[q] == op) return q;
  return -1;
}

static void evs_lanes_out(const void *src, bool bc, int sz, void *dst, int64_t n) {
  if (!bc) {
    memcpy(dst, src, (size_t)(n * sz));
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy((char *)dst + i * sz, src, (size_t)sz);
}

/* Runs scalar program |c| over |n| lanes. Parameter k's lanes are in[k] (bin[k]: one value
   for all lanes; bin may be NULL). The root's lanes (each element of a root tuple) go to
   outs[]. With n == 1 nothing is allocated. */
static hj_status evs_vprog(hj_ctx_t *ctx, const hlo_comp *c, const void *const *in,
                          const bool *bin, int nin, void *const *outs, int64_t n) {
  int m = (int)arrlen(c->instrs);
  const void *ptr[EVS_MAX];
  bool bc[EVS_MAX];
  void *heap[EVS_MAX] = { 0 };
  uint64_t slot[EVS_MAX];
  int last[EVS_MAX], opos[EVS_MAX][3];
  hj_status st = HJ_OK;
  /* Operand positions and last uses; the root (and a root tuple's elements) live on. */
  for (int j = 0; j < m; j++) last[j] = -1;
  for (int j = 0; j < m; j++) {
    const hlo_instr *ins = c->instrs[j];
    for (int k = 0; k < ins->noperands && ins->op != HLO_OP_TUPLE; k++) {
      int p = opos[j][k] = evs_find(c, j, ins->operands[k]);
      if (p < 0 || k >= 3)
        return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: operand %d of '%s' in '%s' is not "
                       "defined before it", k, ins->name, c->name);
      last[p] = j;
    }
  }
  const hlo_instr *r = c->root;
  int nr = r->op == HLO_OP_TUPLE ? r->noperands : 1, rpos[EVS_MAX];
  for (int k = 0; k < nr; k++) {
    rpos[k] = evs_find(c, m, r->op == HLO_OP_TUPLE ? r->operands[k] : r);
    if (rpos[k] < 0) return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: bad root in '%s'", c->name);
    last[rpos[k]] = m;
  }
  for (int j = 0; j < m; j++) {
    const hlo_instr *ins = c->instrs[j];
    if (ins->op == HLO_OP_PARAMETER) {
      if (ins->index < 0 || ins->index >= nin) {
        st = hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: parameter %lld of '%s' out of range",
                     (long long)ins->index, c->name);
        goto done;
      }
      ptr[j] = in[ins->index];
      bc[j] = n == 1 || (bin && bin[ins->index]);
      continue;
    }
    if (ins->op == HLO_OP_CONSTANT) {
      ptr[j] = ins->literal->data;
      bc[j] = true;
      continue;
    }
    if (ins->op == HLO_OP_TUPLE) continue;
    hlo_elem_op e;
    hlo_elem_op_of(ins, &e);
    const void *ip[3];
    bool ib[3], all = true;
    for (int k = 0; k < ins->noperands; k++) {
      ip[k] = ptr[opos[j][k]];
      ib[k] = bc[opos[j][k]];
      all &= ib[k];
    }
    int64_t lanes = all ? 1 : n;
    void *dst = slot + j;
    if (lanes > 1 && !(dst = heap[j] = hlo_ev_alloc(ctx, (size_t)lanes, (size_t)hlo_type_size(e.out), false))) {
      st = hj__err(ctx, HJ_ERR_OOM, "eval: out of memory in map over %lld elements",
                   (long long)n);
      goto done;
    }
    hlo_elem_run(&e, ip, ib, dst, lanes);
    ptr[j] = dst;
    bc[j] = all;
    for (int k = 0; k < ins->noperands; k++) {  /* buffers whose last use was this op */
      int p = opos[j][k];
      if (heap[p] && last[p] == j) {
        hj__free(ctx, heap[p]);
        heap[p] = NULL;
      }
    }
  }
  for (int k = 0; k < nr; k++) {
    int p = rpos[k];
    evs_lanes_out(ptr[p], bc[p], hlo_type_size(c->instrs[p]->shape.type), outs[k], n);
  }
done:
  for (int j = 0; j < m; j++) hj__free(ctx, heap[j]);
  return st;
}

/* Types and element counts of |args| fit scalar program |c|. */
static bool evs_args_fit(const hlo_comp *c, hlo_literal *const *args, int n) {
  if (n != (int)arrlen(c->params)) return false;
  for (int k = 0; k < n; k++)
    if (!args[k] || !hlo_shape_is_array(&args[k]->shape) ||
        args[k]->shape.type != c->params[k]->shape.type ||
        args[k]->nbytes != hlo_type_size(args[k]->shape.type))
      return false;
  return true;
}

hj_status hlo_eval_scalar_call(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                               int n, hlo_literal **out) {
  *out = NULL;
  if (!evs_is_sprog(c) || !evs_args_fit(c, args, n) || n > EVS_MAX)
    return hlo_eval_computation(ctx, c, args, n, out);
  const void *in[EVS_MAX];
  void *outs[EVS_MAX];
  for (int k = 0; k < n; k++) in[k] = args[k]->data;
  hlo_literal *res = hlo_literal_new(ctx, &c->root->shape);
  if (!res) return HJ_ERR_OOM;
  if (res->shape.type == HLO_TUPLE) {
    for (int k = 0; k < res->nelems; k++) outs[k] = res->elems[k]->data;
  } else {
    outs[0] = res->data;
  }
  hj_status st = evs_vprog(ctx, c, in, NULL, n, outs, 1);
  if (st) hlo_literal_free(res);
  else *out = res;
  return st;
}

/* ---- map --------------------------------------------------------------------------------- */

static hj_status evs_op_err(hj_ctx_t *ctx, hj_status code, const hlo_instr *ins, const char *why) {
  char b[256];
  return hj__err(ctx, code, "eval: op '%s' (%s, result %s): %s", hlo_opcode_name(ins->op),
                 ins->name, hlo_shape_str(&ins->shape, b, sizeof b), why);
}

/* map: the computation applied per element; scalar programs run over all lanes at once. */
hj_status hlo_eval_map(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                       hlo_literal **out) {
  if (ins->ncalls != 1 || !hlo_shape_is_array(&ins->shape) || ins->noperands > EVS_MAX)
    return evs_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "needs one computation and an array result");
  const hlo_comp *c = ins->calls[0];
  int64_t n = hlo_shape_numel(&ins->shape);
  int no = ins->noperands;
  if (no != (int)arrlen(c->params))
    return evs_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "operand count differs from the computation's");
  for (int k = 0; k < no; k++)
    if (!hlo_shape_is_array(&ops[k]->shape) || hlo_shape_numel(&ops[k]->shape) != n ||
        !c->params[k] || ops[k]->shape.type != c->params[k]->shape.type)
      return evs_op_err(ctx, HJ_ERR_SHAPE, ins, "operands must match the result's size and "
                       "the computation's parameter types");
  hlo_literal *res = hlo_literal_new(ctx, &ins->shape);
  if (!res) return HJ_ERR_OOM;
  hj_status st = HJ_OK;
  if (evs_is_sprog(c) && c->root->op != HLO_OP_TUPLE && c->root->shape.type == ins->shape.type) {
    const void *in[EVS_MAX];
    void *outs[1] = { res->data };
    for (int k = 0; k < no; k++) in[k] = ops[k]->data;
    st = evs_vprog(ctx, c, in, NULL, no, outs, n);
  } else {
    hlo_literal *args[EVS_MAX] = { 0 };
    int osz = hlo_type_size(ins->shape.type);
    for (int k = 0; k < no && !st; k++) {
      hlo_shape s = hlo_shape_scalar(ops[k]->shape.type);
      if (!(args[k] = hlo_literal_new(ctx, &s))) st = HJ_ERR_OOM;
    }
    for (int64_t i = 0; i < n && !st; i++) {
      hlo_literal *r = NULL;
      for (int k = 0; k < no; k++)
        memcpy(args[k]->data, ops[k]->data + i * args[k]->nbytes, (size_t)args[k]->nbytes);
      if ((st = hlo_eval_scalar_call(ctx, c, args, no, &r))) break;
      if (r->shape.type != ins->shape.type || r->nbytes != osz)
        st = evs_op_err(ctx, HJ_ERR_SHAPE, ins, "computation must return a scalar of the result type");
      else
        memcpy(res->data + i * osz, r->data, (size_t)osz);
      hlo_literal_free(r);
    }
    for (int k = 0; k < no; k++) hlo_literal_free(args[k]);
  }
  if (st) hlo_literal_free(res);
  else *out = res;
  return st;
}

#undef EVS_MAX

/* ir/opfacts.c — facts about opcodes that the evaluator, the passes and the emitters all
   need, so that none of them takes them from another: which instructions are elementwise,
   the elementwise operation of an instruction (hlo_elem_op) and whether its element types
   are ones the op is defined on, and the plain binary reducers (add, multiply, max, min,
   and, or) that reductions and scatters can take a fast path for. */
#include "ir.h"

bool hlo_op_is_elementwise(const hlo_instr *ins) {
  if (!hlo_shape_is_array(&ins->shape)) return false;
  switch (hlo_opcode_kind(ins->op)) {
  case HLO_KIND_UNARY: case HLO_KIND_BINARY: return true;
  default: break;
  }
  switch (ins->op) {
  case HLO_OP_SELECT: case HLO_OP_CLAMP: case HLO_OP_COMPARE: case HLO_OP_CONVERT:
  case HLO_OP_COPY:
    return true;
  case HLO_OP_BITCAST_CONVERT:
    return ins->noperands == 1 &&
           hlo_type_size(ins->operands[0]->shape.type) == hlo_type_size(ins->shape.type);
  default:
    return false;
  }
}

bool hlo_elem_op_of(const hlo_instr *ins, hlo_elem_op *e) {
  memset(e, 0, sizeof *e);
  if (!hlo_op_is_elementwise(ins)) return false;
  if (ins->noperands < 1 || ins->noperands > 3) return false;
  e->op = ins->op;
  e->out = ins->shape.type;
  e->nin = ins->noperands;
  for (int k = 0; k < ins->noperands; k++) {
    if (!hlo_shape_is_array(&ins->operands[k]->shape)) return false;
    e->in[k] = ins->operands[k]->shape.type;
  }
  e->dir = ins->cmp_dir;
  e->cmp_type = ins->cmp_type;
  if (ins->op == HLO_OP_BITCAST_CONVERT && hlo_type_size(e->in[0]) != hlo_type_size(e->out))
    return false;  /* changes the shape: not elementwise */
  return true;
}

static int opf_arity(hlo_opcode op) {
  if (op == HLO_OP_SELECT || op == HLO_OP_CLAMP) return 3;
  if (op == HLO_OP_COMPARE || hlo_opcode_kind(op) == HLO_KIND_BINARY) return 2;
  return 1;
}

static bool opf_float_only(hlo_opcode op) {
  switch (op) {
  case HLO_OP_EXP: case HLO_OP_EXPM1: case HLO_OP_LOG: case HLO_OP_LOG1P:
  case HLO_OP_LOGISTIC: case HLO_OP_TANH: case HLO_OP_SQRT: case HLO_OP_RSQRT:
  case HLO_OP_CBRT: case HLO_OP_SIN: case HLO_OP_COS: case HLO_OP_TAN: case HLO_OP_ERF:
  case HLO_OP_FLOOR: case HLO_OP_CEIL: case HLO_OP_ROUND_EVEN: case HLO_OP_ROUND_AFZ:
  case HLO_OP_IS_FINITE: case HLO_OP_ATAN2:
    return true;
  default: return false;
  }
}

const char *hlo_elem_unsupported(const hlo_elem_op *e) {
  static _Thread_local char msg[128];
  hlo_type t = e->in[0];
  if (e->nin != opf_arity(e->op)) {
    snprintf(msg, sizeof msg, "expects %d operands, has %d", opf_arity(e->op), e->nin);
    return msg;
  }
  for (int k = 0; k < e->nin; k++)
    if (e->in[k] >= HLO_TUPLE) return "operands must be arrays";
  if (e->out >= HLO_TUPLE) return "result must be an array";
  bool is_f = hlo_type_is_float(t), is_i = hlo_type_is_int(t);
  const char *bad = NULL;
  switch (e->op) {
  case HLO_OP_CONVERT: return NULL;
  case HLO_OP_BITCAST_CONVERT:
    return hlo_type_size(e->in[0]) == hlo_type_size(e->out) ? NULL : "element widths differ";
  case HLO_OP_SELECT:
    if (e->in[0] != HLO_PRED) return "predicate must be pred";
    if (e->in[1] != e->out || e->in[2] != e->out) bad = "operand types differ from the result";
    break;
  case HLO_OP_COMPARE:
    if (e->in[1] != t) bad = "operand types differ";
    else if (e->out != HLO_PRED) bad = "result must be pred";
    break;
  case HLO_OP_IS_FINITE:
    if (e->out != HLO_PRED) bad = "result must be pred";
    break;
  default:
    for (int k = 0; k < e->nin; k++)
      if (e->in[k] != e->out) bad = "operand types differ from the result";
    break;
  }
  if (bad) return bad;
  bool ok = true;
  switch (e->op) {
  case HLO_OP_AND: case HLO_OP_OR: case HLO_OP_XOR: case HLO_OP_NOT:
    ok = is_i || t == HLO_PRED;
    break;
  case HLO_OP_SHL: case HLO_OP_SHRA: case HLO_OP_SHRL: case HLO_OP_POPCNT: case HLO_OP_CLZ:
    ok = is_i;
    break;
  default: ok = !opf_float_only(e->op) || is_f; break;
  }
  if (ok) return NULL;
  snprintf(msg, sizeof msg, "not defined on %s", hlo_type_name(t));
  return msg;
}

hlo_opcode hlo_binary_reducer(const hlo_comp *c, hlo_type t, bool *swapped) {
  *swapped = false;
  if (!c || arrlen(c->params) != 2 || !c->root) return HLO_OP_COUNT;
  const hlo_instr *r = c->root, *p0 = c->params[0], *p1 = c->params[1];
  switch (r->op) {
  case HLO_OP_ADD: case HLO_OP_MULTIPLY: case HLO_OP_MAXIMUM: case HLO_OP_MINIMUM:
  case HLO_OP_AND: case HLO_OP_OR: break;
  default: return HLO_OP_COUNT;
  }
  if (r->noperands != 2) return HLO_OP_COUNT;
  const hlo_shape *ss[3] = { &r->shape, &p0->shape, &p1->shape };
  for (int i = 0; i < 3; i++)
    if (ss[i]->type != t || ss[i]->rank != 0) return HLO_OP_COUNT;
  bool fwd = r->operands[0] == p0 && r->operands[1] == p1;
  bool rev = r->operands[0] == p1 && r->operands[1] == p0;
  *swapped = rev;
  return fwd || rev ? r->op : HLO_OP_COUNT;
}


bool hlo_dot_is_panels(const hlo_instr *d, hlo_shape *c2) {
  if (d->op != HLO_OP_DOT || d->noperands != 2) return false;
  const hlo_dot_dims *dd = &d->dot;
  const hlo_shape *ls = &d->operands[0]->shape, *rs = &d->operands[1]->shape;
  if (ls->rank != 3 || rs->rank != 4 || d->shape.rank != 3 || dd->lhs_batch.n || dd->rhs_batch.n ||
      dd->lhs_contract.n != 2 || dd->rhs_contract.n != 2 || dd->lhs_contract.v[0] != 1 ||
      dd->lhs_contract.v[1] != 2 || dd->rhs_contract.v[0] != 0 || dd->rhs_contract.v[1] != 2 ||
      ls->dims[1] != rs->dims[0] || ls->dims[2] != rs->dims[2])
    return false;
  if (c2) {
    int64_t mn[2] = { ls->dims[0], rs->dims[1] * rs->dims[3] };
    *c2 = hlo_shape_array(d->shape.type, 2, mn);
  }
  return true;
}

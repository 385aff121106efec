/* ir/opfacts.c — the opcode table (opcodes.h's HLO_OPCODES) and the facts about opcodes that the evaluator, the passes and the emitters all need, so
   that none of them takes them from another: the columns of the opcode table, which
   instructions are elementwise, the elementwise operation of an instruction (hlo_elem_op)
   and whether its element types are ones the op is defined on, and the plain binary
   reducers (add, multiply, max, min, and, or) that reductions and scatters can take a fast
   path for. */
#include "ir.h"

/* ---- tables ----------------------------------------------------------------------------- */

static const struct {
  const char *name;
  int arity, calls;
  hlo_op_kind kind;
  hlo_op_types types;
  hlo_op_cost cost;
  hlo_op_emit emit;
  const char *libm;
  bool poly;
} op_table[] = {
#define X(e, s, a, ca, k, ty, co, em, lm, po, ev, bl) \
  { s, a, ca, HLO_KIND_##k, HLO_TYPES_##ty, HLO_COST_##co, HLO_EMIT_##em, lm, po },
  HLO_OPCODES(X)
#undef X
};

const char *hlo_opcode_name(hlo_opcode op) { return (unsigned)op < HLO_OP_COUNT ? op_table[op].name : "?"; }
int hlo_opcode_arity(hlo_opcode op) { return (unsigned)op < HLO_OP_COUNT ? op_table[op].arity : -1; }
int hlo_opcode_calls(hlo_opcode op) { return (unsigned)op < HLO_OP_COUNT ? op_table[op].calls : 0; }
hlo_op_kind hlo_opcode_kind(hlo_opcode op) {
  return (unsigned)op < HLO_OP_COUNT ? op_table[op].kind : HLO_KIND_OTHER;
}
hlo_op_types hlo_opcode_types(hlo_opcode op) {
  return (unsigned)op < HLO_OP_COUNT ? op_table[op].types : HLO_TYPES_ANY;
}
hlo_op_cost hlo_opcode_cost(hlo_opcode op) {
  return (unsigned)op < HLO_OP_COUNT ? op_table[op].cost : HLO_COST_CHEAP;
}
bool hlo_opcode_has_kernel(hlo_opcode op) {
  return (unsigned)op < HLO_OP_COUNT && op_table[op].emit != HLO_EMIT_R;
}
bool hlo_opcode_poly(hlo_opcode op) { return (unsigned)op < HLO_OP_COUNT && op_table[op].poly; }
const char *hlo_opcode_libm(hlo_opcode op) {
  return (unsigned)op < HLO_OP_COUNT ? op_table[op].libm : NULL;
}

bool hlo_opcode_from_name(const char *s, size_t n, hlo_opcode *out) {
  for (int i = 0; i < HLO_OP_COUNT; i++)
    if (strlen(op_table[i].name) == n && memcmp(op_table[i].name, s, n) == 0) {
      *out = (hlo_opcode)i;
      return true;
    }
  return false;
}

const char *hlo_cmp_dir_name(hlo_cmp_dir d) {
  static const char *n[] = { "EQ", "NE", "LT", "LE", "GT", "GE" };
  return (unsigned)d < HLO_CMP_COUNT ? n[d] : "?";
}

const char *hlo_cmp_type_name(hlo_cmp_type t) {
  static const char *n[] = { "", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED" };
  return (unsigned)t < HLO_CMPT_COUNT ? n[t] : "?";
}

static const char *const opf_custom_names[HLO_CUSTOM_COUNT] = {
  "",
#define X(e, s) s,
  HLO_CUSTOM_TARGETS(X)
#undef X
};

const char *hlo_custom_target_name(int64_t t) {
  return t > HLO_CUSTOM_NONE && t < HLO_CUSTOM_COUNT ? opf_custom_names[t] : "?";
}

int64_t hlo_custom_target_from_name(const char *s, size_t n) {
  for (int t = HLO_CUSTOM_NONE + 1; t < HLO_CUSTOM_COUNT; t++)
    if (strlen(opf_custom_names[t]) == n && !memcmp(opf_custom_names[t], s, n)) return t;
  return HLO_CUSTOM_NONE;
}

const char *hlo_rng_algorithm_name(int64_t a) {
  static const char *n[] = { "rng_default", "rng_three_fry", "rng_philox" };
  return a >= 0 && a < HLO_RNG_COUNT ? n[a] : "?";
}

const char *hlo_fusion_kind_name(hlo_fusion_kind k) {
  static const char *n[] = { "kLoop", "kInput", "kOutput", "kCustom" };
  return (unsigned)k < HLO_FUSION_KIND_COUNT ? n[k] : "?";
}


/* ---- facts ------------------------------------------------------------------------------ */

bool hlo_types_admit(hlo_op_types ty, hlo_type t, const char **want) {
  static const char *const wants[] = { [HLO_TYPES_ANY] = "any type", [HLO_TYPES_FLOAT] = "floating-point",
    [HLO_TYPES_INT] = "integral", [HLO_TYPES_BITS] = "pred or integral",
    [HLO_TYPES_SIGNED] = "signed integral or floating-point",
    [HLO_TYPES_NUMERIC] = "integral or floating-point" };
  hlo_type_class k = hlo_type_class_of(t);
  bool ok = k != HLO_CLASS_OTHER;
  switch (ty) {
  case HLO_TYPES_ANY: break;
  case HLO_TYPES_FLOAT: ok = k == HLO_CLASS_FLOAT; break;
  case HLO_TYPES_INT: ok = k == HLO_CLASS_SINT || k == HLO_CLASS_UINT; break;
  case HLO_TYPES_BITS: ok = k == HLO_CLASS_SINT || k == HLO_CLASS_UINT || k == HLO_CLASS_PRED; break;
  case HLO_TYPES_SIGNED: ok = k == HLO_CLASS_SINT || k == HLO_CLASS_FLOAT; break;
  case HLO_TYPES_NUMERIC: ok = k == HLO_CLASS_SINT || k == HLO_CLASS_UINT || k == HLO_CLASS_FLOAT; break;
  }
  if (want) *want = (unsigned)ty < sizeof wants / sizeof wants[0] ? wants[ty] : "?";
  return ok;
}

bool hlo_operand_count_ok(hlo_opcode op, int n, const char **want) {
  int a = hlo_opcode_arity(op);
  if (a >= 0) return *want = "", n == a;
  switch (op) {
  case HLO_OP_REDUCE: case HLO_OP_REDUCE_WINDOW: *want = "an even number >= 2 of"; return n >= 2 && n % 2 == 0;
  case HLO_OP_SCATTER: *want = "an odd number >= 3 of"; return n >= 3 && n % 2 == 1;
  case HLO_OP_DYNAMIC_UPDATE_SLICE: *want = "at least 2"; return n >= 2;
  case HLO_OP_DYNAMIC_SLICE: case HLO_OP_CONCATENATE: case HLO_OP_SORT: case HLO_OP_MAP:
  case HLO_OP_CONDITIONAL: *want = "at least 1"; return n >= 1;
  default: *want = ""; return true;
  }
}

bool hlo_op_is_elementwise(const hlo_instr *ins) {
  if (!hlo_shape_is_array(&ins->shape) || hlo_opcode_kind(ins->op) == HLO_KIND_OTHER) return false;
  if (ins->op == HLO_OP_BITCAST_CONVERT)
    return ins->noperands == 1 &&
           hlo_type_size(ins->operands[0]->shape.type) == hlo_type_size(ins->shape.type);
  return true;
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
  if (ins->op == HLO_OP_REDUCE_PRECISION) {   /* out of range: hlo_elem_unsupported says so */
    bool ok = ins->exponent_bits >= 1 && ins->exponent_bits <= 64 && ins->mantissa_bits >= 0 &&
              ins->mantissa_bits <= 64;
    e->exponent_bits = ok ? (int)ins->exponent_bits : 0;
    e->mantissa_bits = ok ? (int)ins->mantissa_bits : -1;
  }
  if (ins->op == HLO_OP_BITCAST_CONVERT && hlo_type_size(e->in[0]) != hlo_type_size(e->out))
    return false;  /* changes the shape: not elementwise */
  return true;
}

const char *hlo_elem_unsupported(const hlo_elem_op *e) {
  static _Thread_local char msg[128];
  hlo_type t = e->in[0];
  if (e->nin != hlo_opcode_arity(e->op)) {
    snprintf(msg, sizeof msg, "expects %d operands, has %d", hlo_opcode_arity(e->op), e->nin);
    return msg;
  }
  for (int k = 0; k < e->nin; k++)
    if (e->in[k] >= HLO_TUPLE) return "operands must be arrays";
  if (e->out >= HLO_TUPLE) return "result must be an array";
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
  case HLO_OP_REDUCE_PRECISION:
    if (e->in[0] != e->out) bad = "operand types differ from the result";
    else if (e->exponent_bits < 1 || e->mantissa_bits < 0)
      bad = "needs exponent_bits in [1, 64] and mantissa_bits in [0, 64]";
    break;
  default:
    for (int k = 0; k < e->nin; k++)
      if (e->in[k] != e->out) bad = "operand types differ from the result";
    break;
  }
  if (bad) return bad;
  if (hlo_types_admit(hlo_opcode_types(e->op), t, NULL)) return NULL;
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

const hlo_instr *hlo_root_concat(const hlo_comp *c) {
  const hlo_instr *r = c ? c->root : NULL;
  while (r && (r->op == HLO_OP_RESHAPE || r->op == HLO_OP_BITCAST) && r->noperands == 1 &&
         hlo_shape_is_array(&r->shape) && hlo_shape_layout_is_default(&r->shape) &&
         hlo_shape_layout_is_default(&r->operands[0]->shape) && r->shape.type == r->operands[0]->shape.type &&
         hlo_shape_numel(&r->shape) == hlo_shape_numel(&r->operands[0]->shape))
    r = r->operands[0];
  if (!r || r->op != HLO_OP_CONCATENATE || !hlo_shape_is_array(&r->shape) || r->dims.n != 1 ||
      r->noperands < 2 || r->noperands > HLO_ROOT_CONCAT_MAX || !hlo_shape_layout_is_default(&r->shape) ||
      r->dims.v[0] < 0 || r->dims.v[0] >= r->shape.rank - 1)
    return NULL;
  for (int k = 0; k < r->noperands; k++)
    if (!hlo_shape_is_array(&r->operands[k]->shape)) return NULL;
  return r;
}

bool hlo_dot_epilogue_dims(const hlo_shape *s, const hlo_shape *ds) {
  int64_t a[HLO_MAX_RANK], b[HLO_MAX_RANK];
  int na = 0, nb = 0;
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] != 1) a[na++] = s->dims[d];
  for (int d = 0; d < ds->rank; d++)
    if (ds->dims[d] != 1) b[nb++] = ds->dims[d];
  if (na == nb && !memcmp(a, b, sizeof(int64_t) * (size_t)na)) return true;
  return nb == 2 && s->rank >= 2 && s->dims[s->rank - 1] == b[1] && hlo_shape_numel(s) == b[0] * b[1];
}

static int64_t opf_at(hlo_ints v, int i, int64_t dflt) { return i < v.n ? v.v[i] : dflt; }

bool hlo_reduce_window_is_prefix_scan(const hlo_instr *rw, int *dim) {
  if (!rw || rw->op != HLO_OP_REDUCE_WINDOW || rw->noperands != 2 || rw->ncalls != 1 ||
      !hlo_shape_is_array(&rw->shape))
    return false;
  const hlo_shape *is = &rw->operands[0]->shape;
  const hlo_window *w = &rw->window;
  if (!hlo_shape_is_array(is) || w->size.n != is->rank || !hlo_same_dims(is, &rw->shape)) return false;
  int d0 = -1;
  for (int d = 0; d < is->rank; d++) {
    int64_t sz = w->size.v[d], lo = opf_at(w->pad_lo, d, 0), hi = opf_at(w->pad_hi, d, 0);
    if (opf_at(w->stride, d, 1) != 1 || opf_at(w->base_dilation, d, 1) != 1 ||
        opf_at(w->window_dilation, d, 1) != 1 || hi != 0)
      return false;
    if (sz == 1 && lo == 0) continue;
    if (d0 >= 0 || sz != is->dims[d] || lo != sz - 1 || sz < 2) return false;
    d0 = d;
  }
  if (d0 < 0) return false;
  *dim = d0;
  return true;
}

/* runtime/profile.c — per-thunk profiles: what each thunk of a program moved and computed
   per call, next to the time th_program_run measured (hlojit.h: hj_profile_entry_t).

   Bytes per call: the thunk's input and output leaves (ba_loc.bytes), each once; an
   in-place dynamic-update-slice kernel reads and writes only the update, so its operand
   that is updated in place counts for nothing and the update's bytes count for the write.
   A copy moves its bytes twice (read, write). While and conditional thunks count nothing
   themselves: their nested programs' thunks are entries of their own (depth + 1).

   FLOPs per call, from the fused computation: 2*M*N*K per dot (output elements times twice
   the contracted size), one per output element of each arithmetic elementwise op (unary,
   binary, select, clamp, compare), one per input element of each reduce (reduce-window: per
   output element and window element); data movement (broadcast, slice, copy, convert...)
   counts 0. The numbers describe the HLO, not the machine code (a fused exp may cost tens of
   instructions). */
#include "runtime.h"

static int64_t prf_numel(const hlo_shape *s) {
  if (hlo_shape_is_array(s)) return hlo_shape_numel(s);
  int64_t n = 0;
  for (int i = 0; s->type == HLO_TUPLE && i < s->ntuple; i++) n += prf_numel(&s->tuple[i]);
  return n;
}

static int64_t prf_comp_flops(const hlo_comp *c, int depth);

static int64_t prf_instr_flops(const hlo_instr *ins, int depth) {
  switch (ins->op) {
  case HLO_OP_DOT: {
    int64_t k = 1;
    const hlo_shape *l = &ins->operands[0]->shape;
    for (int i = 0; i < ins->dot.lhs_contract.n; i++) {
      int64_t d = ins->dot.lhs_contract.v[i];
      if (d >= 0 && d < l->rank) k *= l->dims[d];
    }
    return 2 * prf_numel(&ins->shape) * k;
  }
  case HLO_OP_REDUCE: {
    int64_t n = 0;
    for (int i = 0; i < ins->noperands / 2; i++) n += prf_numel(&ins->operands[i]->shape);
    return n;
  }
  case HLO_OP_CONVOLUTION: {   /* 2 x outputs x (kernel input features x taps) */
    int64_t k = 1;
    const hlo_shape *ks = &ins->operands[1]->shape;
    for (int i = 0; i < ks->rank; i++)
      if (i != ins->conv.k_out) k *= ks->dims[i];
    return 2 * prf_numel(&ins->shape) * k;
  }
  case HLO_OP_SELECT_AND_SCATTER: case HLO_OP_REDUCE_WINDOW: {
    int64_t w = 1;
    for (int i = 0; i < ins->window.size.n; i++) w *= ins->window.size.v[i];
    return prf_numel(&ins->shape) * w;
  }
  case HLO_OP_SELECT: case HLO_OP_CLAMP: case HLO_OP_COMPARE:
    return prf_numel(&ins->shape);
  case HLO_OP_FUSION: case HLO_OP_CALL:
    return ins->ncalls == 1 && depth < 8 ? prf_comp_flops(ins->calls[0], depth + 1) : 0;
  default: {
    hlo_op_kind k = hlo_opcode_kind(ins->op);
    return k == HLO_KIND_UNARY || k == HLO_KIND_BINARY ? prf_numel(&ins->shape) : 0;
  }
  }
}

static int64_t prf_comp_flops(const hlo_comp *c, int depth) {
  int64_t n = 0;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) n += prf_instr_flops(c->instrs[i], depth);
  return n;
}

int64_t th_thunk_flops(const th_thunk *t) {
  if (t->kind != TH_KERNEL && t->kind != TH_MATMUL && t->kind != TH_EVAL) return 0;
  return prf_instr_flops(t->ins, 0);
}

static int prf_nleaves(const hlo_shape *s) {
  if (s->type != HLO_TUPLE) return 1;
  int n = 0;
  for (int i = 0; i < s->ntuple; i++) n += prf_nleaves(&s->tuple[i]);
  return n;
}

/* Bytes a thunk moves: its operand and output leaves, except for a dus kernel's outputs
   written in place (th_thunk.dus_inplace): the buffer they update is neither read nor
   written whole, only the update is written. */
int64_t th_thunk_bytes(const th_thunk *t) {
  int64_t n = 0;
  switch (t->kind) {
  case TH_COPY: return 2 * (arrlen(t->outs) ? t->outs[0].bytes : 0);
  case TH_WHILE: case TH_COND: return 0;
  default: break;
  }
  uint64_t skip = 0;   /* operands updated in place */
  hlo_dus_root dr[64];
  int nr = t->dus_inplace ? hlo_fusion_dus_roots(t->ins, dr, 64) : 0;
  for (int j = 0; j < nr; j++)
    if (t->dus_inplace >> j & 1 && dr[j].param >= 0) skip |= 1ull << dr[j].param;
  int leaf = 0;
  for (int k = 0; k < t->ins->noperands; k++) {
    int nl = prf_nleaves(&t->ins->operands[k]->shape);
    for (int j = 0; j < nl && leaf < arrlen(t->args); j++, leaf++)
      if (!(k < 64 && skip >> k & 1)) n += t->args[leaf].bytes;
  }
  for (ptrdiff_t o = 0; o < arrlen(t->outs); o++)
    n += o < nr && t->dus_inplace >> o & 1 && dr[o].dus ? hlo_shape_bytes(&dr[o].dus->operands[1]->shape)
                                                       : t->outs[o].bytes;
  return n;
}

void th_profile_append(const th_program *p, int depth, hj_profile_entry_t **out) {
  for (ptrdiff_t i = 0; i < arrlen(p->thunks); i++) {
    const th_thunk *t = &p->thunks[i];
    bool kern = t->kind == TH_KERNEL || t->kind == TH_MATMUL;
    hj_profile_entry_t e = {
      .instr = t->ins && t->ins->name ? t->ins->name : "?",
      .kernel = kern ? t->sym : "",
      .kind = kern && t->emitter ? t->emitter : th_kind_name(t->kind),
      .depth = depth,
      .calls = t->prof_calls,
      .ms = (double)t->prof_ns / 1e6,
      .bytes = th_thunk_bytes(t),
      .flops = th_thunk_flops(t),
    };
    arrput(*out, e);
    for (ptrdiff_t k = 0; k < arrlen(t->sub); k++) th_profile_append(t->sub[k], depth + 1, out);
  }
}

void th_profile_reset(th_program *p) {
  for (ptrdiff_t i = 0; i < arrlen(p->thunks); i++) {
    th_thunk *t = &p->thunks[i];
    t->prof_calls = t->prof_ns = 0;
    for (ptrdiff_t k = 0; k < arrlen(t->sub); k++) th_profile_reset(t->sub[k]);
  }
}

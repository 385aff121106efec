/* cuda_run.c — running a CUDA executable (cuda_exec.h): the caller's buffers, prefetching,
   the thunk sequence (runtime/thunks.c's th_program_run, with this backend's hooks), and
   CUDA graphs.

   A run, under the executable's run lock and the context's device lock:
     1. leaves: an input or output leaf inside one of our managed allocations (and 16-byte
        aligned) is used in place; any other pointer (caller memory) is staged through a
        managed buffer of the executable, the same one every run (inputs copied in before,
        outputs copied back after);
     2. prefetch: every allocation the run uses that the host may have touched (cuda_mem.c)
        goes to the device on the stream, before the first launch (a run with host work
        marks the arenas and constants it touched, so the next run moves them back);
     3. the thunks, in one of three modes:
          EAGER    every kernel launched (cuLaunchKernel), gemms and copies issued;
          CAPTURE  the same calls into a stream capture (cuStreamBeginCapture): each of our
                   kernels becomes a node, read back with cuStreamGetCaptureInfo and kept
                   with the argument values it holds; cuBLAS's kernels and memcpys become
                   nodes we cannot update (library nodes, kept with their addresses); the
                   graph is instantiated and launched;
          REPLAY   nothing is issued while the thunks run: each call compares its argument
                   values with its node's and updates the node in place when they differ
                   (cuGraphExecKernelNodeSetParams: a new input buffer, a new staging
                   address); a library node whose addresses changed makes the graph be
                   captured again; then cuGraphLaunch;
     4. synchronise; copy staged outputs back.
   Mode: EAGER on the first run (matmul shapes are measured there) and always when graphs
   are off (HLOJIT_CUDA_GRAPHS=0, a driver without them) or the entry program has host work
   (evaluator thunks, while, conditional: those synchronise and run on the host through
   managed memory); CAPTURE on the second run (or when a library node's addresses changed);
   REPLAY after. A capture that fails falls back to EAGER for good (graph_why says why), and
   so does an executable captured again on CUB_RECAPTURE_LIMIT runs in a row: a capture
   costs more than the eager launches it records.
   Never a stale pointer: every replay compares every argument of every node with what this
   run's thunks resolve to, so a node holds exactly what an eager launch would pass. Nodes
   carry the same grid, block and dynamic shared memory as eager launches (the same call
   builds both). */
#include "cuda_exec.h"
#include <stdlib.h>

static hj_status cr_check(cub_exec *x, const cuda_error *e) { return cub_err(x->base.ctx, e); }

/* ---- device calls -------------------------------------------------------------------------- */

/* The node of the call just captured: the stream's one dependency. */
static hj_status cr_captured_node(cub_exec *x, CUgraphNode *node) {
  cuda_driver *d = x->be->d;
  cuda_error e;
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode *deps = NULL;
  size_t n = 0;
  *node = NULL;
  hj_status st = cuda_check(d, d->cuStreamGetCaptureInfo(x->be->dv->stream, &cs, NULL, NULL, &deps, NULL, &n),
                            &e, "cuStreamGetCaptureInfo");
  if (st != HJ_OK) return cr_check(x, &e);
  if (cs != CU_STREAM_CAPTURE_STATUS_ACTIVE || n != 1 || !deps)
    return hj__err(x->base.ctx, HJ_ERR_BACKEND, "CUDA backend: stream capture: %zu dependencies "
                   "after a launch (status %d), expected the launch's node", n, (int)cs);
  *node = deps[0];
  return HJ_OK;
}

static cub_node *cr_next_node(cub_exec *x, bool library) {
  if (x->mode == CUB_CAPTURE) {
    cub_node nd = { .library = library };
    arrput(x->nodes, nd);
    x->call++;
    return &x->nodes[arrlen(x->nodes) - 1];
  }
  if (x->call >= arrlen(x->nodes) || x->nodes[x->call].library != library) {
    x->recapture = true;   /* not the sequence that was captured: capture again */
    x->call++;
    return NULL;
  }
  return &x->nodes[x->call++];
}

hj_status cub_launch(cub_exec *x, CUfunction f, const char *name, const unsigned grid[3],
                     const unsigned block[3], unsigned shared, void *const *vals, int nvals) {
  cuda_error e;
  void *params[160];
  void *copy[160];
  if (nvals > 160) return hj__err(x->base.ctx, HJ_ERR_UNSUPPORTED, "CUDA backend: kernel %s has %d arguments", name, nvals);
  for (int i = 0; i < nvals; i++) copy[i] = vals[i], params[i] = &copy[i];
  if (x->mode == CUB_EAGER)
    return cuda_launch(x->be->dv, f, name, grid, block, shared, params, &e) == HJ_OK ? HJ_OK : cr_check(x, &e);
  if (x->mode == CUB_CAPTURE) {
    if (cuda_launch(x->be->dv, f, name, grid, block, shared, params, &e) != HJ_OK) return cr_check(x, &e);
    cub_node *nd = cr_next_node(x, false);
    hj_status st = cr_captured_node(x, &nd->node);
    for (int i = 0; st == HJ_OK && i < nvals; i++) arrput(nd->vals, copy[i]);
    return st;
  }
  cub_node *nd = cr_next_node(x, false);
  if (!nd) return HJ_OK;
  bool same = arrlen(nd->vals) == nvals;
  for (int i = 0; same && i < nvals; i++) same = nd->vals[i] == copy[i];
  if (same) return HJ_OK;
  cuda_driver *d = x->be->d;
  CUDA_KERNEL_NODE_PARAMS p = {
    .func = f, .gridDimX = grid[0], .gridDimY = grid[1], .gridDimZ = grid[2],
    .blockDimX = block[0], .blockDimY = block[1], .blockDimZ = block[2],
    .sharedMemBytes = shared, .kernelParams = params,
  };
  if (cuda_check(d, d->cuGraphExecKernelNodeSetParams(x->gexec, nd->node, &p), &e,
                 "cuGraphExecKernelNodeSetParams(%s)", name) != HJ_OK)
    return cr_check(x, &e);
  arrsetlen(nd->vals, 0);
  for (int i = 0; i < nvals; i++) arrput(nd->vals, copy[i]);
  x->node_updates++;
  return HJ_OK;
}

hj_status cub_library_call(cub_exec *x, void *const *ptrs, int nptrs, bool *issue) {
  *issue = x->mode != CUB_REPLAY;
  if (x->mode == CUB_EAGER) return HJ_OK;
  if (nptrs > 4) nptrs = 4;
  cub_node *nd = cr_next_node(x, true);
  if (!nd) return HJ_OK;
  if (x->mode == CUB_CAPTURE) {
    nd->nptrs = nptrs;
    for (int i = 0; i < nptrs; i++) nd->ptrs[i] = ptrs[i];
    return HJ_OK;
  }
  bool same = nd->nptrs == nptrs;
  for (int i = 0; same && i < nptrs; i++) same = nd->ptrs[i] == ptrs[i];
  if (!same) x->recapture = true;
  return HJ_OK;
}

hj_status cub_kernel(cub_exec *x, const th_thunk *t, void **bufs) {
  int n = (int)(arrlen(t->args) + arrlen(t->outs));
  return cub_launch(x, (CUfunction)t->fn, t->sym, t->grid, t->block, t->shared_bytes, bufs, n);
}

hj_status cub_copy_hook(cub_exec *x, void *dst, const void *src, size_t n) {
  void *ptrs[2] = { dst, (void *)src };
  bool issue;
  hj_status st = cub_library_call(x, ptrs, 2, &issue);
  if (st != HJ_OK || !issue) return st;
  cuda_driver *d = x->be->d;
  cuda_error e;
  if (cuda_check(d, d->cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n,
                                         x->be->dv->stream),
                 &e, "cuMemcpyDtoDAsync(%zu bytes)", n) != HJ_OK)
    return cr_check(x, &e);
  return HJ_OK;
}

/* ---- graphs ---------------------------------------------------------------------------------- */

void cub_graph_plan(cub_exec *x) {
  const th_program *e = x->base.entry;
  const hlo_comp *c = x->base.m->entry;
  for (ptrdiff_t i = 0; i < arrlen(c->params); i++) {
    const hlo_shape **lv = NULL;
    hlo_shape_leaves(&c->params[i]->shape, &lv);
    for (ptrdiff_t k = 0; k < arrlen(lv); k++) arrput(x->in_bytes, (size_t)hlo_shape_bytes(lv[k]));
    arrfree(lv);
  }
  const hlo_shape **lv = NULL;
  hlo_shape_leaves(&c->root->shape, &lv);
  for (ptrdiff_t k = 0; k < arrlen(lv); k++) arrput(x->out_bytes, (size_t)hlo_shape_bytes(lv[k]));
  arrfree(lv);
  for (ptrdiff_t i = 0; i < arrlen(x->base.programs); i++)
    for (ptrdiff_t k = 0; k < arrlen(x->base.programs[i]->thunks); k++) {
      th_kind tk = x->base.programs[i]->thunks[k].kind;
      x->host_work |= tk == TH_EVAL || tk == TH_WHILE || tk == TH_COND;
    }
  bool off = cub_env_off("HLOJIT_CUDA_GRAPHS");   /* read per executable, when it is made */
  x->graphable = x->be->graphs && !off;
  if (!x->graphable)
    snprintf(x->graph_why, sizeof x->graph_why, "%s", off ? "HLOJIT_CUDA_GRAPHS=0" : "the driver has no graphs");
  for (ptrdiff_t i = 0; x->graphable && i < arrlen(e->thunks); i++) {
    th_kind k = e->thunks[i].kind;
    if (k != TH_KERNEL && k != TH_MATMUL && k != TH_COPY) {
      x->graphable = false;
      snprintf(x->graph_why, sizeof x->graph_why, "the entry program has a %s thunk (%s): host work",
               th_kind_name(k), e->thunks[i].ins->name);
    }
  }
}

static void cr_nodes_free(cub_exec *x) {
  for (ptrdiff_t i = 0; i < arrlen(x->nodes); i++) arrfree(x->nodes[i].vals);
  arrfree(x->nodes);
  x->nodes = NULL;
}

/* The graph, its instance and its nodes. */
static void cr_graph_drop(cub_exec *x) {
  cuda_driver *d = x->be->d;
  if (x->gexec) d->cuGraphExecDestroy(x->gexec);
  if (x->graph) d->cuGraphDestroy(x->graph);
  x->gexec = NULL;
  x->graph = NULL;
  cr_nodes_free(x);
}

void cub_graph_free(cub_exec *x) {
  cr_graph_drop(x);
  arrfree(x->in_bytes);
  arrfree(x->out_bytes);
}

static hj_status cr_thunks(cub_exec *x, void **ip, void **op) {
  x->call = 0;
  return th_program_run(&x->run, x->base.entry, ip, op);
}

/* Captures the thunks into a new graph, instantiates and launches it. On failure the
   stream is left out of capture, nothing ran, and the caller runs eagerly. */
static hj_status cr_capture(cub_exec *x, void **ip, void **op) {
  cuda_driver *d = x->be->d;
  CUstream s = x->be->dv->stream;
  cuda_error e;
  cr_graph_drop(x);
  hj_status st = cuda_check(d, d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), &e,
                            "cuStreamBeginCapture");
  if (st != HJ_OK) return cr_check(x, &e);
  x->mode = CUB_CAPTURE;
  hj_status rs = cr_thunks(x, ip, op);
  CUgraph g = NULL;
  st = cuda_check(d, d->cuStreamEndCapture(s, &g), &e, "cuStreamEndCapture");
  if (rs != HJ_OK) {
    if (g) d->cuGraphDestroy(g);
    return rs;
  }
  if (st != HJ_OK) return cr_check(x, &e);
  x->graph = g;
  if (cuda_check(d, d->cuGraphInstantiateWithFlags(&x->gexec, g, 0), &e, "cuGraphInstantiateWithFlags") != HJ_OK) {
    x->gexec = NULL;
    return cr_check(x, &e);
  }
  x->captures++;
  x->recapture = false;
  if (cuda_check(d, d->cuGraphLaunch(x->gexec, s), &e, "cuGraphLaunch") != HJ_OK) return cr_check(x, &e);
  x->replays++;
  return HJ_OK;
}

/* Step 3 (see the top). */
static hj_status cr_execute(cub_exec *x, void **ip, void **op) {
  hj_ctx_t *ctx = x->base.ctx;
  if (!x->graphable || x->runs == 0) {
    x->mode = CUB_EAGER;
    x->eager_runs++;
    return cr_thunks(x, ip, op);
  }
  if (x->gexec && !x->recapture) {
    x->mode = CUB_REPLAY;
    hj_status st = cr_thunks(x, ip, op);
    if (st != HJ_OK) return st;
    if (x->call != arrlen(x->nodes)) x->recapture = true;
    if (!x->recapture) {
      cuda_error e;
      cuda_driver *d = x->be->d;
      if (cuda_check(d, d->cuGraphLaunch(x->gexec, x->be->dv->stream), &e, "cuGraphLaunch") != HJ_OK)
        return cr_check(x, &e);
      x->replays++;
      x->recaptures_in_row = 0;
      return HJ_OK;
    }
  }
  if (x->gexec && ++x->recaptures_in_row >= CUB_RECAPTURE_LIMIT) {
    /* a capture costs more than the eager launches it records: when runs keep changing
       a library node's addresses (one executable run with each layer's weights, cuBLAS
       chosen for one of its matmuls), launching eagerly is the faster way */
    snprintf(x->graph_why, sizeof x->graph_why, "captured again on %d runs in a row (library nodes "
             "with new addresses): launched eagerly from now on", x->recaptures_in_row);
    x->graphable = false;
    cr_graph_drop(x);
    x->mode = CUB_EAGER;
    x->eager_runs++;
    return cr_thunks(x, ip, op);
  }
  hj__err_saved saved;
  hj__err_save(ctx, &saved);
  hj_status st = cr_capture(x, ip, op);
  if (st == HJ_OK) return HJ_OK;
  /* no graph for this executable: say why (the stats line), run eagerly from now on */
  snprintf(x->graph_why, sizeof x->graph_why, "capture failed: %.140s", hj__ctx_err(ctx));
  x->graphable = false;
  hj__err_restore(ctx, &saved);
  cr_nodes_free(x);
  x->mode = CUB_EAGER;
  x->eager_runs++;
  return cr_thunks(x, ip, op);
}

/* ---- a run ------------------------------------------------------------------------------------- */

static bool cr_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Leaf pointer for the device: |p| itself when it is ours, else a staging buffer (|copy_in|:
   filled from p). */
static hj_status cr_leaf(cub_exec *x, cub_stage **stage, int i, void *p, size_t bytes, bool copy_in,
                         void **out) {
  cub_state *s = x->be;
  *out = p;
  if (bytes == 0) return HJ_OK;
  if (cr_aligned(p) && cub_find(s, p, bytes)) return cub_to_device(s, p, bytes);
  while (arrlen(*stage) <= i) {
    cub_stage z = { 0 };
    arrput(*stage, z);
  }
  cub_stage *g = &(*stage)[i];
  if (!g->p || g->bytes < bytes) {
    pthread_mutex_unlock(&s->mu);   /* cub_alloc_managed takes it */
    if (g->p) cub_free_managed(s, g->p);
    g->p = NULL;
    hj_status st = cub_alloc_managed(s, bytes, &g->p);
    pthread_mutex_lock(&s->mu);
    if (st != HJ_OK) return st;
    g->bytes = bytes;
  }
  if (copy_in) {
    memcpy(g->p, p, bytes);
    cub_alloc *al = cub_find(s, g->p, bytes);
    if (al) al->on_host = true;
  }
  *out = g->p;
  return cub_to_device(s, g->p, bytes);
}

hj_status cub_run(cub_exec *x, void *const *in, int nin, void *const *out, int nout) {
  hj_ctx_t *ctx = x->base.ctx;
  const th_program *e = x->base.entry;
  if (x->offline) return hj__err(ctx, HJ_ERR_UNSUPPORTED, "CUDA backend: compiled without a device");
  if (nin != e->plan.nin || nout != e->plan.nout || nin != arrlen(x->in_bytes) || nout != arrlen(x->out_bytes))
    return hj__err(ctx, HJ_ERR_INTERNAL, "CUDA backend: %d/%d leaves given, the plan has %d/%d",
                   nin, nout, e->plan.nin, e->plan.nout);
  cub_state *s = x->be;
  void **ip = calloc((size_t)nin + 1, sizeof *ip), **op = calloc((size_t)nout + 1, sizeof *op);
  if (!ip || !op) {
    free(ip);
    free(op);
    return hj__err(ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  }
  pthread_mutex_lock(&x->run_mu);
  pthread_mutex_lock(&s->mu);
  cuda_error ce;
  hj_status st = cuda_device_bind(s->dv, &ce) == HJ_OK ? HJ_OK : cr_check(x, &ce);
  for (int i = 0; st == HJ_OK && i < nin; i++) st = cr_leaf(x, &x->stage_in, i, in[i], x->in_bytes[i], true, &ip[i]);
  for (int i = 0; st == HJ_OK && i < nout; i++) st = cr_leaf(x, &x->stage_out, i, out[i], x->out_bytes[i], false, &op[i]);
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(x->base.programs); i++) {
    th_program *p = x->base.programs[i];
    st = cub_to_device(s, p->arena, 1);
    for (ptrdiff_t k = 0; st == HJ_OK && k < arrlen(p->plan.consts); k++) st = cub_to_device(s, p->consts[k], 1);
  }
  if (st == HJ_OK) st = cr_execute(x, ip, op);
  x->mode = CUB_EAGER;
  if (cuda_device_sync(s->dv, &ce) != HJ_OK && st == HJ_OK) st = cr_check(x, &ce);
  for (int i = 0; st == HJ_OK && i < nout; i++)
    if (op[i] != out[i] && x->out_bytes[i]) {
      cub_alloc *al = cub_find(s, op[i], x->out_bytes[i]);
      if (al && !al->on_host) cuda_mem_prefetch(s->dv, (CUdeviceptr)al->base, al->bytes, false, &ce);
      if (al) al->on_host = true;
    }
  if (st == HJ_OK && nout && cuda_device_sync(s->dv, &ce) != HJ_OK) st = cr_check(x, &ce);
  /* host work read and wrote the arenas (and read constants) on the host: back to the
     device before the next run's kernels, instead of page faults */
  for (ptrdiff_t i = 0; x->host_work && i < arrlen(x->base.programs); i++) {
    th_program *p = x->base.programs[i];
    cub_alloc *al = cub_find(s, p->arena, 1);
    if (al) al->on_host = true;
    for (ptrdiff_t k = 0; k < arrlen(p->plan.consts); k++)
      if ((al = cub_find(s, p->consts[k], 1))) al->on_host = true;
  }
  for (int i = 0; st == HJ_OK && i < nout; i++)
    if (op[i] != out[i] && x->out_bytes[i]) memcpy(out[i], op[i], x->out_bytes[i]);
  if (st == HJ_OK) x->runs++;
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_unlock(&x->run_mu);
  free(ip);
  free(op);
  return st;
}

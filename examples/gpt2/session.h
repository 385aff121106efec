/* session.h — running GPT-2 through hlojit: the weights as buffers, the compiled graphs
   (model.h) per length bucket, the KV cache, prefill and decode, timing and the verify
   folder.

   // L layers, C channels, NH heads, hs head size, V vocab, maxT context

   STAGES. The network runs as a chain of graphs: an embedding graph, one block graph
   (compiled once per bucket, run for every layer with that layer's weights) and a head
   graph (|layers_per_graph| 1, the default on the CPU backend and the evaluator); N puts
   N blocks in each block graph; 0 makes the whole model one graph (embedding, every block
   and the head: the default on the CUDA backend). Compiles cost about the same either
   way, since structurally identical fusions share one kernel (GPT-2 124M, CPU, disk cache
   off, a 64-token prompt and its decode bucket: 0.40-0.43 s per block against 0.39-0.40
   whole, two runs each), and on the CPU the whole graph gained nothing (bench_gpt2, one
   run each: decode at 2 threads 0.89 of the bandwidth bound per block, 0.84 whole). On
   the CUDA backend every hj_exec_run synchronises and a block graph run with each layer's
   weights updates its nodes on every run, so a decode step per block is 14 runs, graph
   launches and synchronisations, against one with the whole model, whose graph nodes
   never change; its host-side compile took 0.61 s against 0.39 per block (the 124M shape
   on the CUDA test double). bench_gpt2_gpu times both on a GPU.

   BUCKETS. A prefill of n tokens runs through hlojit's tracing JIT (hj_jit_call): each
   prefill stage is one hj_jit whose rows dim is HJ_DYN(maxT), in buckets 16, 32, 64, ...,
   maxT; the JIT pads the rows, masks what crosses the padding and returns k, v, x and the
   verify outputs at the real n rows, so a bucket is compiled once and every prompt length
   in it runs on that code. (|prefill_jit| false: the session does the same by hand, one
   hj_compile per bucket T, the ids padded with 0; padding rows cannot reach real ones,
   model.h.) A decode step at position pos runs the block graph built for a
   cache of Tc = the smallest power of two >= pos + 1 (at least 64, at most maxT) entries;
   the cache buffers grow (a host copy of the filled rows) when pos reaches the bucket's
   end. A model whose whole cache (K and V of maxT positions, every layer) takes at most
   8 MiB gets Tc = maxT from the start: reading it costs little next to the compiles that
   smaller buckets would need. The decode embedding and head graphs do not depend on Tc.
   Decode executables are kept for the session's life, keyed by their spec: one compile
   per cache bucket and graph kind (decode has no dynamic dims: the position is a runtime
   scalar). Compiled code also lands in hlojit's disk cache, so a second process with the
   same model compiles nothing (disk_hits).

   KV CACHE. Per layer kc (NH, hs, Tc) and vc (NH, Tc, hs) buffers hold positions
   0..length-1. A decode step's graph writes its position's key and value into them in
   place (the caches are donated: outputs aliasing the inputs, model.h); the prefill's k
   and v outputs (their real rows) are copied in on the host, once per prompt, as are the
   filled rows when the cache grows into a bigger bucket. A prefill, which replaces the
   cache, also remakes it at its own bucket when the cache is bigger: a decode step reads
   its whole bucket, so a short prompt after a long one would otherwise pay for the long
   one on every step.

   WEIGHTS. Each tensor becomes an hj_buffer: by default a copy, in the layout LAYOUTS
   says, in hlojit's 2 MiB-aligned, huge-page-advised memory. A bf16 checkpoint's matrices
   (the blocks' four and the lm_head's copy of wte) stay bf16 with |keep_bf16| (the
   default) when the executables run on the CPU backend (HJ_BACKEND_CPU, or AUTO when a
   one-op probe graph compiles for the CPU): each is the rhs of an f32 x bf16 matmul,
   which the CPU kernels widen as they read it (exact), so the results are bit for bit
   those of the widened weights, at half the bytes. Everything else, and every tensor on
   another backend (the GPU's matmul kernels take f32 only), is widened to f32 here: the
   vectors, wpe, and wte for the embedding's gather. GPT-2 124M, bench_gpt2, one run on a
   2-core Zen 4: decode 8.2 ms a step against 15.5 with f32 weights on 1 thread (2
   threads: 5.2 / 9.7); prefill T = 64 106 / 111 ms.
   On the CPU backend, the f32 tensors that stay in the file's layout and that no matmul
   streams (wte when the head has its own copy, as with kernel_layouts, wpe, and the
   vectors) are not copied but read-only hj_buffer_wraps over the loader's mapping, where
   they start on a cache line (session.c, use_mapping): the embedding's gather reads a few
   rows of each table a step, and the vectors are small, so 4 KiB pages cost them nothing
   (GPT-2 124M llm.c f32: 158 MB mapped, 494 MB copied, peak RSS 1.04 GB against 1.21;
   bench_gpt2 at 2 threads, 3 runs each way alternated, prefill T = 64 60-65 ms against
   62-63 copied, T = 256 236-265 against 244-255). Not on the CUDA backend, which would
   stage a host buffer through device memory on every run. --stats prints the two byte
   counts. With |zero_copy|, every f32 tensor kept in the file's layout is
   such a view: no copy and no memory
   beyond the page cache, but slower: GPT-2 124M decode, one thread, both settings in one
   process taking turns, all matrices as stored: 41.5 and 59.1 ms a step over the mapping
   against 33.2 and 44.3 ms over copies (two runs); with the kernel layouts (where only
   wte, wpe, fcprojw and the vectors can be mapped) 25.7 / 33.1 against 24.0 / 23.5 ms.
   The mapping's 4 KiB pages cost the matrix kernels TLB misses that the copies' 2 MiB
   pages avoid; so the matrices are copied by default, and zero_copy is for a machine short
   of memory.
   Once a tensor is copied, its pages in the mapping leave the process's resident set
   (gpt2_weights_release), and so do wte's when only the embedding's gather reads them in
   place (the rows a step reads fault back in from the page cache): what stays resident is
   the copies and the few mapped tensors. GPT-2 124M llm.c f32, 20 greedy tokens, code
   from the disk cache: peak RSS 0.57 GB against 1.04 GB without the release (the whole
   file stayed resident beside its copies), same ids, same tokens/s.

   LAYOUTS. Each matrix may run as x @ W with W (in, out) or as x @ W^T with W (out, in);
   the CPU backend has an M = 1 (decode) kernel for each. With |kernel_layouts| (the
   default) the session keeps each matrix in the layout that decoded fastest when this was
   chosen, whatever the file's:
     qkvw, attprojw, fcw (in, out); fcprojw (out, in); and, for the tied lm_head, a second
     copy of wte transposed to (C, Vp), so the head is a plain x @ W (wte itself stays for
     the embedding).
   Then (GPT-2 124M, one thread, the layouts taking turns in one process, a shared 2-core
   AVX-512 machine) 12 decode blocks took 17.9-21.4 ms this way against 21.8-24.8 ms all
   (out, in) and 20.4-23.5 ms all (in, out); the lm_head 6.5-7.1 ms over wte^T against
   10.2-14.3 ms over wte. Since the x @ W^T gemv reads one row of W at a time (matmul.c,
   gemv_cols) that is no longer so on the CPU: bench_gpt2 on Zen 4, one run, 1 / 2 threads,
   decode 15.60 / 9.52 ms with every matrix as stored (the head over wte) against 18.18 /
   10.79 with these layouts without panels ("plain"); with x @ W reading 12 rows per pass
   (matmul.c, gemv_rows), in a run whose 2-thread read rate was 34 GB/s, 15.61 / 14.96
   against 17.55 / 15.26. The panels below are what the CPU
   uses. The head's copy (V x C floats more, 154 MB at 124M) still paid at 2 threads: the
   head over wte against over its panel copy, HLOJIT_PROFILE=1 build/gpt2, 3 runs each,
   alternated, 3.74-4.21 ms against 3.41-3.46 (and one 4.59; 1 thread alike, 5.0-5.4
   ms), so it stays; and these layouts stay for the GPU, where nothing has been measured
   since.
   Panels (|panels|, the default with kernel_layouts): on the CPU backend, the four block
   matrices and the lm_head's copy are instead kept in the matmul's panel order
   (hj_linear_panels / hj_linear_pack, HJ_LINEAR_PANELS: (in/kc, out/nr, kc, nr)), which
   its kernels read in place instead of packing them on every prefill (bf16 matrices kept
   bf16 too: hj_linear_pack_bf16, widened as the kernels load them). Not with zero_copy
   (a copy either way), or where the CPU has no
   panel order for a shape (a width not a multiple of its nr: that matrix keeps the layout
   above). GPT-2 124M, bench_gpt2 (Zen 4, 1 / 2 threads, one run, the same weights both
   ways): prefill T = 64 110.7 / 59.3 ms against 138.2 / 72.6 without ("plain"), T = 256
   466 / 239 against 491 / 256, decode 15.5 / 9.7 ms against 18.2 / 10.8.

   VERIFY. With |verify_dir|, every step K (0: the prefill, then one per decode) writes
   DIR/step_K/emb.npy (n_K, C), res_L.npy (n_K, C) for every block L and logits.npy (V,),
   the layout of tests/reference/gpt2.py's verify folders (n_0 = the prompt's real rows).

   Errors: every function returns 0, or -1 with the message in |err| (hlojit's own message
   when a compile or run fails). */
#ifndef GPT2_SESSION_H
#define GPT2_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "gpt2_err.h"
#include "hlojit.h"
#include "weights.h"

typedef struct gpt2_session_opts {
  hj_backend_t backend;   /* default HJ_BACKEND_AUTO */
  int num_threads;        /* 0: all cores (default) */
  int layers_per_graph;   /* blocks per graph (STAGES); 0: the whole model in one graph;
                             default -1: 0 on the CUDA backend, 1 elsewhere */
  const char *verify_dir; /* NULL (default): no verify output */
  bool kernel_layouts;     /* default true: matrices in the layouts of LAYOUTS; false: as
                              the file stores them */
  bool panels;             /* default true: with kernel_layouts, on the CPU backend, the
                              block matrices in its panel order (LAYOUTS); false: the
                              plain kernel layouts */
  bool prefill_jit;        /* default true: prefill through hlojit's tracing JIT (BUCKETS);
                              false: one hj_compile per bucket, ids padded here */
  bool zero_copy;          /* default false: only the tensors no matmul streams are used
                              over the loader's mapping, on the CPU backend; true: every
                              f32 tensor kept in the file's layout (WEIGHTS) */
  bool keep_bf16;          /* default true: on the CPU backend (HJ_BACKEND_CPU, or AUTO when
                              it resolves to the CPU), a bf16 checkpoint's matrices stay
                              bf16 (WEIGHTS); false: widened to f32 */
} gpt2_session_opts;
void gpt2_session_opts_init(gpt2_session_opts *o);

typedef struct gpt2_session gpt2_session;

/* Makes the context and the weight buffers from |w| (which must outlive the session).
   Compiles nothing yet. */
int gpt2_session_create(const gpt2_weights *w, const gpt2_session_opts *o,
                        gpt2_session **out, gpt2_err *err);
void gpt2_session_free(gpt2_session *s);

/* Runs |n| ids (1 <= n <= maxT, each in [0, V)) at positions 0..n-1, replacing whatever
   the cache held. *logits: the V logits of the last position, valid until the next call.
   The cache is then the bucket of n + 1 positions (KV CACHE), even if it was bigger. */
int gpt2_session_prefill(gpt2_session *s, const int32_t *ids, int n, const float **logits,
                         gpt2_err *err);
/* Feeds |id| at position gpt2_session_length() (< maxT) and appends it to the cache. */
int gpt2_session_decode(gpt2_session *s, int32_t id, const float **logits, gpt2_err *err);
/* Positions held in the cache. */
int gpt2_session_length(const gpt2_session *s);
/* Forgets the positions from |n| on (n <= length): the next decode feeds position n. */
void gpt2_session_rewind(gpt2_session *s, int n);

/* With a verify folder: writes DIR/ids.npy, int32 (n,) (the prompt and the generated
   ids); without one, does nothing. */
int gpt2_session_write_ids(gpt2_session *s, const int32_t *ids, int n, gpt2_err *err);

typedef struct gpt2_session_stats {
  int compiles;   /* executables whose machine code was compiled */
  int mem_hits;   /* runs that found their executable in the session, and executables
                     whose code was already loaded in the context (hlojit's CODE CACHE) */
  int disk_hits;  /* executables whose machine code came from the disk cache */
  double compile_s;
  double prefill_s, decode_s; /* run time of prefills / decode steps, compiles excluded */
  int64_t prefill_tokens, decode_tokens;
  hj_backend_t backend; /* of the last executable compiled */
  int cache_entries;    /* positions the KV cache has room for now (its bucket; 0: none) */
  int64_t weights_mapped_bytes; /* weight bytes used over the loader's mapping (WEIGHTS) */
  int64_t weights_copied_bytes; /* weight bytes in buffers of the session's own */
} gpt2_session_stats;
void gpt2_session_get_stats(const gpt2_session *s, gpt2_session_stats *out);

#endif

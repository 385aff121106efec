/* weights.h — GPT-2 checkpoints for the example: llm.c's .bin files and Hugging Face
   `model.safetensors` (GPT2LMHeadModel) with the config.json beside it. Library-independent.

   // L layers, C channels, NH heads, V vocab, Vp padded vocab, maxT context

   The file is mapped read-only (mmap) and every tensor view points into the mapping: nothing
   is copied unless a tensor's data is not aligned to its element size in the file (possible
   in a safetensors file whose header length is not a multiple of 4); such a tensor is copied
   once and counted in n_copied. Views stay valid until gpt2_weights_free. (Built with
   AddressSanitizer, the loader reads the file into one heap block instead, so that the
   sanitizer catches any read past the end of the file.)

   LAYOUTS. Matrices are row-major; |layout| says which dim is which:
     GPT2_OUT_IN  (out, in): torch.nn.Linear and llm.c; y = x @ W^T.
     GPT2_IN_OUT  (in, out): Hugging Face's Conv1D; y = x @ W.
   So qkvw, attprojw, fcw, fcprojw are OUT_IN from llm.c files and IN_OUT from safetensors.
   wte (V or Vp, C) and wpe (maxT, C) are embedding tables (GPT2_ROWS, one row per token or
   position) in both formats; the tied lm_head is logits = x @ wte^T over the first V rows.
   Vectors (biases, layer-norm parameters) are GPT2_VECTOR.

   FORMATS
   llm.c (karpathy/llm.c, train_gpt2.py's write_model): a header of 256 little-endian int32
   [magic 20240326, version (3: f32, 5: bf16), maxT, V, L, NH, C, Vp, 0...], then every
   parameter in this order, all of one dtype, with the L layers of each kind back to back:
     wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C),
     attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C),
     fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C).
   The file must be exactly that long. Rows V..Vp-1 of wte are padding.
   safetensors: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape,
   data_offsets [begin, end)}, "__metadata__": {...}}, then the data; offsets count from the
   end of the header, the tensors must tile the data exactly (no overlaps, no holes). Names
   are those of GPT2LMHeadModel's state dict with or without the "transformer." prefix:
   wte.weight (V, C), wpe.weight (maxT, C), h.{l}.ln_1.{weight,bias} (C),
   h.{l}.attn.c_attn.weight (C, 3C) .bias (3C), h.{l}.attn.c_proj.weight (C, C) .bias (C),
   h.{l}.ln_2.{weight,bias} (C), h.{l}.mlp.c_fc.weight (C, 4C) .bias (4C),
   h.{l}.mlp.c_proj.weight (4C, C) .bias (C), ln_f.{weight,bias} (C). Ignored: lm_head.weight
   (tied to wte), h.{l}.attn.bias and h.{l}.attn.masked_bias (attention-mask buffers of
   older exports); any other name is an error. Dtypes F32 and BF16, per tensor. config.json
   gives n_layer, n_head, n_embd, vocab_size and n_positions (or n_ctx); Vp = V.

   ERRORS. Every check names the file and the field: bad magic, unknown version, a header
   field out of range, a file shorter or longer than its header implies, a safetensors
   header that is bad JSON or runs past the file, offsets out of range, overlapping or not
   tiling the data, a byte count that does not match dtype x shape, an unsupported dtype, a
   missing or unexpected tensor, a shape that disagrees with config.json. Nothing is read
   outside the mapping. Little-endian hosts only (checked). */
#ifndef GPT2_WEIGHTS_H
#define GPT2_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_err.h"

typedef enum { GPT2_F32 = 0, GPT2_BF16 = 1 } gpt2_dtype;
/* GPT2_PANELS: never in a file; the session's copy of a matrix in the CPU backend's panel
   order (session.h, LAYOUTS): shape (in, out), buffer (in/kc, out/nr, kc, nr). */
typedef enum { GPT2_VECTOR = 0, GPT2_ROWS, GPT2_OUT_IN, GPT2_IN_OUT, GPT2_PANELS } gpt2_layout;
typedef enum { GPT2_FORMAT_LLMC = 0, GPT2_FORMAT_SAFETENSORS } gpt2_format;

typedef struct gpt2_tensor {
  const void *data;  /* float or uint16_t (bf16 bit pattern), row-major */
  gpt2_dtype dtype;
  int ndim;          /* 1 or 2 */
  int64_t shape[2];  /* as stored: (out, in) for GPT2_OUT_IN, (in, out) for GPT2_IN_OUT */
  gpt2_layout layout;
  int64_t panel[2];  /* GPT2_PANELS: kc, nr (hj_linear_panels) */
  char name[64];     /* the file's name for it: "h.3.attn.c_attn.weight", "qkvw[3]" */
} gpt2_tensor;

typedef struct gpt2_config {
  int max_T; /* context length (llm.c maxT, HF n_positions) */
  int V;     /* vocabulary */
  int Vp;    /* rows of wte: V padded (llm.c), or V */
  int L, NH, C;
} gpt2_config;

typedef struct gpt2_layer {
  gpt2_tensor ln1w, ln1b;         /* (C) */
  gpt2_tensor qkvw, qkvb;         /* (3C, C) OUT_IN or (C, 3C) IN_OUT; (3C): q, k, v */
  gpt2_tensor attprojw, attprojb; /* (C, C); (C) */
  gpt2_tensor ln2w, ln2b;         /* (C) */
  gpt2_tensor fcw, fcb;           /* (4C, C) OUT_IN or (C, 4C) IN_OUT; (4C) */
  gpt2_tensor fcprojw, fcprojb;   /* (C, 4C) OUT_IN or (4C, C) IN_OUT; (C) */
} gpt2_layer;

typedef struct gpt2_weights {
  gpt2_config cfg;
  gpt2_format format;
  gpt2_tensor wte;        /* (Vp, C) */
  gpt2_tensor wpe;        /* (maxT, C) */
  gpt2_tensor lnfw, lnfb; /* (C) */
  gpt2_layer *layer;      /* cfg.L of them */
  int n_copied;           /* tensors copied out of the mapping (misaligned data) */
  /* gpt2_weights_release for loaded weights, NULL for weights made in memory: a caller
     that only holds the struct (the session) calls it through here, without linking the
     loaders. */
  void (*release)(const struct gpt2_weights *w, const gpt2_tensor *t);
  struct gpt2_weights_priv *priv;
} gpt2_weights;

/* Loads |path|: an llm.c checkpoint if it starts with llm.c's magic, else a safetensors
   file (its config.json from the same directory). *out is NULL on failure. */
int gpt2_weights_load(const char *path, gpt2_weights **out, gpt2_err *err);
int gpt2_weights_load_llmc(const char *path, gpt2_weights **out, gpt2_err *err);
/* |config_json| NULL: "config.json" in the directory of |path|. */
int gpt2_weights_load_safetensors(const char *path, const char *config_json,
                                  gpt2_weights **out, gpt2_err *err);
/* Unmaps the file and frees everything; NULL is fine. */
void gpt2_weights_free(gpt2_weights *w);

/* Says that |t|'s bytes in the file's mapping will not be read again for a while (the
   caller copied them): the whole pages inside the tensor leave the process's resident set
   (madvise MADV_DONTNEED; the kernel keeps them in its page cache while memory allows).
   The view stays valid: a later read faults the pages in from the file again, the same
   bytes. Nothing happens for a tensor held in a copy or a file read into the heap. */
void gpt2_weights_release(const gpt2_weights *w, const gpt2_tensor *t);

/* For iteration (printing, checking): every tensor of |w| in llm.c's order (wte, wpe, then
   per kind all layers: ln1w[0..L-1], ln1b[...], ..., then lnfw, lnfb); 4 + 12 L of them.
   NULL for i out of range. */
int gpt2_weights_count(const gpt2_weights *w);
const gpt2_tensor *gpt2_weights_get(const gpt2_weights *w, int i);

/* Bytes per element of |dt|. */
static inline size_t gpt2_dtype_size(gpt2_dtype dt) { return dt == GPT2_F32 ? 4 : 2; }

#endif

/* main.c — build/gpt2: GPT-2 text generation in plain C through hlojit.

     gpt2 --model FILE|DIR (--prompt TEXT | --ids 464,3290) [--tokens N]
          [--greedy | --temperature T --top-k K --top-p P --seed S]
          [--backend auto|cpu|cuda|interp] [--threads N] [--print-ids]
          [--verify DIR] [--stats] [--vocab DIR] [--layers-per-graph N]
          [--layouts kernel|plain|stored] [--no-eot] [--no-jit] [--zero-copy] [--f32-weights]
          [--help]

   The model is an llm.c checkpoint or a Hugging Face model.safetensors (a directory means
   DIR/model.safetensors; config.json beside it). The vocabulary (encoder.json + vocab.bpe,
   or Hugging Face's names for the same two files, vocab.json + merges.txt) is --vocab DIR,
   else the model's own directory if it has them, else GPT-2's (the
   repository's examples/gpt2/data/gpt2-bpe); it is used only if its size is the model's V.
   Without a vocabulary --prompt is refused and the output is ids.

   GENERATION (the reference's, tests/reference/gpt2.py): step 0 is the prefill of the
   prompt, whose last logits choose the first new token; each later step feeds the token
   chosen before it. It stops after N tokens, after choosing <|endoftext|> (the
   vocabulary's, or id V - 1 without one; --no-eot: never), or when the context is full
   (the step that fed position maxT - 1), saying which on stderr. Text streams to stdout
   as each token is chosen; with --print-ids stdout gets only the generated ids, on one
   line, comma-separated. An empty prompt starts from <|endoftext|>.

   Exit status: 0; 1 for a file, model or run error (one line on stderr naming the file
   and what is wrong); 2 for a bad command line. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bpe.h"
#include "sample.h"
#include "session.h"
#include "weights.h"

#ifndef GPT2_VOCAB_DIR
#define GPT2_VOCAB_DIR "examples/gpt2/data/gpt2-bpe"
#endif

static const char USAGE[] =
    "usage: gpt2 --model FILE|DIR (--prompt TEXT | --ids 464,3290) [options]\n"
    "\n"
    "  --model FILE|DIR     llm.c .bin checkpoint (f32 or bf16), or a Hugging Face\n"
    "                       model.safetensors (a directory: DIR/model.safetensors) with\n"
    "                       config.json beside it\n"
    "  --prompt TEXT        prompt text (\"<|endoftext|>\" in it is the special token)\n"
    "  --ids A,B,...        prompt token ids instead of text\n"
    "  --tokens N           tokens to generate (default 64)\n"
    "  --greedy             always the most likely token\n"
    "  --temperature T      sampling temperature, > 0 (default 1; 0 means --greedy)\n"
    "  --top-k K            sample from the K most likely tokens (default 0: all)\n"
    "  --top-p P            sample from the smallest set holding probability P (default 1)\n"
    "  --seed S             seed of the sampler's generator (default 0): same seed, same text\n"
    "  --backend B          auto|cpu|cuda|interp (default auto)\n"
    "  --threads N          CPU threads (0: all cores; default: all, or 1 for a model\n"
    "                       under 32 MB, whose kernels are too short to share)\n"
    "  --print-ids          print the generated ids (comma-separated) instead of text\n"
    "  --verify DIR         write every step's embeddings, residuals and logits as .npy\n"
    "                       (the layout of tests/reference/gpt2.py's verify folders)\n"
    "  --stats              one line at the end: compiles, cache hits, tokens/s, weight\n"
    "                       bytes used over the file's mapping and copied\n"
    "  --vocab DIR          encoder.json + vocab.bpe, or Hugging Face's vocab.json +\n"
    "                       merges.txt (default: beside the model, else GPT-2's)\n"
    "  --layers-per-graph N blocks per compiled graph, 0: the whole model (default: 0 on\n"
    "                       the GPU, 1 on the CPU)\n"
    "  --layouts L          kernel (default): each matrix in the layout the CPU kernels\n"
    "                       read fastest (on the CPU, the matmul's panel order); plain:\n"
    "                       the fastest of (in, out) and (out, in); stored: as the file\n"
    "                       stores them\n"
    "  --no-eot             do not stop at <|endoftext|>\n"
    "  --no-jit             prefill without hlojit's tracing JIT (one compile per bucket)\n"
    "  --zero-copy          the matrices kept in the file's layout are not copied either\n"
    "                       (less memory, slower: the mapping has no huge pages)\n"
    "  --f32-weights        widen a bf16 checkpoint's matrices to f32 (by default the CPU\n"
    "                       backend keeps them bf16: half the memory and bytes per token,\n"
    "                       the same results)\n"
    "  --help               this text\n";

typedef struct args {
  const char *model, *prompt, *ids, *verify, *vocab;
  int tokens, threads, layers_per_graph;
  bool stored_layouts, plain_layouts, no_jit, zero_copy, f32_weights, threads_set, greedy, sampling_flag, print_ids, stats, no_eot, help;
  gpt2_sampler_opts so;
  hj_backend_t backend;
} args;

static int usage_err(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "gpt2: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n(gpt2 --help for the options)\n");
  return 2;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static bool parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v)) return false;
  *out = v;
  return true;
}

/* Returns 0, or the exit status for a bad command line (message printed). */
static int parse_args(int argc, char **argv, args *a) {
  *a = (args){.tokens = 64, .layers_per_graph = -1, .backend = HJ_BACKEND_AUTO};
  gpt2_sampler_opts_init(&a->so);
  for (int i = 1; i < argc; i++) {
    char flag[64];
    const char *arg = argv[i], *val = NULL, *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) || (eq && (size_t)(eq - arg) >= sizeof flag))
      return usage_err("unexpected argument '%s'%s", arg, "");
    if (eq) {
      memcpy(flag, arg, (size_t)(eq - arg));
      flag[eq - arg] = 0;
      val = eq + 1;
    } else {
      snprintf(flag, sizeof flag, "%s", arg);
    }
    static const char *const bare[] = {"--greedy", "--print-ids", "--stats", "--no-eot",
                                       "--no-jit", "--zero-copy", "--f32-weights", "--help"};
    bool is_bare = false;
    for (size_t k = 0; k < sizeof bare / sizeof *bare; k++) is_bare |= !strcmp(flag, bare[k]);
    if (is_bare) {
      if (val) return usage_err("%s takes no value", flag, "");
      if (!strcmp(flag, "--greedy")) a->greedy = true;
      else if (!strcmp(flag, "--print-ids")) a->print_ids = true;
      else if (!strcmp(flag, "--stats")) a->stats = true;
      else if (!strcmp(flag, "--no-eot")) a->no_eot = true;
      else if (!strcmp(flag, "--no-jit")) a->no_jit = true;
      else if (!strcmp(flag, "--zero-copy")) a->zero_copy = true;
      else if (!strcmp(flag, "--f32-weights")) a->f32_weights = true;
      else a->help = true;
      continue;
    }
    static const char *const valued[] = {"--model", "--prompt", "--ids", "--verify", "--vocab",
                                         "--tokens", "--threads", "--layers-per-graph", "--top-k",
                                         "--seed", "--temperature", "--top-p", "--backend",
                                         "--layouts"};
    bool known = false;
    for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(flag, valued[k]);
    if (!known) return usage_err("unknown option '%s'", flag, "");
    if (!val) {
      if (i + 1 >= argc) return usage_err("%s needs a value", flag, "");
      val = argv[++i];
    }
    long n;
    double d;
    if (!strcmp(flag, "--model")) a->model = val;
    else if (!strcmp(flag, "--prompt")) a->prompt = val;
    else if (!strcmp(flag, "--ids")) a->ids = val;
    else if (!strcmp(flag, "--verify")) a->verify = val;
    else if (!strcmp(flag, "--vocab")) a->vocab = val;
    else if (!strcmp(flag, "--tokens")) {
      if (!parse_long(val, 0, INT_MAX, &n)) return usage_err("--tokens: '%s' is not a count >= 0", val, "");
      a->tokens = (int)n;
    } else if (!strcmp(flag, "--threads")) {
      if (!parse_long(val, 0, 1024, &n)) return usage_err("--threads: '%s' is not a count in 0..1024", val, "");
      a->threads = (int)n;
      a->threads_set = true;
    } else if (!strcmp(flag, "--layers-per-graph")) {
      if (!parse_long(val, 0, 4096, &n)) return usage_err("--layers-per-graph: '%s' is not a count >= 0", val, "");
      a->layers_per_graph = (int)n;
    } else if (!strcmp(flag, "--top-k")) {
      if (!parse_long(val, 0, INT_MAX, &n)) return usage_err("--top-k: '%s' is not a count >= 0", val, "");
      a->so.top_k = (int)n;
      a->sampling_flag = true;
    } else if (!strcmp(flag, "--seed")) {
      char *end;
      errno = 0;
      unsigned long long u = strtoull(val, &end, 10);
      if (errno || end == val || *end || val[0] == '-') return usage_err("--seed: '%s' is not a number >= 0", val, "");
      a->so.seed = u;
    } else if (!strcmp(flag, "--temperature")) {
      if (!parse_double(val, &d) || d < 0) return usage_err("--temperature: '%s' is not a number >= 0", val, "");
      a->so.temperature = d;
      a->sampling_flag = true;
    } else if (!strcmp(flag, "--top-p")) {
      if (!parse_double(val, &d) || !(d > 0 && d <= 1)) return usage_err("--top-p: '%s' is not a number in (0, 1]", val, "");
      a->so.top_p = d;
      a->sampling_flag = true;
    } else if (!strcmp(flag, "--layouts")) {
      if (strcmp(val, "kernel") && strcmp(val, "plain") && strcmp(val, "stored"))
        return usage_err("--layouts: '%s' is not kernel, plain or stored", val, "");
      a->stored_layouts = !strcmp(val, "stored");
      a->plain_layouts = !strcmp(val, "plain");
    } else if (!strcmp(flag, "--backend")) {
      static const char *const nm[] = {"auto", "interp", "cpu", "cuda"};
      static const hj_backend_t be[] = {HJ_BACKEND_AUTO, HJ_BACKEND_INTERP, HJ_BACKEND_CPU, HJ_BACKEND_CUDA};
      int k = 0;
      while (k < 4 && strcmp(val, nm[k])) k++;
      if (k == 4) return usage_err("--backend: '%s' is not one of auto, cpu, cuda, interp", val, "");
      a->backend = be[k];
    }
  }
  if (a->help) return 0;
  if (!a->model) return usage_err("--model is required%s%s", "", "");
  if (a->prompt && a->ids) return usage_err("give --prompt or --ids, not both%s%s", "", "");
  if (a->greedy && a->sampling_flag)
    return usage_err("--greedy does not go with --temperature, --top-k or --top-p%s%s", "", "");
  if (a->so.temperature == 0) a->greedy = true;
  a->so.greedy = a->greedy;
  return 0;
}

/* ---- model and vocabulary -------------------------------------------------------------------- */

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The directory part of |path| ("." if none) into |dir|. */
static void dir_of(const char *path, char *dir, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, n, ".");
  else if (slash == path) snprintf(dir, n, "/");
  else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* Loads the vocabulary from |dir| if it holds both files of a pair, OpenAI's names first,
   then Hugging Face's (the same two formats: a snapshot of a GPT-2 model on the Hub has
   vocab.json + merges.txt beside config.json): 1 loaded, 0 absent, -1 error. */
static int try_vocab(const char *dir, gpt2_bpe **bpe, gpt2_err *err) {
  static const char *const names[2][2] = {{"encoder.json", "vocab.bpe"},
                                          {"vocab.json", "merges.txt"}};
  for (int i = 0; i < 2; i++) {
    char enc[4096], merges[4096];
    snprintf(enc, sizeof enc, "%s/%s", dir, names[i][0]);
    snprintf(merges, sizeof merges, "%s/%s", dir, names[i][1]);
    if (is_file(enc) && is_file(merges)) return gpt2_bpe_load(enc, merges, bpe, err) ? -1 : 1;
  }
  return 0;
}

/* The vocabulary for a model of |V| ids (see the head comment); *bpe NULL: none fits, and
   *why says so. Returns -1 only for an explicit --vocab that cannot be used. */
static int find_vocab(const args *a, const char *model_dir, int V, gpt2_bpe **bpe, char *why,
                      size_t nwhy, gpt2_err *err) {
  *bpe = NULL;
  const char *dirs[2] = {model_dir, GPT2_VOCAB_DIR};
  if (a->vocab) {
    int r = try_vocab(a->vocab, bpe, err);
    if (r == 0)
      return gpt2_errf(err, "--vocab %s: no encoder.json + vocab.bpe (or vocab.json + "
                       "merges.txt) there", a->vocab);
    if (r < 0) return -1;
    if (gpt2_bpe_vocab_size(*bpe) != V) {
      gpt2_errf(err, "--vocab %s: %d ids, but the model has V = %d", a->vocab,
                gpt2_bpe_vocab_size(*bpe), V);
      gpt2_bpe_free(*bpe);
      *bpe = NULL;
      return -1;
    }
    return 0;
  }
  snprintf(why, nwhy, "no encoder.json + vocab.bpe (or vocab.json + merges.txt) of %d ids "
           "beside the model or in %s", V, GPT2_VOCAB_DIR);
  for (int i = 0; i < 2; i++) {
    gpt2_err e2;
    int r = try_vocab(dirs[i], bpe, &e2);
    if (r < 0) {
      snprintf(why, nwhy, "%s", e2.msg);
      continue;
    }
    if (r == 0) continue;
    if (gpt2_bpe_vocab_size(*bpe) == V) return 0;
    gpt2_bpe_free(*bpe);
    *bpe = NULL;
  }
  return 0;
}

/* A model this small runs on one thread unless --threads says otherwise: its kernels take
   microseconds, about what handing work to a second thread costs (the bundled model's
   decode on 2 idle cores, three runs: 7,300-8,100 tokens/s on 1 thread, 7,900-10,100 on 2;
   with one core busy with another process, 7,900 and 3,400, where it was 500 before the
   pool's threads ran the chunks of a thread waiting for a core). */
#define GPT2_SMALL_MODEL (32 << 20)

static double weight_bytes(const gpt2_weights *w) {
  double n = 0;
  for (int i = 0; i < gpt2_weights_count(w); i++) {
    const gpt2_tensor *t = gpt2_weights_get(w, i);
    n += 4.0 * (double)t->shape[0] * (double)(t->ndim == 2 ? t->shape[1] : 1);
  }
  return n;
}

/* --ids "464,3290" -> a malloc'd array. */
static int parse_ids(const char *s, int V, int32_t **out, int *n, gpt2_err *err) {
  *out = NULL;
  *n = 0;
  size_t cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  int32_t *ids = malloc(sizeof *ids * cap);
  if (!ids) return gpt2_errf(err, "out of memory");
  const char *p = s;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || end == p || (*end && *end != ',') || v < 0 || v >= V) {
      free(ids);
      return gpt2_errf(err, "--ids: '%s': expected comma-separated ids in [0, %d)", s, V);
    }
    ids[(*n)++] = (int32_t)v;
    p = *end ? end + 1 : end;
    if (*end && !*p) {
      free(ids);
      return gpt2_errf(err, "--ids: '%s' ends with a comma", s);
    }
  }
  *out = ids;
  return 0;
}

/* ---- generation ----------------------------------------------------------------------------- */

typedef struct gen {
  gpt2_session *s;
  gpt2_sampler *smp;
  const gpt2_bpe *bpe;
  const args *a;
  int maxT, eot;
  int32_t *ids; /* prompt then generated, room for P + tokens */
  int n, P;
} gen;

static void stream(const gen *g, int32_t id) {
  if (g->a->print_ids || !g->bpe || id == g->eot) return;
  size_t len;
  const char *b = gpt2_bpe_token(g->bpe, id, &len);
  if (b) fwrite(b, 1, len, stdout);
  fflush(stdout);
}

static int generate(gen *g, gpt2_err *err) {
  for (int k = 0; k < g->a->tokens; k++) {
    const float *logits;
    int rc = k == 0 ? gpt2_session_prefill(g->s, g->ids, g->n, &logits, err)
                    : gpt2_session_decode(g->s, g->ids[g->n - 1], &logits, err);
    if (rc) return -1;
    int32_t next = gpt2_sample(g->smp, logits);
    g->ids[g->n++] = next;
    stream(g, next);
    if (next == g->eot) {
      fprintf(stderr, "%s[stopped at <|endoftext|> after %d tokens]\n",
              g->a->print_ids ? "" : "\n", k + 1);
      break;
    }
    if (gpt2_session_length(g->s) == g->maxT) {
      fprintf(stderr, "%s[stopped: the context of %d tokens is full, after %d tokens]\n",
              g->a->print_ids ? "" : "\n", g->maxT, k + 1);
      break;
    }
  }
  return 0;
}

static const char *backend_name(hj_backend_t b) {
  switch (b) {
  case HJ_BACKEND_INTERP: return "interp";
  case HJ_BACKEND_CPU: return "cpu";
  case HJ_BACKEND_CUDA: return "cuda";
  default: return "auto";
  }
}

int main(int argc, char **argv) {
  args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc;
  if (a.help) {
    fputs(USAGE, stdout);
    return 0;
  }
  gpt2_err err = {{0}};
  char path[4096], model_dir[4096], why[1024] = "";
  if (is_dir(a.model)) {
    snprintf(path, sizeof path, "%s/model.safetensors", a.model);
    snprintf(model_dir, sizeof model_dir, "%s", a.model);
  } else {
    snprintf(path, sizeof path, "%s", a.model);
    dir_of(a.model, model_dir, sizeof model_dir);
  }
  gpt2_weights *w = NULL;
  gpt2_bpe *bpe = NULL;
  gpt2_session *s = NULL;
  gen g = {.a = &a};
  bool streamed = false;
  rc = 1;
  if (gpt2_weights_load(path, &w, &err)) goto done;
  const gpt2_config *c = &w->cfg;
  if (find_vocab(&a, model_dir, c->V, &bpe, why, sizeof why, &err)) goto done;
  g.bpe = bpe;
  g.maxT = c->max_T;
  g.eot = a.no_eot ? -1 : bpe && gpt2_bpe_eot(bpe) >= 0 ? gpt2_bpe_eot(bpe) : c->V - 1;
  int32_t *prompt = NULL;
  size_t np = 0;
  if (a.ids) {
    int n;
    if (parse_ids(a.ids, c->V, &prompt, &n, &err)) goto done;
    np = (size_t)n;
  } else if (a.prompt && a.prompt[0]) {
    if (!bpe) {
      gpt2_errf(&err, "--prompt needs a vocabulary: %s (use --ids or --vocab DIR)", why);
      goto done;
    }
    gpt2_bpe_encode_opts eo;
    gpt2_bpe_encode_opts_init(&eo);
    eo.allow_special = 1;
    if (gpt2_bpe_encode(bpe, a.prompt, strlen(a.prompt), &eo, &prompt, &np, &err)) goto done;
  }
  if (np == 0) { // unconditional: start from <|endoftext|>
    free(prompt);
    int eot = bpe && gpt2_bpe_eot(bpe) >= 0 ? gpt2_bpe_eot(bpe) : c->V - 1;
    prompt = malloc(sizeof *prompt);
    if (!prompt) {
      gpt2_errf(&err, "out of memory");
      goto done;
    }
    prompt[0] = eot;
    np = 1;
  }
  if (np > (size_t)c->max_T) {
    gpt2_errf(&err, "the prompt has %zu tokens, more than the model's context of %d", np, c->max_T);
    free(prompt);
    goto done;
  }
  g.P = g.n = (int)np;
  if (a.tokens > c->max_T - g.P + 1) a.tokens = c->max_T - g.P + 1; // no more can be made
  g.ids = malloc(sizeof *g.ids * (np + (size_t)a.tokens));
  if (!g.ids) {
    free(prompt);
    gpt2_errf(&err, "out of memory");
    goto done;
  }
  memcpy(g.ids, prompt, sizeof *prompt * np);
  free(prompt);
  if (!bpe && !a.print_ids) fprintf(stderr, "gpt2: note: %s; printing ids\n", why);
  if (gpt2_sampler_create(&a.so, c->V, &g.smp, &err)) goto done;
  gpt2_session_opts so;
  gpt2_session_opts_init(&so);
  so.backend = a.backend;
  so.num_threads = a.threads;
  if (!a.threads_set && weight_bytes(w) <= GPT2_SMALL_MODEL) so.num_threads = 1;
  so.layers_per_graph = a.layers_per_graph;
  so.verify_dir = a.verify;
  so.kernel_layouts = !a.stored_layouts;
  so.panels = !a.plain_layouts;
  so.prefill_jit = !a.no_jit;
  so.zero_copy = a.zero_copy;
  so.keep_bf16 = !a.f32_weights;
  if (gpt2_session_create(w, &so, &s, &err)) goto done;
  g.s = s;
  if (!a.print_ids && bpe && !(g.P == 1 && g.ids[0] == g.eot)) { // the prompt, then the
    char *text;                                                     // tokens as they come
    size_t len;
    if (gpt2_bpe_decode(bpe, g.ids, (size_t)g.P, &text, &len, &err)) goto done;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    free(text);
    streamed = true;   /* a failure from here on ends the text's line before the message */
  }
  if (generate(&g, &err)) goto done;
  if (a.print_ids || !bpe) {
    for (int i = a.print_ids ? g.P : 0; i < g.n; i++) printf("%s%d", i > (a.print_ids ? g.P : 0) ? "," : "", g.ids[i]);
    printf("\n");
  } else {
    printf("\n");
  }
  fflush(stdout);
  if (gpt2_session_write_ids(s, g.ids, g.n, &err)) goto done;
  if (a.stats) {
    gpt2_session_stats st;
    gpt2_session_get_stats(s, &st);
    fprintf(stderr,
            "stats: compiles=%d mem_hits=%d disk_hits=%d prefill_tok_s=%.1f decode_tok_s=%.1f "
            "compile_s=%.2f backend=%s weights_mapped_bytes=%lld weights_copied_bytes=%lld\n",
            st.compiles, st.mem_hits, st.disk_hits,
            st.prefill_s > 0 ? (double)st.prefill_tokens / st.prefill_s : 0.0,
            st.decode_s > 0 ? (double)st.decode_tokens / st.decode_s : 0.0, st.compile_s,
            backend_name(st.backend), (long long)st.weights_mapped_bytes,
            (long long)st.weights_copied_bytes);
  }
  rc = 0;
done:
  if (rc && streamed) {
    fputc('\n', stdout);
    fflush(stdout);
  }
  if (rc) fprintf(stderr, "gpt2: %s\n", err.msg[0] ? err.msg : "failed");
  gpt2_session_free(s);
  gpt2_sampler_free(g.smp);
  free(g.ids);
  gpt2_bpe_free(bpe);
  gpt2_weights_free(w);
  return rc;
}

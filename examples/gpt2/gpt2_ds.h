/* gpt2_ds.h — stb_ds (Debian libstb-dev) for the GPT-2 example, under its own symbol names.

   Why the renaming: stb_ds has no `static` build mode, and libhlojit.a compiles its own copy
   (hlojit_impl/core.c). A program that links the example's tokenizer and loaders both on
   their own (the test tools) and together with libhlojit (the gpt2 program) would otherwise
   either miss the functions or define them twice. Each stbds_* function gets a gpt2_ prefix
   here; gpt2_ds.c holds the one implementation. Include this header instead of
   <stb/stb_ds.h>; it needs -std=gnu11 (hmput uses typeof). */
#ifndef GPT2_DS_H
#define GPT2_DS_H

#define stbds_arrgrowf      gpt2_stbds_arrgrowf
#define stbds_arrfreef      gpt2_stbds_arrfreef
#define stbds_hmfree_func   gpt2_stbds_hmfree_func
#define stbds_hmget_key     gpt2_stbds_hmget_key
#define stbds_hmget_key_ts  gpt2_stbds_hmget_key_ts
#define stbds_hmput_default gpt2_stbds_hmput_default
#define stbds_hmput_key     gpt2_stbds_hmput_key
#define stbds_hmdel_key     gpt2_stbds_hmdel_key
#define stbds_shmode_func   gpt2_stbds_shmode_func
#define stbds_hash_bytes    gpt2_stbds_hash_bytes
#define stbds_hash_string   gpt2_stbds_hash_string
#define stbds_rand_seed     gpt2_stbds_rand_seed
#define stbds_stralloc      gpt2_stbds_stralloc
#define stbds_strreset      gpt2_stbds_strreset
#define stbds_unit_tests    gpt2_stbds_unit_tests

#include <stb/stb_ds.h>

#endif

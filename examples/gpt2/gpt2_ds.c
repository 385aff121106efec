/* gpt2_ds.c — the one copy of stb_ds's functions for the GPT-2 example, under the gpt2_
   names that gpt2_ds.h gives them (see there for why). */
#define STB_DS_IMPLEMENTATION
#include "gpt2_ds.h"

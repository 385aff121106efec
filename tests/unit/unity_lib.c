/* unity_lib.c — the whole library as one translation unit (hlojit.h's single-header mode),
   for a build with sanitizer flags of its own: test-threads links it, compiled with
   -fsanitize=thread, into test_threads.c. */
#define HLOJIT_IMPLEMENTATION
#include "hlojit.h"

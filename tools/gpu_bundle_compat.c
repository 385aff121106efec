/* gpu_bundle_compat.c — linked into the GPU bundle's libhlojit.so only (backends/cuda/cuda.mk,
   gpu-bundle), so that it loads on an older glibc than this machine's: the static LLVM
   libraries call arc4random (glibc 2.36) and the new hypot/hypotf versions (2.35). The
   bundle is linked with --wrap for these three; the wrappers below use getrandom (2.25) and
   the original hypot versions (2.2.5), which every glibc of the last decade has. With them
   the bundle needs glibc 2.34 (what any program built here needs). */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/random.h>

double hj_compat_hypot_old(double a, double b);
float hj_compat_hypotf_old(float a, float b);
__asm__(".symver hj_compat_hypot_old, hypot@GLIBC_2.2.5");
__asm__(".symver hj_compat_hypotf_old, hypotf@GLIBC_2.2.5");

double __wrap_hypot(double a, double b);
float __wrap_hypotf(float a, float b);
uint32_t __wrap_arc4random(void);

double __wrap_hypot(double a, double b) { return hj_compat_hypot_old(a, b); }
float __wrap_hypotf(float a, float b) { return hj_compat_hypotf_old(a, b); }
uint32_t __wrap_arc4random(void) {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {}
  return v;
}

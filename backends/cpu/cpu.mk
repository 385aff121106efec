# backends/cpu/cpu.mk — the CPU backend's part of the build, included by the main Makefile.
# Defines (and only appends to):
#   CPU_SRC     the backend's .c files
#   CPU_CFLAGS  where the LLVM-C headers live (Debian: /usr/lib/llvm-19/include, off the
#               default path). Not `llvm-config --cflags`: that drags in C++ macros and
#               -D_GNU_SOURCE (TOOLCHAIN.md).
#   CPU_LDLIBS  libLLVM (one shared library, -lLLVM-19) for anything linking the backend.
# Every translation unit that includes backends/cpu/*.h needs CPU_CFLAGS; every program
# that links them needs CPU_LDLIBS (plus -lm -lpthread, already in LDLIBS).
LLVM_CONFIG ?= llvm-config-19

CPU_SRC    += backends/cpu/cpu_jit.c backends/cpu/threadpool.c
# Every other backend file too (cpu_backend.c, cpu_matmul.c, ...), each once.
CPU_SRC    := $(sort $(CPU_SRC) $(wildcard backends/cpu/*.c))
CPU_CFLAGS += -I$(shell $(LLVM_CONFIG) --includedir)
CPU_LDLIBS += $(shell $(LLVM_CONFIG) --ldflags) $(shell $(LLVM_CONFIG) --libs)

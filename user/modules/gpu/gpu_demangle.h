/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Kernel names demangled (gpu_demangle.c), on work bounded by the output's size: a
 * name comes from another process's ELF object or from its call of cuModuleGetFunction.
 */
#ifndef BPFTEL_GPU_DEMANGLE_H
#define BPFTEL_GPU_DEMANGLE_H

#include <stddef.h>

/*
 * in demangled into out (size bytes, NUL included) when it is an Itanium C++ ABI name
 * (under BPFTEL_ELF_NAME_MAX bytes) that demangles, cut at size - 1 bytes as snprintf
 * would; else in copied (cut the same way).
 */
void bpftel_gpu_demangle(const char *in, char *out, size_t size);

#endif /* BPFTEL_GPU_DEMANGLE_H */

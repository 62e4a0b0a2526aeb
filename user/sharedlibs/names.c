// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Names of the watcher's libraries, libsets and counters: stable strings that the CLI,
 * the metrics and the configuration file use. No dependency beyond the header, so the
 * configuration parser (and its fuzz target) can link it alone. */
#include <stddef.h>

#include "sharedlibs.h"

static const char *const lib_names[SHLIB_LIB__COUNT] = {
	[SHLIB_LIB_SSL] = "libssl",	  [SHLIB_LIB_CRYPTO] = "libcrypto",
	[SHLIB_LIB_GNUTLS] = "libgnutls", [SHLIB_LIB_CUDART] = "libcudart",
	[SHLIB_LIB_CUDA] = "libcuda",	  [SHLIB_LIB_GO] = "go",
};

static const char *const libset_names[SHLIB_LIBSET__COUNT] = {
	[SHLIB_LIBSET_CRYPTO] = "crypto",
	[SHLIB_LIBSET_GPU] = "gpu",
};

static const char *const counter_names[SHLIB_CNT__COUNT] = {
	[SHLIB_CNT_MATCHED] = "matched",	 [SHLIB_CNT_EMITTED] = "emitted",
	[SHLIB_CNT_NO_PATH] = "path_unreadable", [SHLIB_CNT_LOST] = "lost",
	[SHLIB_CNT_TOO_LONG] = "path_too_long",	 [SHLIB_CNT_EXEC_LOST] = "exec_lost",
	[SHLIB_CNT_NESTED] = "nested",		 [SHLIB_CNT_USERNS_SOCKETS] = "userns_sockets",
};

const char *bpftel_shlib_lib_name(enum shlib_lib lib)
{
	return (unsigned)lib < SHLIB_LIB__COUNT ? lib_names[lib] : "unknown";
}

const char *bpftel_shlib_libset_name(enum shlib_libset set)
{
	return (unsigned)set < SHLIB_LIBSET__COUNT ? libset_names[set] : "unknown";
}

const char *bpftel_shlib_counter_name(enum shlib_counter counter)
{
	const char *name = (unsigned)counter < SHLIB_CNT__COUNT ? counter_names[counter] : NULL;

	return name ? name : "unknown";
}

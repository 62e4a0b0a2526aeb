// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Must not compile: an after_init hook registered as a before_init hook.
 * With -DCONTROL the right hook is registered and it must compile, so the failure
 * can only come from the hook's type.
 */
#include "user/manager/manager.h"

static int my_after_init(const struct bpftel_hook_after_init *h, void *ctx)
{
	(void)h;
	(void)ctx;
	return 0;
}

static int my_before_init(const struct bpftel_hook_before_init *h, void *ctx)
{
	(void)h;
	(void)ctx;
	return 0;
}

int register_it(struct bpftel_module *m);

int register_it(struct bpftel_module *m)
{
#ifdef CONTROL
	(void)my_after_init;
	return bpftel_module__add_before_init(m, my_before_init, NULL);
#else
	(void)my_before_init;
	return bpftel_module__add_before_init(m, my_after_init, NULL);
#endif
}

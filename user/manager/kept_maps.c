// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Maps a restart hands from the instance it stops to the one it runs (ops.restart_keeps):
 * the stop keeps a descriptor of each before the module's close destroys its object,
 * the open hands it to the new object before it loads (bpf_map__reuse_fd), so that its
 * programs find what the old ones left. Only a restart's: a stop then a start begins
 * afresh, and whatever the run did not take goes once the restart returns. Under the
 * module's lock but drop_kept, which takes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "internal.h"
#include "user/common/log.h"

int kept_maps_init(struct bpftel_module *m)
{
	size_t n = 0;

	for (size_t i = 0; i < BPFTEL_MAX_KEPT_MAPS; i++)
		m->kept[i] = -1;
	while (m->ops->restart_keeps && m->ops->restart_keeps[n])
		n++;
	return n > BPFTEL_MAX_KEPT_MAPS ? -E2BIG : 0;
}

void keep_maps(struct bpftel_module *m)
{
	const char *const *names = m->ops->restart_keeps;
	struct bpf_map *map;

	if (!names || !__atomic_load_n(&m->keep_shared, __ATOMIC_ACQUIRE) ||
	    m->state < BPFTEL_MOD_LOADED)
		return;
	for (size_t i = 0; i < BPFTEL_MAX_KEPT_MAPS && names[i]; i++) {
		map = bpf_object__find_map_by_name(m->obj, names[i]);
		if (m->kept[i] < 0 && map && bpf_map__fd(map) >= 0)
			m->kept[i] = fcntl(bpf_map__fd(map), F_DUPFD_CLOEXEC, 0);
	}
}

/* The new object's map is defined as the kept one: a size set by configuration since
 * (a hook's resize) makes a new one. */
static bool same_definition(const struct bpf_map *map, int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	return !bpf_obj_get_info_by_fd(fd, &info, &len) && info.type == bpf_map__type(map) &&
	       info.key_size == bpf_map__key_size(map) &&
	       info.value_size == bpf_map__value_size(map) &&
	       info.max_entries == bpf_map__max_entries(map) &&
	       info.map_flags == bpf_map__map_flags(map);
}

/* Which kept map cannot be reused, or -1: each named is in the new object (a name
 * listed but kept from none is not), defined as the kept one. */
static int unfit_kept(struct bpftel_module *m, int *err)
{
	const char *const *names = m->ops->restart_keeps;
	struct bpf_map *map;

	for (size_t i = 0; names && i < BPFTEL_MAX_KEPT_MAPS && names[i]; i++) {
		if (m->kept[i] < 0)
			continue;
		map = bpf_object__find_map_by_name(m->obj, names[i]);
		*err = !map ? -ENOENT : !same_definition(map, m->kept[i]) ? -EINVAL : 0;
		if (*err)
			return (int)i;
	}
	return -1;
}

/* All or none: the maps a module keeps hold one state (a process's row counts the
 * rows it holds in the others), which half of it kept would contradict. */
void reuse_kept(struct bpftel_module *m)
{
	const char *const *names = m->ops->restart_keeps;
	int err = 0, bad = unfit_kept(m, &err);

	if (bad >= 0)
		pr_warn("module '%s': its maps are not kept across the restart: %s: %s",
			m->ops->name, names[bad], strerror(-err));
	for (size_t i = 0; names && i < BPFTEL_MAX_KEPT_MAPS && names[i]; i++) {
		if (m->kept[i] < 0)
			continue;
		/* reuse_fd takes a descriptor of its own. It fails only out of memory
		 * (that map is new then, the others kept: said). */
		err = bad >= 0 ? 0 : bpf_map__reuse_fd(bpf_object__find_map_by_name(m->obj, names[i]),
							m->kept[i]);
		if (err)
			pr_warn("module '%s': %s is not kept across the restart: %s",
				m->ops->name, names[i], strerror(-err));
		close(m->kept[i]);
		m->kept[i] = -1;
	}
}

void drop_kept(struct bpftel_module *m)
{
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < BPFTEL_MAX_KEPT_MAPS; i++) {
		if (m->kept[i] >= 0)
			close(m->kept[i]);
		m->kept[i] = -1;
	}
	pthread_mutex_unlock(&m->lock);
}

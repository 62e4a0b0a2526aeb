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

/* Maps a restart can hand on as they are: not the object's own data (.bss, .data,
 * .rodata: set from the new object's image), nor a ring buffer (sized at each load),
 * nor a map of maps (its slots are the object's). */
static bool keepable(const struct bpf_map *map)
{
	enum bpf_map_type t = bpf_map__type(map);

	return !bpf_map__is_internal(map) && t != BPF_MAP_TYPE_RINGBUF &&
	       t != BPF_MAP_TYPE_ARRAY_OF_MAPS && t != BPF_MAP_TYPE_HASH_OF_MAPS;
}

static void close_kept(struct bpftel_module *m)
{
	for (size_t i = 0; i < BPFTEL_MAX_KEPT_MAPS; i++) {
		if (m->kept[i] >= 0)
			close(m->kept[i]);
		m->kept[i] = -1;
	}
}

void keep_maps(struct bpftel_module *m)
{
	const char *const *names = m->ops->restart_keeps;
	struct bpf_map *map;

	if (!names || !bpftel_module__restarting(m) || m->state < BPFTEL_MOD_LOADED)
		return;
	for (size_t i = 0; i < BPFTEL_MAX_KEPT_MAPS && names[i]; i++) {
		map = bpf_object__find_map_by_name(m->obj, names[i]);
		if (!map || m->kept[i] >= 0)
			continue;
		if (!keepable(map)) {
			pr_warn("module '%s': %s cannot be kept across a restart", m->ops->name,
				names[i]);
			continue;
		}
		m->kept[i] = fcntl(bpf_map__fd(map), F_DUPFD_CLOEXEC, 0);
		if (m->kept[i] < 0) { /* all or none */
			pr_warn("module '%s': its maps are not kept across the restart: %s",
				m->ops->name, strerror(errno));
			close_kept(m);
			return;
		}
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

/* Which listed map cannot be reused, or -1: each kept is in the new object, defined as
 * the kept one; each in the new object was kept (a name listed but in neither object
 * is not). *err says why. */
static int unfit_kept(struct bpftel_module *m, int *err)
{
	const char *const *names = m->ops->restart_keeps;
	struct bpf_map *map;

	for (size_t i = 0; names && i < BPFTEL_MAX_KEPT_MAPS && names[i]; i++) {
		map = bpf_object__find_map_by_name(m->obj, names[i]);
		if (m->kept[i] < 0)
			*err = map && keepable(map) ? -ENOENT : 0;
		else
			*err = !map ? -ENOENT : !same_definition(map, m->kept[i]) ? -EINVAL : 0;
		if (*err)
			return (int)i;
	}
	return -1;
}

/* All or none: the maps a module keeps hold one state (a process's row counts the
 * rows it holds in the others), which half of it kept would contradict. A reuse that
 * fails (out of memory) after another was made fails the open: libbpf cannot undo it. */
int reuse_kept(struct bpftel_module *m)
{
	const char *const *names = m->ops->restart_keeps;
	int err = 0, bad, reused = 0;
	bool any = false;

	m->reused_maps = false;
	for (size_t i = 0; i < BPFTEL_MAX_KEPT_MAPS; i++)
		any |= m->kept[i] >= 0;
	if (!any)
		return 0;
	bad = unfit_kept(m, &err);
	if (bad >= 0)
		pr_warn("module '%s': its maps are not kept across the restart: %s: %s",
			m->ops->name, names[bad], strerror(-err));
	for (size_t i = 0; bad < 0 && !err && i < BPFTEL_MAX_KEPT_MAPS && names[i]; i++) {
		if (m->kept[i] < 0)
			continue;
		/* It takes a descriptor of its own. */
		err = bpf_map__reuse_fd(bpf_object__find_map_by_name(m->obj, names[i]),
					m->kept[i]);
		if (err)
			pr_err("module '%s': %s cannot be kept across the restart: %s",
			       m->ops->name, names[i], strerror(-err));
		else
			reused++;
	}
	close_kept(m);
	m->reused_maps = reused && !err;
	return reused ? err : 0;
}

bool bpftel_module__reused_maps(const struct bpftel_module *m)
{
	return m->reused_maps;
}

bool bpftel_module__restarting(const struct bpftel_module *m)
{
	return __atomic_load_n(&m->keep_shared, __ATOMIC_ACQUIRE);
}

void drop_kept(struct bpftel_module *m)
{
	pthread_mutex_lock(&m->lock);
	close_kept(m);
	pthread_mutex_unlock(&m->lock);
}

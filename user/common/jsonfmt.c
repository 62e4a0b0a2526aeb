// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdio.h>

#include "jsonfmt.h"

const char *jstr(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "-";
}

long long jint(json_t *obj, const char *key)
{
	return json_integer_value(json_object_get(obj, key));
}

double jnum(json_t *obj, const char *key)
{
	return json_number_value(json_object_get(obj, key));
}

void fmt_duration(char *buf, size_t size, double secs)
{
	long long s = (long long)secs;

	if (secs < 1)
		snprintf(buf, size, "%.1fms", secs * 1e3);
	else if (s < 60)
		snprintf(buf, size, "%.1fs", secs);
	else if (s < 3600)
		snprintf(buf, size, "%lldm%02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, size, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, size, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}

void fmt_bytes(char *buf, size_t size, double bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, size, "%.0f B", bytes);
		return;
	}
	while (bytes >= 1024 && u < 3) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, size, "%.1f %s", bytes, units[u]);
}

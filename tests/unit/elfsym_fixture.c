// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Fixture shared library for test_elfsym: one plain function and two versions of one
 * function (fixture_versioned@VERS_1, hidden, and fixture_versioned@@VERS_2, the default),
 * built with the version script elfsym_fixture.map.
 */
#define FIXTURE_API __attribute__((visibility("default"), used, noinline))

FIXTURE_API int fixture_plain(int x)
{
	return x + 1;
}

FIXTURE_API int fixture_other(int x)
{
	return x * 3;
}

FIXTURE_API int fixture_v1(int x)
{
	return x + 10;
}

FIXTURE_API int fixture_v2(int x)
{
	return x + 20;
}

__asm__(".symver fixture_v1, fixture_versioned@VERS_1");
__asm__(".symver fixture_v2, fixture_versioned@@VERS_2");

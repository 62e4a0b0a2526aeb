/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A session of the stub libssl (stub_tls.c) set up like curl's: no SSL_set_fd, its own
 * BIO reading its socket with recv(2) inside SSL_read. tls_pattern's bio mode makes it.
 */
#ifndef BPFTEL_TESTS_STUB_BIO_H
#define BPFTEL_TESTS_STUB_BIO_H

#define STUB_BIO_MAGIC 0x214f4942u /* "BIO!" */

struct stub_bio_session {
	unsigned int magic;
	int fd;
};

#endif /* BPFTEL_TESTS_STUB_BIO_H */

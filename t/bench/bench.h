
/*
 * What the benchmark programs share.
 */

#ifndef _NGX_BENCH_H_INCLUDED_
#define _NGX_BENCH_H_INCLUDED_


#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>


/* monotonic seconds */
static inline double
ngx_bench_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


/*
 * The header of the server frame at p, of which n bytes are there: its
 * opcode, header and payload lengths.  0 while the header is incomplete.
 */
static inline int
ngx_bench_ws_header(const unsigned char *p, size_t n, int *op, size_t *hlen,
    uint64_t *len)
{
    int  i;

    if (n < 2) {
        return 0;
    }

    *op = p[0] & 0x0f;
    *len = p[1] & 0x7f;
    *hlen = (*len == 126) ? 4 : (*len == 127) ? 10 : 2;

    if (n < *hlen) {
        return 0;
    }

    if (*len == 126) {
        *len = (p[2] << 8) | p[3];

    } else if (*len == 127) {
        for (*len = 0, i = 0; i < 8; i++) {
            *len = (*len << 8) | p[2 + i];
        }
    }

    return 1;
}


/*
 * A masked client text frame of text into buf (mask 0: the XOR is the
 * identity); its length, or 0 when buf is too small.
 */
static inline size_t
ngx_bench_ws_text(unsigned char *buf, size_t size, const char *text)
{
    size_t  len, hlen;

    len = strlen(text);
    hlen = (len < 126) ? 6 : 8;

    if (len > 65535 || hlen + len > size) {
        return 0;
    }

    buf[0] = 0x81;

    if (len < 126) {
        buf[1] = 0x80 | len;

    } else {
        buf[1] = 0x80 | 126;
        buf[2] = len >> 8;
        buf[3] = len & 0xff;
    }

    memset(buf + hlen - 4, 0, 4);
    memcpy(buf + hlen, text, len);

    return hlen + len;
}


/* a TCP connection to 127.0.0.1:port with TCP_NODELAY, or -1 (errno) */
static inline int
ngx_bench_connect(int port)
{
    int                 fd, one;
    struct sockaddr_in  sa;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd == -1) {
        return -1;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == -1) {
        close(fd);
        return -1;
    }

    one = 1;
    (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    return fd;
}


/* writes all of it (a non-blocking socket waits a moment); exits on error */
static inline void
ngx_bench_send_all(int fd, const void *p, size_t len)
{
    ssize_t  n;

    while (len) {
        n = write(fd, p, len);

        if (n == -1 && errno == EAGAIN) {
            usleep(1000);
            continue;
        }

        if (n <= 0) {
            perror("write");
            exit(2);
        }

        p = (const char *) p + n;
        len -= n;
    }
}


/* one client text frame; exits if it does not fit */
static inline void
ngx_bench_send_text(int fd, const char *text)
{
    size_t         n;
    unsigned char  buf[1024];

    n = ngx_bench_ws_text(buf, sizeof(buf), text);

    if (n == 0) {
        fprintf(stderr, "frame too long\n");
        exit(2);
    }

    ngx_bench_send_all(fd, buf, n);
}


#endif /* _NGX_BENCH_H_INCLUDED_ */

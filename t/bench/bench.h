
/*
 * What the benchmark programs share.
 */

#ifndef _NGX_BENCH_H_INCLUDED_
#define _NGX_BENCH_H_INCLUDED_


#include <stdint.h>
#include <string.h>
#include <time.h>


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


#endif /* _NGX_BENCH_H_INCLUDED_ */


/*
 * ngx_pty_module fuzz harnesses: shared helpers.
 *
 * An input is a few control bytes and then the data.  fuzz_cuts_init()
 * takes the control bytes that say where the data is cut into pieces: the
 * first byte gives their number (0..15), each following byte the length of
 * one piece (1..256), reused in turn until the data ends.
 */

#ifndef _NGX_PTY_FUZZ_H_INCLUDED_
#define _NGX_PTY_FUZZ_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>


typedef struct {
    const uint8_t   *lens;
    size_t           n;
    size_t           next;
} fuzz_cuts_t;


#define fuzz_assert(cond)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: invariant failed: %s\n",                  \
                    __FILE__, __LINE__, #cond);                               \
            abort();                                                          \
        }                                                                     \
    } while (0)


/* consumes the cut bytes from *data; the rest is the stream */
static inline void
fuzz_cuts_init(fuzz_cuts_t *c, const uint8_t **data, size_t *size)
{
    size_t  n;

    c->n = 0;
    c->next = 0;
    c->lens = NULL;

    if (*size == 0) {
        return;
    }

    n = (*data)[0] & 0x0f;
    (*data)++;
    (*size)--;

    if (n > *size) {
        n = *size;
    }

    c->lens = *data;
    c->n = n;
    *data += n;
    *size -= n;
}


/* the next piece's length, at most left; with no cuts, all of it */
static inline size_t
fuzz_cuts_next(fuzz_cuts_t *c, size_t left)
{
    size_t  len;

    if (c->n == 0) {
        return left;
    }

    len = (size_t) c->lens[c->next++ % c->n] + 1;

    return len < left ? len : left;
}


/* strict UTF-8, as RFC 3629 */
static inline int
fuzz_utf8_valid(const unsigned char *p, size_t len)
{
    size_t    i, n;
    uint32_t  c, min;

    for (i = 0; i < len; ) {
        c = p[i++];

        if (c < 0x80) {
            continue;
        }

        if (c >= 0xc2 && c <= 0xdf) {
            n = 1; c &= 0x1f; min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2; c &= 0x0f; min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3; c &= 0x07; min = 0x10000;
        } else {
            return 0;
        }

        if (len - i < n) {
            return 0;
        }

        while (n--) {
            if ((p[i] & 0xc0) != 0x80) {
                return 0;
            }
            c = (c << 6) | (p[i++] & 0x3f);
        }

        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
            return 0;
        }
    }

    return 1;
}


#endif /* _NGX_PTY_FUZZ_H_INCLUDED_ */

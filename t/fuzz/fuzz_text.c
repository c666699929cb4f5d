
/*
 * libFuzzer harness: the settled-text renderer (src/ngx_pty_text.c).
 *
 * The stream goes to one converter whole and to another in pieces
 * (fuzz.h), the second peeked between pieces.  Invariants: the settled
 * text is the same both ways, it is valid UTF-8, peek() returns exactly
 * what take() then returns, and the stable part of a peek is a prefix of
 * every later peek until the next take() (unless text was dropped).  A third converter, with a small
 * pending cap, is taken from between pieces and must stay within its cap.
 */

#include <string.h>

#include "fuzz.h"
#include "ngx_pty_text.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static u_char *
fuzz_copy(const ngx_pty_text_view_t *v, size_t *len)
{
    u_char  *p;

    p = malloc(v->len ? v->len : 1);
    fuzz_assert(p != NULL);
    memcpy(p, v->data, v->len);
    *len = v->len;

    return p;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    u_char               *stable, *seen;
    size_t                stable_len, seen_len, left, n;
    fuzz_cuts_t           cuts;
    ngx_pty_text_t       *whole, *pieces, *capped;
    ngx_pty_text_view_t   v, w;

    fuzz_cuts_init(&cuts, &data, &size);

    whole = ngx_pty_text_create(0);
    pieces = ngx_pty_text_create(0);
    capped = ngx_pty_text_create(NGX_PTY_TEXT_MIN_PENDING);
    fuzz_assert(whole && pieces && capped);

    fuzz_assert(ngx_pty_text_feed(whole, data, size) == 0);

    stable = NULL;
    stable_len = 0;

    for (left = size; left; left -= n, data += n) {
        n = fuzz_cuts_next(&cuts, left);

        fuzz_assert(ngx_pty_text_feed(pieces, data, n) == 0);
        fuzz_assert(ngx_pty_text_feed(capped, data, n) == 0);

        fuzz_assert(ngx_pty_text_peek(pieces, &v) == 0);
        fuzz_assert(v.stable <= v.len);
        fuzz_assert(fuzz_utf8_valid(v.data, v.len));

        if (stable && v.dropped == 0) {
            fuzz_assert(v.len >= stable_len);
            fuzz_assert(memcmp(v.data, stable, stable_len) == 0);
        }

        free(stable);

        stable = fuzz_copy(&v, &stable_len);
        stable_len = v.stable;

        fuzz_assert(ngx_pty_text_take(capped, &w) == 0);
        fuzz_assert(fuzz_utf8_valid(w.data, w.len));
        /* the cap is on completed lines; the current line comes on top */
        fuzz_assert(w.stable <= NGX_PTY_TEXT_MIN_PENDING);
    }

    free(stable);

    /* peek then take: the same text */
    fuzz_assert(ngx_pty_text_peek(pieces, &v) == 0);
    seen = fuzz_copy(&v, &seen_len);
    fuzz_assert(ngx_pty_text_take(pieces, &v) == 0);
    fuzz_assert(v.len == seen_len && memcmp(v.data, seen, seen_len) == 0);

    fuzz_assert(ngx_pty_text_take(whole, &w) == 0);
    fuzz_assert(fuzz_utf8_valid(w.data, w.len));

    if (v.dropped == 0 && w.dropped == 0) {
        fuzz_assert(w.len == v.len && memcmp(w.data, v.data, v.len) == 0);
    }

    /* nothing left after a take */
    fuzz_assert(ngx_pty_text_take(pieces, &v) == 0);
    fuzz_assert(v.len == 0);

    free(seen);
    ngx_pty_text_destroy(whole);
    ngx_pty_text_destroy(pieces);
    ngx_pty_text_destroy(capped);

    return 0;
}

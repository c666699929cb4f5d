
/*
 * libFuzzer harness: secret redaction (src/ngx_pty_redact.c, included for
 * its static functions), with the built-in patterns and an operator's
 * literal secret.
 *
 * Input: the cuts (fuzz.h) that split the stream into reads, a byte of
 * flags (bit 0: the reads are "full", bit 1: a flush after each read, as
 * the wait timer would), then the stream, which goes through one
 * redactor whole and through another in those reads.  Invariants, both
 * ways: what comes out is exactly as long as what went in (no byte lost,
 * none twice: every byte is let go by the last flush at the latest, none
 * is held after a flush), and each byte out is the one that went in or
 * part of the mask ('*' or the marker's).  The spans each output gives
 * for the ledger (pty_redact's list, pty:reveal) lie within it, cover
 * masked bytes only, and hold the bytes that went in there; laid over an
 * output that none were dropped from (fewer than the cap, and no more
 * than the ledger holds), they give back exactly what went in.
 */

#include "fuzz_env.h"
#include "ngx_pty_redact.c"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static ngx_pty_redact_conf_t  fuzz_conf;


static void
fuzz_redact_init(void)
{
    int          err;
    u_char      *p, *pattern;
    size_t       len;
    PCRE2_SIZE   off;
    ngx_uint_t   i;

    if (fuzz_conf.regex) {
        return;
    }

    fuzz_env_init();

    len = sizeof("(?:hunter2-literal)");

    for (i = 0; ngx_pty_redact_builtins[i]; i++) {
        len += ngx_strlen(ngx_pty_redact_builtins[i]) + sizeof("|(?:)");
    }

    pattern = malloc(len);
    fuzz_assert(pattern != NULL);

    p = ngx_cpymem(pattern, "(?:hunter2-literal)",
                   sizeof("(?:hunter2-literal)") - 1);

    for (i = 0; ngx_pty_redact_builtins[i]; i++) {
        p = ngx_sprintf(p, "|(?:%s)", ngx_pty_redact_builtins[i]);
    }

    fuzz_conf.regex = pcre2_compile(pattern, p - pattern, 0, &err, &off,
                                    NULL);
    fuzz_assert(fuzz_conf.regex != NULL);
    (void) pcre2_jit_compile(fuzz_conf.regex,
                             PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    free(pattern);
}


static ngx_uint_t
fuzz_masks(u_char c)
{
    return c == '*' || ngx_strchr(NGX_PTY_REDACT_MARK, c) != NULL;
}


/* an output of len bytes that began at the stream's byte "at" */
static void
fuzz_spans(ngx_pty_redact_t *r, const uint8_t *stream, size_t at,
    u_char *out, size_t len)
{
    u_char                 *back;
    size_t                  k;
    ngx_uint_t              i, n;
    ngx_pty_redact_span_t  *sp;

    n = ngx_pty_redact_spans(r, &sp);

    back = malloc(len + 1);
    fuzz_assert(back != NULL);
    memcpy(back, out, len);

    for (i = 0; i < n; i++) {
        fuzz_assert(sp[i].len > 0 && sp[i].pos + sp[i].len <= len);
        fuzz_assert(memcmp(sp[i].raw, stream + at + sp[i].pos, sp[i].len)
                    == 0);

        for (k = sp[i].pos; k < sp[i].pos + sp[i].len; k++) {
            fuzz_assert(fuzz_masks(out[k]));
        }
        memcpy(back + sp[i].pos, sp[i].raw, sp[i].len);
    }

    for (i = 0; i < len; i++) {
        /* a span not given stays masked */
        fuzz_assert(back[i] == stream[at + i] || fuzz_masks(back[i]));
    }

    if (n < NGX_PTY_REDACT_SPANS && len <= NGX_PTY_REVEAL_SIZE) {
        fuzz_assert(memcmp(back, stream + at, len) == 0);
    }

    free(back);
}


/* the stream through a redactor in reads of the cuts' lengths */
static u_char *
fuzz_run(const uint8_t *data, size_t size, fuzz_cuts_t *cuts,
    ngx_uint_t flags)
{
    u_char            *res, *out;
    size_t             left, n, len, got;
    const uint8_t     *stream;
    ngx_pty_redact_t  *r;

    stream = data;

    r = ngx_pty_redact_create(&fuzz_conf, ngx_cycle->log);
    fuzz_assert(r != NULL);

    res = malloc(size + 1);
    fuzz_assert(res != NULL);

    got = 0;

    for (left = size; left; left -= n, data += n) {
        n = fuzz_cuts_next(cuts, left);
        n = ngx_min(n, (size_t) NGX_PTY_REDACT_READ);

        len = ngx_pty_redact_feed(r, (u_char *) data, n, flags & 1, &out);
        fuzz_assert(got + len <= size);
        fuzz_spans(r, stream, got, out, len);
        memcpy(res + got, out, len);
        got += len;

        if (flags & 2) {
            len = ngx_pty_redact_flush(r, &out);
            fuzz_assert(got + len <= size);
            fuzz_spans(r, stream, got, out, len);
            memcpy(res + got, out, len);
            got += len;
            fuzz_assert(ngx_pty_redact_held(r) == 0);
        }
    }

    len = ngx_pty_redact_flush(r, &out);
    fuzz_assert(got + len == size);
    fuzz_spans(r, stream, got, out, len);
    memcpy(res + got, out, len);
    fuzz_assert(ngx_pty_redact_held(r) == 0);

    ngx_pty_redact_destroy(r);

    return res;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    u_char       *whole, *pieces;
    size_t        i;
    ngx_uint_t    flags;
    fuzz_cuts_t   cuts, none;

    fuzz_redact_init();

    fuzz_cuts_init(&cuts, &data, &size);

    if (size == 0) {
        return 0;
    }

    flags = data[0];
    data++;
    size--;

    none.n = 0;
    none.next = 0;

    whole = fuzz_run(data, size, &none, 0);
    pieces = fuzz_run(data, size, &cuts, flags);

    for (i = 0; i < size; i++) {
        fuzz_assert(whole[i] == data[i] || fuzz_masks(whole[i]));
        fuzz_assert(pieces[i] == data[i] || fuzz_masks(pieces[i]));
    }

    free(whole);
    free(pieces);

    return 0;
}


/*
 * Unit tests for ngx_pty_escape.c; prints TAP, exits non-zero on failure.
 *
 *   cc -O2 -Wall -Wextra -Werror -Isrc -o escape_test \
 *       t/unit/escape_test.c src/ngx_pty_escape.c
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ngx_pty_escape.h"


typedef struct {
    const char  *desc;
    const char  *in;
    size_t       in_len;
    const char  *out;
    size_t       out_len;
} ngx_pty_escape_case_t;


#define T(d, i, o)  { d, i, sizeof(i) - 1, o, sizeof(o) - 1 }


static ngx_pty_escape_case_t  cases[] = {
    T("plain text unchanged", "hello world", "hello world"),
    T("empty input", "", ""),
    T("\\r", "a\\rb", "a\rb"),
    T("\\n", "a\\nb", "a\nb"),
    T("\\t", "a\\tb", "a\tb"),
    T("\\e is ESC", "\\e[A", "\x1b[A"),
    T("\\\\ is one backslash", "a\\\\b", "a\\b"),
    T("\\\\x03 is backslash then x03", "\\\\x03", "\\x03"),
    T("\\x03 is Ctrl-C", "\\x03", "\x03"),
    T("real 0x03 byte passes as 0x03", "\x03", "\x03"),
    T("\\x1b lowercase hex", "\\x1b", "\x1b"),
    T("\\x1B uppercase hex", "\\x1B", "\x1b"),
    T("\\xfF mixed case", "\\xfF", "\xff"),
    T("\\x00 gives NUL", "a\\x00b", "a\0b"),
    T("\\x takes exactly 2 digits", "\\x414", "A4"),
    T("short hex at end \\x4", "\\x4", "\\x4"),
    T("short hex \\x4 then text", "\\x4g", "\\x4g"),
    T("invalid hex \\xZZ", "\\xZZ", "\\xZZ"),
    T("\\x alone at end", "\\x", "\\x"),
    T("\\x then escape after bad hex", "\\xZ\\n", "\\xZ\n"),
    T("\\u0041 ascii", "\\u0041", "A"),
    T("\\u00e9 2-byte UTF-8", "\\u00e9", "\xc3\xa9"),
    T("\\u00E9 uppercase hex", "\\u00E9", "\xc3\xa9"),
    T("\\u4e2d 3-byte UTF-8", "\\u4e2d", "\xe4\xb8\xad"),
    T("\\uFFFF max BMP", "\\uFFFF", "\xef\xbf\xbf"),
    T("\\u0000 gives NUL", "\\u0000", "\0"),
    T("\\u takes exactly 4 digits", "\\u00411", "A1"),
    T("\\u with 3 digits unchanged", "\\u123", "\\u123"),
    T("\\u with bad digit unchanged", "\\u12G4x", "\\u12G4x"),
    T("\\u alone", "\\u", "\\u"),
    T("surrogate pair to U+1F600", "\\uD83D\\uDE00", "\xf0\x9f\x98\x80"),
    T("surrogate pair lowercase", "\\ud83d\\ude00!", "\xf0\x9f\x98\x80!"),
    T("lone high surrogate at end", "\\uD83D", "\xef\xbf\xbd"),
    T("lone high surrogate then text", "\\uD83Dab", "\xef\xbf\xbd" "ab"),
    T("high surrogate then non-surrogate \\u",
      "\\uD83D\\u0041", "\xef\xbf\xbd" "A"),
    T("high surrogate then high surrogate pair",
      "\\uD83D\\uD83D\\uDE00", "\xef\xbf\xbd\xf0\x9f\x98\x80"),
    T("high surrogate then short \\u", "\\uD83D\\uDE0", "\xef\xbf\xbd\\uDE0"),
    T("lone low surrogate", "\\uDE00x", "\xef\xbf\xbdx"),
    T("unknown escape \\a kept", "\\a", "\\a"),
    T("unknown escape \\0 kept", "\\0", "\\0"),
    T("unknown escape \\q kept", "x\\qy", "x\\qy"),
    T("unknown escape \\\" kept", "\\\"", "\\\""),
    T("trailing lone backslash kept", "abc\\", "abc\\"),
    T("only a backslash", "\\", "\\"),
    T("backslash before real newline kept", "\\\n", "\\\n"),
    T("double backslash then n", "\\\\n", "\\n"),
    T("triple backslash n", "\\\\\\n", "\\\n"),
    T("mixed line", "ls -l\\r", "ls -l\r"),
    T("arrow key", "\\e[A\\e[B", "\x1b[A\x1b[B"),
    T("UTF-8 input bytes pass", "caf\xc3\xa9\\n", "caf\xc3\xa9\n"),
    T("high bytes pass", "\x80\xff\\x80", "\x80\xff\x80"),
};


static int  failed;
static int  test_no;


static void
dump(const char *label, const u_char *p, size_t n)
{
    size_t  i;

    printf("# %s: \"", label);

    for (i = 0; i < n; i++) {
        if (p[i] == '\\' || p[i] == '"') {
            printf("\\%c", p[i]);

        } else if (p[i] >= 0x20 && p[i] < 0x7f) {
            putchar(p[i]);

        } else {
            printf("\\x%02x", p[i]);
        }
    }

    printf("\" (%zu bytes)\n", n);
}


static void
check(const char *desc, const u_char *got, size_t got_len,
    const u_char *exp, size_t exp_len)
{
    test_no++;

    if (got_len == exp_len && memcmp(got, exp, got_len) == 0) {
        printf("ok %d - %s\n", test_no, desc);
        return;
    }

    failed++;
    printf("not ok %d - %s\n", test_no, desc);
    dump("got", got, got_len);
    dump("expected", exp, exp_len);
}


static void
ok(int cond, const char *desc)
{
    test_no++;

    if (cond) {
        printf("ok %d - %s\n", test_no, desc);
        return;
    }

    failed++;
    printf("not ok %d - %s\n", test_no, desc);
}


int
main(void)
{
    size_t                  i, n, len, total;
    u_char                 *out, *buf;
    char                    desc[256];
    ngx_pty_escape_case_t  *c;

    n = sizeof(cases) / sizeof(cases[0]);
    total = n * 3 + 4;

    printf("1..%zu\n", total);

    for (i = 0; i < n; i++) {
        c = &cases[i];

        /* exact-size heap buffer so valgrind catches any overrun */
        out = malloc(c->in_len ? c->in_len : 1);
        if (out == NULL) {
            return 2;
        }

        len = ngx_pty_escape_decode(out, (const u_char *) c->in, c->in_len);

        check(c->desc, out, len, (const u_char *) c->out, c->out_len);

        snprintf(desc, sizeof(desc), "%s: output not longer than input",
                 c->desc);
        ok(len <= c->in_len, desc);

        /* in-place decoding gives the same result */
        memcpy(out, c->in, c->in_len);
        len = ngx_pty_escape_decode(out, out, c->in_len);

        snprintf(desc, sizeof(desc), "%s: in place", c->desc);
        check(desc, out, len, (const u_char *) c->out, c->out_len);

        free(out);
    }

    /* every \uHHHH in the BMP (non-surrogate) round-trips, never grows */
    {
        char      in[8];
        u_char    o[8];
        unsigned  cp, bad;

        bad = 0;

        for (cp = 0; cp <= 0xffff; cp++) {
            if (cp >= 0xd800 && cp <= 0xdfff) {
                continue;
            }

            snprintf(in, sizeof(in), "\\u%04X", cp);
            len = ngx_pty_escape_decode(o, (u_char *) in, 6);

            if (len > 3 || len != (cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3)) {
                bad++;
            }
        }

        ok(bad == 0, "all BMP \\uHHHH decode to 1-3 bytes");
    }

    /* every surrogate pair gives 4 bytes, every \xHH one byte */
    {
        char      in[16];
        u_char    o[16];
        unsigned  hi, lo, cp, bad;

        bad = 0;

        for (hi = 0xd800; hi <= 0xdbff; hi += 0x3f) {
            for (lo = 0xdc00; lo <= 0xdfff; lo += 0x1f) {
                snprintf(in, sizeof(in), "\\u%04x\\u%04X", hi, lo);
                len = ngx_pty_escape_decode(o, (u_char *) in, 12);
                cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);

                if (len != 4
                    || o[0] != (0xf0 | (cp >> 18))
                    || o[3] != (0x80 | (cp & 0x3f)))
                {
                    bad++;
                }
            }
        }

        ok(bad == 0, "surrogate pairs decode to 4 bytes");

        bad = 0;

        for (hi = 0; hi < 256; hi++) {
            snprintf(in, sizeof(in), "\\x%02x", hi);
            len = ngx_pty_escape_decode(o, (u_char *) in, 4);

            if (len != 1 || o[0] != hi) {
                bad++;
            }
        }

        ok(bad == 0, "all \\xHH decode to their byte");
    }

    /* a large random input never grows (and valgrind sees no overrun) */
    buf = malloc(1 << 16);
    out = malloc(1 << 16);
    if (buf == NULL || out == NULL) {
        return 2;
    }

    srand(1);

    for (i = 0; i < (1 << 16); i++) {
        buf[i] = "\\xuUdD0123456789abcdefABCDEFrnte"[rand() % 32];
    }

    len = ngx_pty_escape_decode(out, buf, 1 << 16);

    ok(len <= (1 << 16), "random escape soup never grows");

    free(buf);
    free(out);

    return failed ? 1 : 0;
}


/*
 * libFuzzer harness: the screen model and its snapshot writer
 * (src/ngx_pty_screen.c).
 *
 * Input: cols, rows, a resize byte, two more when the rows byte's top bit
 * is set, the cuts (fuzz.h), then the stream.  Model A takes the stream in
 * pieces (resized halfway when asked, and again at three quarters to the
 * size the two bytes give: a reflow of what a reflow left); its
 * snapshot goes to a fresh model B.  Invariants: the snapshot is 7-bit
 * escapes and UTF-8; A and B show the same text; the screens their
 * snapshots rebuild in libvterm's reference terminal are equal cell for
 * cell (t/tools/vtref.c); and they stay equal after the same bytes are fed
 * to both, which checks the state a snapshot carries (pending wrap, modes,
 * scroll region, saved cursor, pen).
 */

#include <string.h>

#include "fuzz.h"
#include "vtref.h"
#include "ngx_pty_screen.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


/*
 * Bytes after the snapshot, fed to both.  A snapshot carries the character
 * sets (SCS, SI/SO), so nothing sets them back.  It ends with a sequence
 * cut in the middle, but the model's scan and libvterm's parser differ on
 * controls inside strings: CAN ends a sequence first.  A UTF-8 character
 * broken by a control (libvterm's decoder goes on after it) is not
 * carried: a space ends it (U+FFFD in A, nothing in B), a clear and a
 * home wipe what they printed.  Then text and the scroll region's bottom
 * (not the saved cursor: the model misses a DECSC with controls in it).
 */
static const u_char  fuzz_more[] =
    "\x18 \x1b[2J\x1b[HZz\r\nQ\x1b[1;1HW\n\n\nEnd\x1b[99BS";


/* escapes, UTF-8, LF and SO (docs/SNAPSHOT.md); a character cut last */
static int
fuzz_clean(const u_char *p, size_t n)
{
    size_t  i, k;

    for (i = 0; i < n; i++) {
        if (p[i] < 0x20 && p[i] != 0x1b && p[i] != 0x07 && p[i] != 0x0a
            && p[i] != 0x0e)
        {
            return 0;
        }

        if (p[i] == 0x7f) {
            return 0;
        }
    }

    /* the UTF-8 character the input stopped in */
    for (k = 0; k < 3 && k < n && (p[n - 1 - k] & 0xc0) == 0x80; k++) {
        /* void */
    }

    if (k < n && p[n - 1 - k] >= 0xc0
        && (unsigned) (p[n - 1 - k] >= 0xf0 ? 3 : p[n - 1 - k] >= 0xe0 ? 2 : 1)
           > k)
    {
        n -= k + 1;
    }

    return fuzz_utf8_valid(p, n);
}


/* the screens the two snapshots rebuild, then after more bytes */
static void
fuzz_same(ngx_pty_screen_t *a, ngx_pty_screen_t *b, unsigned cols,
    unsigned rows)
{
    u_char   *sa, *sb, *ta, *tb;
    size_t    la, lb, tla, tlb;
    vtref_t  *ra, *rb;

    sa = ngx_pty_screen_snapshot(a, &la);
    sb = ngx_pty_screen_snapshot(b, &lb);
    ta = ngx_pty_screen_text(a, &tla);
    tb = ngx_pty_screen_text(b, &tlb);
    fuzz_assert(sa && sb && ta && tb);

    fuzz_assert(fuzz_clean(sa, la));
    fuzz_assert(fuzz_clean(sb, lb));
    fuzz_assert(tla == tlb && memcmp(ta, tb, tla) == 0);

    ra = vtref_new(cols, rows);
    rb = vtref_new(cols, rows);
    fuzz_assert(ra && rb);

    vtref_feed(ra, sa, la);
    vtref_feed(rb, sb, lb);

    if (vtref_compare(ra, rb, stderr, 8, 0) != 0) {
        fprintf(stderr, "snapshot A (%zu bytes) and B (%zu bytes) differ\n",
                la, lb);
        abort();
    }

    vtref_free(ra);
    vtref_free(rb);
    free(sa);
    free(sb);
    free(ta);
    free(tb);
}


/* the snapshots of a and c, byte for byte */
static void
fuzz_same_bytes(ngx_pty_screen_t *a, ngx_pty_screen_t *c)
{
    u_char  *sa, *sc;
    size_t   la, lc;

    sa = ngx_pty_screen_snapshot(a, &la);
    sc = ngx_pty_screen_snapshot(c, &lc);
    fuzz_assert(sa && sc);

    if (la != lc || memcmp(sa, sc, la) != 0) {
        fprintf(stderr, "with and without the wide-glyph path: snapshots "
                "of %zu and %zu bytes differ\n", la, lc);
        abort();
    }

    free(sa);
    free(sc);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    u_char            *snap;
    size_t             slen, left, n, half;
    unsigned           cols, rows, rcols, rrows, resize, again, acols,
                       arows;
    fuzz_cuts_t        cuts;
    ngx_pty_screen_t  *a, *b, *c;

    if (size < 3) {
        return 0;
    }

    /* a wide glyph on a screen one column wide is not rebuilt (known) */
    cols = data[0] % 131 + 2;
    rows = data[1] % 60 + 1;
    resize = data[2];
    again = (resize & 0x80) && (data[1] & 0x80) && size >= 5;
    acols = again ? data[3] % 131 + 2 : 0;
    arows = again ? data[4] % 60 + 1 : 0;
    data += again ? 5 : 3;
    size -= again ? 5 : 3;

    fuzz_cuts_init(&cuts, &data, &size);

    a = ngx_pty_screen_create(cols, rows);
    c = ngx_pty_screen_create(cols, rows);
    fuzz_assert(a != NULL && c != NULL);
    ngx_pty_screen_set_fast_wide(c, 0);

    half = size / 2;

    for (left = size; left; left -= n, data += n) {
        n = fuzz_cuts_next(&cuts, left);

        if ((resize & 0x80) && size - left <= half && size - left + n > half) {
            rcols = (resize & 0x7f) % 99 + 2;
            rrows = (resize >> 3) % 40 + 1;
            fuzz_assert(ngx_pty_screen_resize(a, rcols, rrows) == 0);
            fuzz_assert(ngx_pty_screen_resize(c, rcols, rrows) == 0);
        }

        if (again && size - left <= half + half / 2
            && size - left + n > half + half / 2)
        {
            fuzz_assert(ngx_pty_screen_resize(a, acols, arows) == 0);
            fuzz_assert(ngx_pty_screen_resize(c, acols, arows) == 0);
        }

        ngx_pty_screen_feed(a, data, n);
        ngx_pty_screen_feed(c, data, n);
    }

    fuzz_same_bytes(a, c);
    ngx_pty_screen_destroy(c);

    (void) ngx_pty_screen_memory(a);
    ngx_pty_screen_size(a, &cols, &rows);

    snap = ngx_pty_screen_snapshot(a, &slen);
    fuzz_assert(snap != NULL);

    b = ngx_pty_screen_create(cols, rows);
    fuzz_assert(b != NULL);
    ngx_pty_screen_feed(b, snap, slen);
    free(snap);

    fuzz_same(a, b, cols, rows);

    ngx_pty_screen_feed(a, fuzz_more, sizeof(fuzz_more) - 1);
    ngx_pty_screen_feed(b, fuzz_more, sizeof(fuzz_more) - 1);

    fuzz_same(a, b, cols, rows);

    ngx_pty_screen_destroy(a);
    ngx_pty_screen_destroy(b);

    return 0;
}

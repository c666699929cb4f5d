
/*
 * vtcompare: proves a vt100-screen-state-v1 snapshot against a reference.
 *
 *   vtcompare COLS ROWS STREAM_FILE SNAPSHOT_FILE
 *       feeds STREAM_FILE to libvterm's VTermScreen (the reference), feeds
 *       SNAPSHOT_FILE to a freshly reset VTermScreen of the same size and
 *       compares them; exit 0 when identical, 1 with a diff on stdout.
 *
 *   vtcompare --snapshot [--seed N] COLS ROWS STREAM_FILE OUT_FILE
 *       runs ngx_pty_screen over STREAM_FILE in randomly sized chunks (to
 *       split UTF-8 and escape sequences) and writes its snapshot.
 *
 * Options (first mode): --strict-modes also compares DEC modes 1, 1000-
 * 1006, 1015 and 2004 (see vtref.h); --max-diffs N (default 20);
 * --then FILE feeds FILE to both terminals before comparing, which checks
 * the state the snapshot leaves (pending wrap, modes, saved cursor...).
 * The reference is libvterm with xterm.js's erase, DECRC, SD, resize and
 * IL/DL rules (vtref_xterm_erase()).  Exit 2 on usage or I/O errors.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vtref.h"
#include "ngx_pty_screen.h"


static unsigned char *
read_file(const char *name, size_t *len)
{
    FILE           *f;
    size_t          n, cap;
    unsigned char  *buf, *p;

    f = fopen(name, "rb");
    if (f == NULL) {
        perror(name);
        return NULL;
    }

    cap = 65536;
    *len = 0;
    buf = malloc(cap);

    while (buf) {
        n = fread(buf + *len, 1, cap - *len, f);
        *len += n;

        if (n == 0) {
            break;
        }

        if (*len == cap) {
            cap *= 2;
            p = realloc(buf, cap);

            if (p == NULL) {
                free(buf);
            }

            buf = p;
        }
    }

    if (buf == NULL || ferror(f)) {
        fprintf(stderr, "%s: read error\n", name);
        free(buf);
        buf = NULL;
    }

    fclose(f);

    return buf;
}


static int
usage(void)
{
    fprintf(stderr,
            "usage: vtcompare [--strict-modes] [--max-diffs N] [--then FILE] "
            "COLS ROWS STREAM_FILE SNAPSHOT_FILE\n"
            "       vtcompare --snapshot [--seed N] "
            "COLS ROWS STREAM_FILE OUT_FILE\n");
    return 2;
}


static int
make_snapshot(int cols, int rows, const char *in, const char *outname,
    unsigned seed)
{
    FILE              *f;
    size_t             len, off, n, slen;
    u_char            *snap;
    unsigned char     *data;
    ngx_pty_screen_t  *s;

    data = read_file(in, &len);
    if (data == NULL) {
        return 2;
    }

    s = ngx_pty_screen_create(cols, rows);
    if (s == NULL) {
        fprintf(stderr, "ngx_pty_screen_create(%d, %d) failed\n", cols, rows);
        free(data);
        return 2;
    }

    srand(seed);

    for (off = 0; off < len; off += n) {
        /* mostly small pieces, now and then a big one */
        n = (rand() % 4 == 0) ? (size_t) (rand() % 4096) + 1
                              : (size_t) (rand() % 16) + 1;
        n = n < len - off ? n : len - off;
        ngx_pty_screen_feed(s, data + off, n);
    }

    snap = ngx_pty_screen_snapshot(s, &slen);
    ngx_pty_screen_destroy(s);
    free(data);

    if (snap == NULL) {
        fprintf(stderr, "ngx_pty_screen_snapshot() failed\n");
        return 2;
    }

    f = fopen(outname, "wb");

    if (f == NULL || fwrite(snap, 1, slen, f) != slen || fclose(f) != 0) {
        perror(outname);
        free(snap);
        return 2;
    }

    free(snap);

    return 0;
}


int
main(int argc, char **argv)
{
    int             i, cols, rows, diffs, strict, max_diffs, snapshot;
    size_t          slen, plen, tlen;
    const char     *then;
    unsigned        seed;
    vtref_t        *want, *got;
    unsigned char  *stream, *snap;

    strict = 0;
    max_diffs = 20;
    snapshot = 0;
    seed = 1;
    then = NULL;

    for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--strict-modes") == 0) {
            strict = 1;
        } else if (strcmp(argv[i], "--snapshot") == 0) {
            snapshot = 1;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = (unsigned) strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--then") == 0 && i + 1 < argc) {
            then = argv[++i];
        } else if (strcmp(argv[i], "--max-diffs") == 0 && i + 1 < argc) {
            max_diffs = atoi(argv[++i]);
        } else {
            return usage();
        }
    }

    if (argc - i != 4) {
        return usage();
    }

    cols = atoi(argv[i]);
    rows = atoi(argv[i + 1]);

    if (cols < 1 || rows < 1 || cols > NGX_PTY_SCREEN_MAX_COLS
        || rows > NGX_PTY_SCREEN_MAX_ROWS)
    {
        fprintf(stderr, "bad geometry %sx%s\n", argv[i], argv[i + 1]);
        return 2;
    }

    if (snapshot) {
        return make_snapshot(cols, rows, argv[i + 2], argv[i + 3], seed);
    }

    stream = read_file(argv[i + 2], &slen);
    snap = read_file(argv[i + 3], &plen);

    if (stream == NULL || snap == NULL) {
        free(stream);
        free(snap);
        return 2;
    }

    /* the reference read as xterm.js, which the model follows, reads */
    vtref_xterm_erase(1);
    want = vtref_new(cols, rows);
    got = vtref_new(cols, rows);

    if (want == NULL || got == NULL) {
        fprintf(stderr, "vterm_new() failed\n");
        return 2;
    }

    vtref_feed(want, stream, slen);
    vtref_feed(got, snap, plen);

    if (then) {
        free(stream);
        stream = read_file(then, &tlen);

        if (stream == NULL) {
            free(snap);
            return 2;
        }

        vtref_feed(want, stream, tlen);
        vtref_feed(got, stream, tlen);
    }

    diffs = vtref_compare(want, got, stdout, max_diffs, strict);

    if (diffs) {
        printf("%d difference%s (stream %zu bytes, snapshot %zu bytes)\n",
               diffs, diffs == 1 ? "" : "s", slen, plen);
    }

    vtref_free(want);
    vtref_free(got);
    free(stream);
    free(snap);

    return diffs ? 1 : 0;
}

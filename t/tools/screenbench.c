
/*
 * screenbench: throughput of ngx_pty_screen against libvterm's VTermScreen.
 *
 *   screenbench [MIB [STREAM [model]]]   (default 64 MiB per stream for
 *                                 ngx_pty_screen, 1/16 of that for
 *                                 VTermScreen; STREAM 0-5 runs one only,
 *                                 -1 all; "model" skips VTermScreen, for
 *                                 profiling)
 *
 * Streams are fed in 16 KiB pieces, as PTY reads arrive.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vtref.h"
#include "ngx_pty_screen.h"


#define CHUNK  16384


typedef struct {
    unsigned char  *p;
    size_t          len;
    size_t          cap;
} buf_t;


static void
add(buf_t *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);

        if (b->p == NULL) {
            perror("realloc");
            exit(2);
        }
    }

    memcpy(b->p + b->len, data, n);
    b->len += n;
}


static void
addf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>

static void
addf(buf_t *b, const char *fmt, ...)
{
    int      n;
    char     tmp[2048];
    va_list  ap;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    add(b, tmp, (size_t) n);
}


static void
gen_plain(buf_t *b, size_t size)
{
    size_t  i;

    for (i = 0; b->len < size; i++) {
        addf(b, "%08zu the quick brown fox jumps over the lazy dog; "
             "pack my box with five dozen\r\n", i);
    }
}


static void
gen_ls(buf_t *b, size_t size)
{
    size_t  i;

    for (i = 0; b->len < size; i++) {
        addf(b, "drwxr-xr-x  2 root root  4096 Jan  1 12:00 "
             "\x1b[01;34mdir%zu\x1b[0m  \x1b[01;32mbin%zu\x1b[0m  "
             "\x1b[01;36mlink\x1b[0m -> \x1b[38;5;%zumtarget\x1b[0m\r\n",
             i, i, i % 256);
    }
}


static void
gen_cjk(buf_t *b, size_t size)
{
    while (b->len < size) {
        add(b, "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6 "
               "\xf0\x9f\x98\x80\xf0\x9f\x8e\x89 caf\x65\xcc\x81 "
               "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae"
               "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 "
               "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\r\n", 69);
    }
}


static void
gen_tui(buf_t *b, size_t size, int cols, int rows)
{
    int  f, r;

    add(b, "\x1b[?1049h\x1b[?25l", 14);

    for (f = 0; b->len < size; f++) {
        addf(b, "\x1b[1;1H\x1b[44;37m frame %d\x1b[K\x1b[m", f);

        for (r = 2; r < rows; r++) {
            addf(b, "\x1b[%d;1H\x1b[38;5;%dm%6d \x1b[1mroot\x1b[22m %5.1f "
                 "%-*s\x1b[m\x1b[K", r, (r + f) % 256, r * 37 + f,
                 (r * f % 1000) / 10.0, cols > 40 ? cols - 40 : 1,
                 "/usr/bin/some-process --flag");
        }

        addf(b, "\x1b[%d;1H\x1b[7m status \x1b[m\x1b[K", rows);
    }
}


static void
gen_yes(buf_t *b, size_t size, const char *line)
{
    size_t  n;

    n = strlen(line);

    while (b->len < size) {
        add(b, line, n);
    }
}


static double
now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


static double
bench_model(const buf_t *b, int cols, int rows)
{
    size_t             off, n;
    double             t;
    ngx_pty_screen_t  *s;

    s = ngx_pty_screen_create(cols, rows);
    t = now();

    for (off = 0; off < b->len; off += n) {
        n = b->len - off < CHUNK ? b->len - off : CHUNK;
        ngx_pty_screen_feed(s, b->p + off, n);
    }

    t = now() - t;
    ngx_pty_screen_destroy(s);

    return b->len / t / 1e6;
}


static double
bench_vterm(const buf_t *b, size_t size, int cols, int rows)
{
    size_t   off, n;
    double   t;
    vtref_t *r;

    r = vtref_new(cols, rows);
    size = size < b->len ? size : b->len;
    t = now();

    for (off = 0; off < size; off += n) {
        n = size - off < CHUNK ? size - off : CHUNK;
        vtref_feed(r, b->p + off, n);
    }

    t = now() - t;
    vtref_free(r);

    return size / t / 1e6;
}


/*
 * The content at once, but its last 64 KiB in the small reads of an
 * interactive session, which scroll lines one by one into the model's
 * scrollback: a Keyframe carries those too (docs/SNAPSHOT.md)
 */
static void
keyframe_feed(ngx_pty_screen_t *s, buf_t *b)
{
    size_t  off, n, tail;

    tail = b->len > 65536 ? 65536 : b->len;
    ngx_pty_screen_feed(s, b->p, b->len - tail);

    for (off = b->len - tail; off < b->len; off += n) {
        n = b->len - off < 256 ? b->len - off : 256;
        ngx_pty_screen_feed(s, b->p + off, n);
    }
}


/*
 * "keyframe" mode: the cost of one snapshot of a full screen, per content
 * kind and geometry: the median of batches of 200, in microseconds.
 */
static void
bench_keyframes(void)
{
    int                 g, k, i, j;
    size_t              len;
    double              t, batch[15], tmp;
    buf_t               b;
    u_char             *snap;
    ngx_pty_screen_t   *s;
    static const int    geo[][2] = { { 120, 30 }, { 250, 80 } };
    static const char  *names[] = { "plain", "colour", "cjk", "tui" };

    printf("%-8s %8s %10s %10s\n", "content", "geometry", "us", "bytes");

    for (k = 0; k < 4; k++) {
        for (g = 0; g < 2; g++) {
            memset(&b, 0, sizeof(b));

            switch (k) {
            case 0: gen_plain(&b, 1 << 20); break;
            case 1: gen_ls(&b, 1 << 20); break;
            case 2: gen_cjk(&b, 1 << 20); break;
            default: gen_tui(&b, 1 << 20, geo[g][0], geo[g][1]); break;
            }

            s = ngx_pty_screen_create(geo[g][0], geo[g][1]);
            keyframe_feed(s, &b);
            len = 0;

            for (i = 0; i < 15; i++) {
                t = now();

                for (j = 0; j < 200; j++) {
                    snap = ngx_pty_screen_snapshot(s, &len);
                    free(snap);
                }

                batch[i] = (now() - t) / 200 * 1e6;
            }

            for (i = 0; i < 15; i++) {
                for (j = i + 1; j < 15; j++) {
                    if (batch[j] < batch[i]) {
                        tmp = batch[i];
                        batch[i] = batch[j];
                        batch[j] = tmp;
                    }
                }
            }

            printf("%-8s %4dx%-3d %10.1f %10zu\n", names[k], geo[g][0],
                   geo[g][1], batch[7], len);

            ngx_pty_screen_destroy(s);
            free(b.p);
        }
    }
}


int
main(int argc, char **argv)
{
    int          g, k, only, model_only;
    size_t       size;
    buf_t        b;
    static const int     geo[][2] = { { 120, 30 }, { 250, 80 } };
    static const char   *names[] = { "plain 80-char lines", "ls-like colour",
                                     "CJK/emoji", "TUI repaint",
                                     "yes '' (\\r\\n)", "yes (y\\r\\n)" };

    if (argc > 1 && strcmp(argv[1], "keyframe") == 0) {
        bench_keyframes();
        return 0;
    }

    size = (size_t) ((argc > 1 ? atof(argv[1]) : 64) * 1024 * 1024);
    only = argc > 2 ? atoi(argv[2]) : -1;
    model_only = argc > 3 && strcmp(argv[3], "model") == 0;

    printf("%-22s %10s %12s %12s %12s %12s\n", "stream", "MiB",
           "model120x30", "model250x80", "vterm120x30", "vterm250x80");
    printf("%-22s %10s %12s %12s %12s %12s\n", "", "", "MB/s", "MB/s",
           "MB/s", "MB/s");

    for (k = 0; k < 6; k++) {
        double  res[4];

        if (only >= 0 && k != only) {
            continue;
        }

        for (g = 0; g < 2; g++) {
            memset(&b, 0, sizeof(b));

            switch (k) {
            case 0: gen_plain(&b, size); break;
            case 1: gen_ls(&b, size); break;
            case 2: gen_cjk(&b, size); break;
            case 3: gen_tui(&b, size, geo[g][0], geo[g][1]); break;
            case 4: gen_yes(&b, size, "\r\n"); break;
            default: gen_yes(&b, size, "y\r\n"); break;
            }

            res[g] = bench_model(&b, geo[g][0], geo[g][1]);
            res[2 + g] = model_only
                         ? 0 : bench_vterm(&b, size / 16, geo[g][0], geo[g][1]);
            free(b.p);
        }

        printf("%-22s %10.0f %12.1f %12.1f %12.1f %12.1f\n", names[k],
               size / 1048576.0, res[0], res[1], res[2], res[3]);
        fflush(stdout);
    }

    return 0;
}

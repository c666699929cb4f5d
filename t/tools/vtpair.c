
/*
 * vtpair: ngx_pty_screen driven over a pipe, for the xterm.js
 * differential test (t/xterm/difftest.js), which writes the same bytes to
 * terminals of its own and compares them with the snapshots made here.
 *
 * Requests on stdin, binary, integers little-endian:
 *
 *   'N' u16 cols, u16 rows     a new model (the previous one is freed)
 *   'D' u32 len, len bytes     fed to the model
 *   'R' u16 cols, u16 rows     the model resized
 *   'S'                        snapshot: answers u32 len, u16 cols,
 *                              u16 rows, len bytes
 *   'T'                        the screen as text: u32 len, len bytes
 *
 * Exit 0 at the end of the input, 2 on a malformed request or ENOMEM.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "ngx_pty_screen.h"


static int
get(void *buf, size_t n)
{
    return fread(buf, 1, n, stdin) == n ? 0 : -1;
}


static unsigned
u16(const unsigned char *p)
{
    return p[0] | (p[1] << 8);
}


static void
put32(uint32_t v)
{
    unsigned char  b[4];

    b[0] = v & 0xff;
    b[1] = (v >> 8) & 0xff;
    b[2] = (v >> 16) & 0xff;
    b[3] = (v >> 24) & 0xff;
    fwrite(b, 1, 4, stdout);
}


static void
put16(unsigned v)
{
    unsigned char  b[2];

    b[0] = v & 0xff;
    b[1] = (v >> 8) & 0xff;
    fwrite(b, 1, 2, stdout);
}


int
main(void)
{
    int                op;
    size_t             len;
    uint32_t           n;
    unsigned           cols, rows;
    unsigned char      hdr[4], *buf, *out;
    ngx_pty_screen_t  *s;

    s = NULL;
    buf = NULL;

    while ((op = getchar()) != EOF) {
        switch (op) {

        case 'N':
        case 'R':
            if (get(hdr, 4) != 0) {
                return 2;
            }

            if (op == 'N') {
                ngx_pty_screen_destroy(s);
                s = ngx_pty_screen_create(u16(hdr), u16(hdr + 2));

                if (s == NULL) {
                    return 2;
                }

            } else if (s == NULL
                       || ngx_pty_screen_resize(s, u16(hdr), u16(hdr + 2)))
            {
                return 2;
            }

            break;

        case 'D':
            if (get(hdr, 4) != 0 || s == NULL) {
                return 2;
            }

            n = hdr[0] | (hdr[1] << 8) | (hdr[2] << 16)
                | ((uint32_t) hdr[3] << 24);
            buf = realloc(buf, n ? n : 1);

            if (buf == NULL || get(buf, n) != 0) {
                return 2;
            }

            ngx_pty_screen_feed(s, buf, n);
            break;

        case 'S':
        case 'T':
            if (s == NULL) {
                return 2;
            }

            out = (op == 'S') ? ngx_pty_screen_snapshot(s, &len)
                              : ngx_pty_screen_text(s, &len);

            if (out == NULL) {
                return 2;
            }

            put32((uint32_t) len);

            if (op == 'S') {
                ngx_pty_screen_size(s, &cols, &rows);
                put16(cols);
                put16(rows);
            }

            fwrite(out, 1, len, stdout);
            fflush(stdout);
            free(out);
            break;

        default:
            return 2;
        }
    }

    ngx_pty_screen_destroy(s);
    free(buf);

    return 0;
}

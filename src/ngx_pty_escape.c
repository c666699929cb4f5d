
/*
 * ngx_pty_module: input escape decoding, see ngx_pty_escape.h for the rules.
 */


#include "ngx_pty_escape.h"


static int ngx_pty_escape_hex(const u_char *p, size_t n, uint32_t *value);
static size_t ngx_pty_escape_unicode(u_char *out, const u_char *in,
    size_t len, size_t *used);
static size_t ngx_pty_escape_utf8(u_char *out, uint32_t cp);


size_t
ngx_pty_escape_decode(u_char *out, const u_char *in, size_t len)
{
    size_t     i, o, n, used;
    uint32_t   v;

    i = 0;
    o = 0;

    while (i < len) {

        if (in[i] != '\\' || i + 1 == len) {
            /* plain byte, or a trailing lone backslash kept as is */
            out[o++] = in[i++];
            continue;
        }

        switch (in[i + 1]) {

        case 'r':
            out[o++] = '\r';
            i += 2;
            continue;

        case 'n':
            out[o++] = '\n';
            i += 2;
            continue;

        case 't':
            out[o++] = '\t';
            i += 2;
            continue;

        case 'e':
            out[o++] = 0x1b;
            i += 2;
            continue;

        case '\\':
            out[o++] = '\\';
            i += 2;
            continue;

        case 'x':
            if (len - i >= 4 && ngx_pty_escape_hex(in + i + 2, 2, &v) == 0) {
                out[o++] = (u_char) v;
                i += 4;
                continue;
            }
            break;

        case 'u':
            n = ngx_pty_escape_unicode(out + o, in + i, len - i, &used);
            if (used) {
                o += n;
                i += used;
                continue;
            }
            break;
        }

        /* unknown escape or bad hex: keep the backslash, go on after it */
        out[o++] = in[i++];
    }

    return o;
}


/* exactly n hex digits at p, either case */

static int
ngx_pty_escape_hex(const u_char *p, size_t n, uint32_t *value)
{
    size_t    i;
    u_char    c;
    uint32_t  v;

    v = 0;

    for (i = 0; i < n; i++) {
        c = p[i];

        if (c >= '0' && c <= '9') {
            v = v * 16 + (c - '0');

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            v = v * 16 + ((c | 0x20) - 'a' + 10);

        } else {
            return -1;
        }
    }

    *value = v;

    return 0;
}


/*
 * in points at "\u"; sets *used to the input consumed (0: not an escape)
 * and returns the number of bytes written
 */

static size_t
ngx_pty_escape_unicode(u_char *out, const u_char *in, size_t len,
    size_t *used)
{
    uint32_t  hi, lo;

    *used = 0;

    if (len < 6 || ngx_pty_escape_hex(in + 2, 4, &hi) != 0) {
        return 0;
    }

    *used = 6;

    if (hi >= 0xdc00 && hi <= 0xdfff) {
        /* a low surrogate without a high one */
        return ngx_pty_escape_utf8(out, 0xfffd);
    }

    if (hi < 0xd800 || hi > 0xdbff) {
        return ngx_pty_escape_utf8(out, hi);
    }

    if (len < 12 || in[6] != '\\' || in[7] != 'u'
        || ngx_pty_escape_hex(in + 8, 4, &lo) != 0
        || lo < 0xdc00 || lo > 0xdfff)
    {
        /* a lone high surrogate; what follows is decoded on its own */
        return ngx_pty_escape_utf8(out, 0xfffd);
    }

    *used = 12;

    return ngx_pty_escape_utf8(out,
                               0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00));
}


static size_t
ngx_pty_escape_utf8(u_char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (u_char) cp;
        return 1;
    }

    if (cp < 0x800) {
        out[0] = (u_char) (0xc0 | (cp >> 6));
        out[1] = (u_char) (0x80 | (cp & 0x3f));
        return 2;
    }

    if (cp < 0x10000) {
        out[0] = (u_char) (0xe0 | (cp >> 12));
        out[1] = (u_char) (0x80 | ((cp >> 6) & 0x3f));
        out[2] = (u_char) (0x80 | (cp & 0x3f));
        return 3;
    }

    out[0] = (u_char) (0xf0 | (cp >> 18));
    out[1] = (u_char) (0x80 | ((cp >> 12) & 0x3f));
    out[2] = (u_char) (0x80 | ((cp >> 6) & 0x3f));
    out[3] = (u_char) (0x80 | (cp & 0x3f));
    return 4;
}


/*
 * Small helpers every subsystem uses.
 */

#include "ngx_pty.h"
#include "ngx_pty_util.h"

#include <sys/random.h>


static void ngx_pty_uuid7_stamp(u_char *raw, uint64_t ms);


ngx_int_t
ngx_pty_random(void *buf, size_t len)
{
    ssize_t  n;

    /* the pool is initialized long before nginx starts: never blocks */
    n = getrandom(buf, len, GRND_NONBLOCK);

    return (n == (ssize_t) len) ? NGX_OK : NGX_ERROR;
}


/*
 * Frame ids need uniqueness, not secrecy, and one is made per frame under
 * the session lock: a per-process xorshift seeded from the kernel once
 * (again after a fork) instead of a system call each time.
 */
void
ngx_pty_uuid7_fast(u_char *raw, uint64_t ms)
{
    uint64_t          x;
    static uint64_t   state;
    static ngx_pid_t  seeded;

    if (seeded != ngx_pid || state == 0) {
        if (ngx_pty_random(&state, sizeof(state)) != NGX_OK || state == 0) {
            state = ((uint64_t) ngx_pid << 32) ^ ms ^ 0x9e3779b97f4a7c15ULL;
        }

        seeded = ngx_pid;
    }

    x = state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    state = x;

    ngx_memcpy(raw + 6, &x, 8);
    raw[14] = (u_char) (x >> 24) ^ (u_char) ngx_pid;
    raw[15] = (u_char) (x >> 40) ^ (u_char) (ngx_pid >> 8);

    ngx_pty_uuid7_stamp(raw, ms);
}


void
ngx_pty_uuid7(u_char *raw, uint64_t ms)
{
    if (ngx_pty_random(raw + 6, 10) != NGX_OK) {
        /* ids stay unique through time and pid even without the pool */
        uint32_t  r = (uint32_t) ngx_random() ^ (uint32_t) ngx_pid;

        ngx_memcpy(raw + 6, &r, 4);
        r = (uint32_t) ngx_random();
        ngx_memcpy(raw + 10, &r, 4);
        r = (uint32_t) ngx_random();
        ngx_memcpy(raw + 14, &r, 2);
    }

    ngx_pty_uuid7_stamp(raw, ms);
}


/* the time, version and variant bits over 16 random bytes */
static void
ngx_pty_uuid7_stamp(u_char *raw, uint64_t ms)
{
    raw[0] = (u_char) (ms >> 40);
    raw[1] = (u_char) (ms >> 32);
    raw[2] = (u_char) (ms >> 24);
    raw[3] = (u_char) (ms >> 16);
    raw[4] = (u_char) (ms >> 8);
    raw[5] = (u_char) ms;

    raw[6] = (u_char) (0x70 | (raw[6] & 0x0f));
    raw[8] = (u_char) (0x80 | (raw[8] & 0x3f));
}


u_char *
ngx_pty_uuid_format(u_char *dst, const u_char *raw)
{
    static u_char  hex[] = "0123456789abcdef";
    ngx_uint_t     i;

    for (i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            *dst++ = '-';
        }

        *dst++ = hex[raw[i] >> 4];
        *dst++ = hex[raw[i] & 0xf];
    }

    return dst;
}


u_char *
ngx_pty_uuid7_text(u_char *dst)
{
    u_char  raw[16];

    ngx_pty_uuid7(raw, ngx_pty_now_ms());

    return ngx_pty_uuid_format(dst, raw);
}


ngx_int_t
ngx_pty_uuid_valid(u_char *p, size_t len)
{
    ngx_uint_t  i;

    if (len != NGX_PTY_ID_LEN) {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (p[i] != '-') {
                return 0;
            }

            continue;
        }

        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')
              || (p[i] >= 'A' && p[i] <= 'F')))
        {
            return 0;
        }
    }

    return 1;
}


uint64_t
ngx_pty_now_ms(void)
{
    ngx_time_t  *tp;

    tp = ngx_timeofday();

    return (uint64_t) tp->sec * 1000 + tp->msec;
}


u_char *
ngx_pty_ts_format(u_char *dst, uint64_t ms)
{
    ngx_tm_t  tm;

    ngx_gmtime((time_t) (ms / 1000), &tm);

    return ngx_sprintf(dst, "%4d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                       tm.ngx_tm_year, tm.ngx_tm_mon, tm.ngx_tm_mday,
                       tm.ngx_tm_hour, tm.ngx_tm_min, tm.ngx_tm_sec,
                       (int) (ms % 1000));
}


size_t
ngx_pty_json_escape_len(const u_char *s, size_t len)
{
    size_t  n;

    for (n = 0; len; len--, s++) {
        if (*s == '"' || *s == '\\' || *s == '\n' || *s == '\r'
            || *s == '\t')
        {
            n += 2;

        } else if (*s < 0x20 || *s == 0x7f) {
            n += 6;

        } else {
            n++;
        }
    }

    return n;
}


u_char *
ngx_pty_json_escape(u_char *dst, const u_char *s, size_t len)
{
    for ( /* void */ ; len; len--, s++) {
        switch (*s) {
        case '"':  *dst++ = '\\'; *dst++ = '"'; break;
        case '\\': *dst++ = '\\'; *dst++ = '\\'; break;
        case '\n': *dst++ = '\\'; *dst++ = 'n'; break;
        case '\r': *dst++ = '\\'; *dst++ = 'r'; break;
        case '\t': *dst++ = '\\'; *dst++ = 't'; break;
        default:
            if (*s < 0x20 || *s == 0x7f) {
                dst = ngx_sprintf(dst, "\\u%04xd", (int) *s);

            } else {
                *dst++ = *s;
            }
        }
    }

    return dst;
}


size_t
ngx_pty_log_escape(u_char *dst, size_t size, const u_char *s, size_t len)
{
    u_char  *p, *last;

    if (size < sizeof("...")) {
        return 0;
    }

    p = dst;
    last = dst + size - sizeof("...");     /* room for the cut's "..." */

    for ( /* void */ ; len; len--, s++) {
        if (*s < 0x20 || *s >= 0x7f || *s == '"' || *s == '\\') {
            if (last - p < 4) {
                break;
            }

            p = ngx_sprintf(p, "\\x%02xd", (int) *s);

        } else {
            if (p == last) {
                break;
            }

            *p++ = *s;
        }
    }

    if (len) {
        p = ngx_cpymem(p, "...", 3);
    }

    return p - dst;
}


uint32_t
ngx_pty_loc_tag(ngx_str_t *name)
{
    uint32_t  tag;

    tag = ngx_crc32_short(name->data, name->len);

    return tag ? tag : 1;
}


/*
 * wait_for and wait_for_regex: what they may match, and where.
 *
 * A wait must be satisfied by output that answers the call's input: not
 * by text from before it, and not by the terminal's echo of what was
 * typed.  The echo is found by content: the input is replayed through a
 * small line editor (printable text, BS/DEL, the arrows, Home/End,
 * Ctrl-U) into the lines it types, and the settled lines that end with
 * those, in order, are the echo.  Input the editor cannot predict (a
 * TAB's completion) switches the echo rule off for the call.
 */

#include "ngx_pty.h"
#include "ngx_pty_match.h"


#define NGX_PTY_ECHO_LINES  32      /* the last lines of an input kept */
#define NGX_PTY_ECHO_WORK   (16 * 1024 * 1024) /* bytes moved, at most */

/*
 * A caller's regex runs in the event loop, on every look at new output:
 * its backtracking is capped far below PCRE2's default (10,000,000
 * steps, a third of a second), which would stall the worker.
 */
#define NGX_PTY_MATCH_LIMIT  100000


static ngx_uint_t ngx_pty_echo_push(ngx_pty_echo_t *e, u_char *line,
    size_t len);
static u_char *ngx_pty_echo_escape(u_char *p, u_char *last, u_char *buf,
    size_t *len, size_t *cur);
static void ngx_pty_echo_delete(u_char *buf, size_t *len, size_t *cur);
static size_t ngx_pty_trim(u_char *text, size_t from, size_t to);
static ngx_uint_t ngx_pty_ends_with(u_char *text, size_t from, size_t to,
    ngx_str_t *s);


const char *
ngx_pty_match_literal_check(ngx_str_t *s, u_char *buf)
{
    size_t   i;
    u_char   c;

    for (i = 0; i < s->len; i++) {
        c = s->data[i];

        if (c == '\r') {
            ngx_sprintf(buf, "\"wait_for\" has a carriage return (byte %uz):"
                        " settled text ends lines with \\n alone%Z", i);
            return (char *) buf;
        }

        if (c == '\t') {
            ngx_sprintf(buf, "\"wait_for\" has a tab (byte %uz): settled "
                        "text has spaces where tabs moved the cursor%Z", i);
            return (char *) buf;
        }

        if ((c < 0x20 && c != '\n') || c == 0x7f
            || (c == 0xc2 && i + 1 < s->len && s->data[i + 1] >= 0x80
                && s->data[i + 1] <= 0x9f))
        {
            ngx_sprintf(buf, "\"wait_for\" has a control character (byte "
                        "%uz): settled text has none but \\n%Z", i);
            return (char *) buf;
        }

        if (c == ' ' && i + 1 < s->len && s->data[i + 1] == '\n') {
            ngx_sprintf(buf, "\"wait_for\" has a blank before a line feed "
                        "(byte %uz): settled lines have their trailing "
                        "blanks trimmed%Z", i);
            return (char *) buf;
        }
    }

    return NULL;
}


ngx_int_t
ngx_pty_match_regex(ngx_pool_t *pool, ngx_pty_matcher_t *m,
    ngx_str_t *pattern, ngx_str_t *err)
{
#if (NGX_PCRE)
    ngx_regex_compile_t  rc;

    ngx_memzero(&rc, sizeof(ngx_regex_compile_t));

    rc.pattern.data = ngx_pnalloc(pool, pattern->len + 1);
    if (rc.pattern.data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(rc.pattern.data, pattern->data, pattern->len);
    rc.pattern.data[pattern->len] = '\0';
    rc.pattern.len = pattern->len;
    rc.pool = pool;
    rc.err = *err;

    if (ngx_regex_compile(&rc) != NGX_OK) {
        err->len = rc.err.len;
        return NGX_DECLINED;
    }

    m->regex = rc.regex;
    m->pattern = rc.pattern;

    return NGX_OK;

#else

    ngx_str_set(err, "this nginx was built without PCRE");

    return NGX_DECLINED;

#endif
}


#if (NGX_PCRE2)

static ngx_int_t
ngx_pty_match_exec(ngx_regex_t *re, u_char *text, size_t len)
{
    static pcre2_match_data     *data;
    static pcre2_match_context  *ctx;

    if (ctx == NULL) {
        /* the worker's, for its life: whether it matched is all we ask */
        ctx = pcre2_match_context_create(NULL);
        data = pcre2_match_data_create(1, NULL);

        if (ctx == NULL || data == NULL) {
            pcre2_match_context_free(ctx);
            pcre2_match_data_free(data);
            ctx = NULL;
            return PCRE2_ERROR_NOMEMORY;
        }

        (void) pcre2_set_match_limit(ctx, NGX_PTY_MATCH_LIMIT);
    }

    return pcre2_match(re, text, len, 0, 0, data, ctx);
}

#elif (NGX_PCRE)

static ngx_int_t
ngx_pty_match_exec(ngx_regex_t *re, u_char *text, size_t len)
{
    ngx_str_t  s;

    s.data = text;
    s.len = len;

    return ngx_regex_exec(re, &s, NULL, 0);
}

#endif


ngx_uint_t
ngx_pty_match_find(ngx_pty_matcher_t *m, u_char *text, size_t len,
    ngx_log_t *log)
{
#if (NGX_PCRE)
    ngx_int_t  rc;

    if (m->regex) {
        rc = ngx_pty_match_exec(m->regex, text, len);

        if (rc >= 0) {
            return 1;
        }

        if (rc != NGX_REGEX_NO_MATCHED && !m->failed) {
            /* once a call: it is looked at on every new output */
            m->failed = 1;
            ngx_log_error(NGX_LOG_INFO, log, 0,
                          "pty: \"wait_for_regex\" failed: %i (too much "
                          "backtracking is no match)", rc);
        }

        return 0;
    }
#endif

    if (m->literal.len == 0 || m->literal.len > len) {
        return 0;
    }

    return memmem(text, len, m->literal.data, m->literal.len) != NULL;
}


ngx_pty_echo_t *
ngx_pty_echo_create(ngx_pool_t *pool, u_char *input, size_t len)
{
    u_char          *p, *last, *buf, c;
    size_t           n, cur, work;
    ngx_pty_echo_t  *e;

    e = ngx_pcalloc(pool, sizeof(ngx_pty_echo_t));
    if (e == NULL) {
        return NULL;
    }

    e->lines = ngx_palloc(pool, NGX_PTY_ECHO_LINES * sizeof(ngx_str_t));
    buf = ngx_pnalloc(pool, len + 1);

    if (e->lines == NULL || buf == NULL) {
        return NULL;
    }

    n = 0;
    cur = 0;
    work = 0;
    last = input + len;

    for (p = input; p < last; p++) {
        c = *p;

        /* each edit inside a line moves its tail: n^2 for a long line */
        work += n - cur;

        if (c == '\t' || work > NGX_PTY_ECHO_WORK) {
            /* a completion, or too costly to replay: the echo is unknown */
            e->n = 0;
            e->submitted = 0;
            return e;
        }

        if (c == '\r' || c == '\n') {
            if (c == '\r' && p + 1 < last && p[1] == '\n') {
                p++;
            }

            e->submitted += ngx_pty_echo_push(e, buf, n);
            buf += n;
            n = 0;
            cur = 0;
            continue;
        }

        if (c == 0x1b) {
            p = ngx_pty_echo_escape(p, last, buf, &n, &cur);
            continue;
        }

        switch (c) {

        case 0x7f:
        case 0x08:
            ngx_pty_echo_delete(buf, &n, &cur);
            continue;

        case 0x15:                            /* Ctrl-U */
            ngx_memmove(buf, buf + cur, n - cur);
            n -= cur;
            cur = 0;
            continue;

        case 0x01:                            /* Ctrl-A */
            cur = 0;
            continue;

        case 0x05:                            /* Ctrl-E */
            cur = n;
            continue;
        }

        if (c < 0x20) {
            continue;
        }

        ngx_memmove(buf + cur + 1, buf + cur, n - cur);
        buf[cur++] = c;
        n++;
    }

    /* typed, not submitted: echoed on the current line */
    ngx_pty_echo_push(e, buf, n);

    return e;
}


/* 1: a line the echo has */
static ngx_uint_t
ngx_pty_echo_push(ngx_pty_echo_t *e, u_char *line, size_t len)
{
    while (len && line[len - 1] == ' ') {
        len--;
    }

    if (len == 0) {
        /* an empty line's echo is the line end alone: nothing to tell */
        return 0;
    }

    if (e->n == NGX_PTY_ECHO_LINES) {
        ngx_memmove(e->lines, e->lines + 1,
                    (NGX_PTY_ECHO_LINES - 1) * sizeof(ngx_str_t));
        e->n--;
    }

    e->lines[e->n].data = line;
    e->lines[e->n].len = len;
    e->n++;

    return 1;
}


/* ESC [ ... or ESC O x: the cursor keys; anything else is skipped */
static u_char *
ngx_pty_echo_escape(u_char *p, u_char *last, u_char *buf, size_t *len,
    size_t *cur)
{
    u_char  *q, final;

    if (p + 1 >= last || (p[1] != '[' && p[1] != 'O')) {
        return (p + 1 < last) ? p + 1 : p;
    }

    for (q = p + 2; q < last && *q >= 0x20 && *q < 0x40; q++) {
        /* parameters and intermediates */
    }

    if (q >= last) {
        return last - 1;
    }

    final = *q;

    if (final == 'D' && *cur > 0) {
        do {
            (*cur)--;
        } while (*cur > 0 && (buf[*cur] & 0xc0) == 0x80);

    } else if (final == 'C' && *cur < *len) {
        do {
            (*cur)++;
        } while (*cur < *len && (buf[*cur] & 0xc0) == 0x80);

    } else if (final == 'H') {
        *cur = 0;

    } else if (final == 'F') {
        *cur = *len;

    } else if (final == '~' && q == p + 3 && p[2] == '3' && *cur < *len) {
        /* Delete: the character under the cursor */
        (*cur)++;

        while (*cur < *len && (buf[*cur] & 0xc0) == 0x80) {
            (*cur)++;
        }

        ngx_pty_echo_delete(buf, len, cur);
    }

    return q;
}


/* the character before the cursor, whole */
static void
ngx_pty_echo_delete(u_char *buf, size_t *len, size_t *cur)
{
    size_t  from;

    if (*cur == 0) {
        return;
    }

    from = *cur - 1;

    while (from > 0 && (buf[from] & 0xc0) == 0x80) {
        from--;
    }

    ngx_memmove(buf + from, buf + *cur, *len - *cur);
    *len -= *cur - from;
    *cur = from;
}


ngx_int_t
ngx_pty_echo_region(ngx_pty_echo_t *e, u_char *text, size_t len,
    size_t base, ngx_uint_t noecho, size_t *from, size_t *to)
{
    u_char      *nl;
    size_t       start, end, p;
    ngx_uint_t   i;

    *from = base;
    *to = len;

    if (e == NULL || e->n == 0 || noecho) {
        return NGX_OK;
    }

    /* the echo of each typed line ends a settled line, in order */
    i = 0;
    p = base;
    start = base;

    for ( ;; ) {
        nl = memchr(text + p, '\n', len - p);
        end = nl ? (size_t) (nl - text) : len;

        if (ngx_pty_ends_with(text, start, ngx_pty_trim(text, start, end),
                              &e->lines[i]))
        {
            i++;
            *from = nl ? end + 1 : end;

            if (i == e->n) {
                return NGX_OK;
            }
        }

        if (nl == NULL) {
            break;
        }

        p = end + 1;
        start = p;
    }

    if (i > 0 || e->submitted) {
        /*
         * Part of the input is echoed, or none of the lines it submitted
         * yet: the rest is on its way (text from before the program read
         * the input, such as a prompt printed late, is not its answer)
         */
        return NGX_AGAIN;
    }

    *from = base;

    /* no echo yet: the current line, still the first, may be one coming */
    if (start == base && len > base
        && len - base <= e->lines[0].len
        && ngx_memcmp(text + base, e->lines[0].data, len - base) == 0)
    {
        *to = base;
    }

    return NGX_OK;
}


static size_t
ngx_pty_trim(u_char *text, size_t from, size_t to)
{
    while (to > from && text[to - 1] == ' ') {
        to--;
    }

    return to;
}


static ngx_uint_t
ngx_pty_ends_with(u_char *text, size_t from, size_t to, ngx_str_t *s)
{
    return to - from >= s->len
           && ngx_memcmp(text + to - s->len, s->data, s->len) == 0;
}


/*
 * Secret redaction (ngx_pty_redact.h).  Every pattern, built-in, the
 * operator's and the literal secrets, is one alternation, checked by
 * nginx's regex layer and matched JIT-compiled.  Each read is matched with
 * what came before it (the last NGX_PTY_REDACT_CONTEXT bytes, already
 * sent), so a secret whose start went out in an earlier read is masked
 * from there on; and output that a pattern could still grow into a
 * secret (a partial match at the end, PCRE2_PARTIAL_HARD) is held back
 * until the next read completes or refutes it.  A small read (typing, a
 * prompt) holds back only a partial match of four bytes or more, so that
 * an echo is not delayed by every letter a pattern starts with.
 */

#include "ngx_pty.h"
#include "ngx_pty_redact.h"
#include "ngx_pty_reveal.h"


#define NGX_PTY_REDACT_READ  NGX_PTY_READ_CHUNK  /* the largest read fed */
#define NGX_PTY_REDACT_MIN   4              /* a small read's shortest hold */
#define NGX_PTY_REDACT_MARK  "[REDACTED]"


struct ngx_pty_redact_s {
    ngx_regex_t               *re;
    pcre2_match_data          *md;
    u_char                    *buf;       /* context, held, then new */
    size_t                     ctx;
    size_t                     held;
    u_char                    *out;

    /*
     * the last output's masked spans, their original bytes in raw; while
     * matching, a ring of the last NGX_PTY_REDACT_SPANS of nspans
     */
    ngx_pty_redact_span_t      spans[NGX_PTY_REDACT_SPANS];
    ngx_uint_t                 nspans;
    u_char                    *raw;
};


static size_t ngx_pty_redact_run(ngx_pty_redact_t *r, size_t len,
    ngx_uint_t hold, ngx_uint_t full, u_char **out);
static void ngx_pty_redact_mask(u_char *out, size_t from, size_t start,
    size_t end);
static size_t ngx_pty_redact_partial(ngx_pty_redact_t *r, size_t len);
static void ngx_pty_redact_originals(ngx_pty_redact_t *r, size_t from);
static ngx_int_t ngx_pty_redact_literal(ngx_conf_t *cf, ngx_array_t *alts,
    u_char *p, size_t len, ngx_str_t *file);
static char *ngx_pty_redact_jit(ngx_conf_t *cf, ngx_pty_redact_conf_t *rc,
    ngx_str_t *pattern);
static void ngx_pty_redact_free(void *data);


/* the secrets everyone has: docs/DIRECTIVES.md lists them */
static const char  *ngx_pty_redact_builtins[] = {
    /* AWS access key ids */
    "\\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\\b",
    /* AWS secret access keys, where they are named */
    "(?i)aws_secret_access_key[\"']?\\s*[=:]\\s*[\"']?\\K[A-Za-z0-9/+=]{40}",
    /* GitHub tokens: classic, then fine-grained */
    "\\bgh[pousr]_[A-Za-z0-9]{36,251}\\b",
    "\\bgithub_pat_[A-Za-z0-9_]{22,255}\\b",
    /* GitLab personal, project and group access tokens */
    "\\bglpat-[A-Za-z0-9_-]{20,}",
    /* Slack tokens */
    "\\bxox[abposr]-[A-Za-z0-9-]{10,}",
    /* JSON Web Tokens */
    "\\beyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}",
    /* PEM private keys, from BEGIN to END */
    "-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\\s\\S]*?"
    "-----END [A-Z0-9 ]*PRIVATE KEY-----",
    /* password=..., api_key: ...: the value */
    "(?i)\\b(?:password|passwd|secret|api[_-]?key|access[_-]?token"
    "|auth[_-]?token|client[_-]?secret)\\b[\"']?\\s*[=:]\\s*[\"']?"
    "\\K[^\\s\"',;]+",
    NULL
};


char *
ngx_pty_redact_pattern(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    u_char               errstr[NGX_MAX_CONF_ERRSTR];
    ngx_str_t           *value, *p;
    ngx_regex_compile_t  rc;

    value = cf->args->elts;

    /* alone first, for an error that names it */
    ngx_memzero(&rc, sizeof(ngx_regex_compile_t));
    rc.pattern = value[1];
    rc.pool = cf->pool;
    rc.err.len = NGX_MAX_CONF_ERRSTR;
    rc.err.data = errstr;

    if (ngx_regex_compile(&rc) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V", &rc.err);
        return NGX_CONF_ERROR;
    }

    if (pmcf->redact->patterns == NULL) {
        pmcf->redact->patterns = ngx_array_create(cf->pool, 4,
                                                 sizeof(ngx_str_t));
        if (pmcf->redact->patterns == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    p = ngx_array_push(pmcf->redact->patterns);
    if (p == NULL) {
        return NGX_CONF_ERROR;
    }

    *p = value[1];

    return NGX_CONF_OK;
}


char *
ngx_pty_redact_secrets(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    ngx_str_t  *value, *file;

    value = cf->args->elts;

    if (pmcf->redact->files == NULL) {
        pmcf->redact->files = ngx_array_create(cf->pool, 2, sizeof(ngx_str_t));
        if (pmcf->redact->files == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    file = ngx_array_push(pmcf->redact->files);
    if (file == NULL) {
        return NGX_CONF_ERROR;
    }

    *file = value[1];

    if (ngx_conf_full_name(cf->cycle, file, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * pty_redact on | off | who...: which WebSocket clients are shown the
 * masked output ("on": all of them); the others see what the ledger
 * kept of it.  The agent API, A2A tasks, MCP, Keyframes and the archive
 * are always masked.
 */
ngx_conf_bitmask_t  ngx_pty_redact_who[] = {
    { ngx_string("off"), NGX_PTY_REDACT_OFF },
    { ngx_string("on"), NGX_PTY_REDACT_ALL },
    { ngx_string("live"), NGX_PTY_REDACT_CONTROLLER|NGX_PTY_REDACT_OBSERVERS },
    { ngx_string("controller"), NGX_PTY_REDACT_CONTROLLER },
    { ngx_string("observers"), NGX_PTY_REDACT_OBSERVERS },
    { ngx_string("replay"), NGX_PTY_REDACT_REPLAY },
    { ngx_null_string, 0 }
};


char *
ngx_pty_redact_merge(ngx_conf_t *cf, ngx_uint_t *conf, ngx_uint_t prev)
{
    ngx_conf_merge_bitmask_value(*conf, prev, NGX_PTY_REDACT_OFF);

    if ((*conf & NGX_PTY_REDACT_OFF) && (*conf & NGX_PTY_REDACT_ALL)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_redact off\" takes no other value");
        return NGX_CONF_ERROR;
    }

    /* from here on 0 is off: what "does the session redact" tests read */
    *conf &= NGX_PTY_REDACT_ALL;

    return NGX_CONF_OK;
}


char *
ngx_pty_redact_builtin(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    ngx_str_t  *value;

    value = cf->args->elts;

    if (pmcf->redact->builtin != NGX_CONF_UNSET) {
        return "is duplicate";
    }

    if (ngx_strcmp(value[1].data, "on") == 0) {
        pmcf->redact->builtin = 1;

    } else if (ngx_strcmp(value[1].data, "off") == 0) {
        pmcf->redact->builtin = 0;

    } else {
        return "takes \"on\" or \"off\"";
    }

    return NGX_CONF_OK;
}


char *
ngx_pty_redact_wait(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    ngx_str_t  *value;

    value = cf->args->elts;

    if (pmcf->redact->wait != NGX_CONF_UNSET_MSEC) {
        return "is duplicate";
    }

    pmcf->redact->wait = ngx_parse_time(&value[1], 0);

    if (pmcf->redact->wait == (ngx_msec_t) NGX_ERROR
        || pmcf->redact->wait < 1 || pmcf->redact->wait > 10000)
    {
        return "takes a time from 1ms to 10s";
    }

    return NGX_CONF_OK;
}


/* a secrets file: one literal secret a line, four bytes at least */
static ngx_int_t
ngx_pty_redact_file(ngx_conf_t *cf, ngx_array_t *alts, ngx_str_t *file)
{
    u_char     *p, *last, *eol;
    ngx_int_t   rc;
    ngx_str_t   text;
    ngx_file_t  f;
    ngx_fd_t    fd;
    struct stat st;

    fd = ngx_open_file(file->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE || fstat(fd, &st) == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "pty_redact_secrets: cannot open \"%V\"", file);
        if (fd != NGX_INVALID_FILE) {
            (void) ngx_close_file(fd);
        }
        return NGX_ERROR;
    }

    text.len = st.st_size;
    text.data = ngx_pnalloc(cf->pool, text.len + 1);

    ngx_memzero(&f, sizeof(ngx_file_t));
    f.fd = fd;
    f.name = *file;
    f.log = cf->log;

    if (text.data == NULL
        || ngx_read_file(&f, text.data, text.len, 0) != (ssize_t) text.len)
    {
        (void) ngx_close_file(fd);
        return NGX_ERROR;
    }

    (void) ngx_close_file(fd);

    rc = NGX_OK;
    last = text.data + text.len;

    for (p = text.data; p < last && rc == NGX_OK; p = eol + 1) {
        eol = ngx_strlchr(p, last, '\n');
        eol = eol ? eol : last;

        rc = ngx_pty_redact_literal(cf, alts, p,
                                    eol - p - (eol > p && eol[-1] == '\r'),
                                    file);
    }

    ngx_explicit_memzero(text.data, text.len);

    return rc;
}


/* a literal secret as a pattern: every byte that means something escaped */
static ngx_int_t
ngx_pty_redact_literal(ngx_conf_t *cf, ngx_array_t *alts, u_char *p,
    size_t len, ngx_str_t *file)
{
    size_t      i;
    u_char     *q;
    ngx_str_t  *alt;

    static u_char  hex[] = "0123456789abcdef";

    if (len == 0) {
        return NGX_OK;
    }

    if (len < NGX_PTY_REDACT_MIN) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "pty_redact_secrets: \"%V\" has a secret of fewer "
                           "than 4 bytes: it would mask ordinary output",
                           file);
        return NGX_ERROR;
    }

    alt = ngx_array_push(alts);
    if (alt == NULL) {
        return NGX_ERROR;
    }

    alt->data = ngx_pnalloc(cf->pool, len * 4);
    if (alt->data == NULL) {
        return NGX_ERROR;
    }

    for (q = alt->data, i = 0; i < len; i++) {
        if (isalnum(p[i])) {
            *q++ = p[i];
            continue;
        }

        /* \xHH: no byte can mean anything to the pattern */
        *q++ = '\\';
        *q++ = 'x';
        *q++ = hex[p[i] >> 4];
        *q++ = hex[p[i] & 0xf];
    }

    alt->len = q - alt->data;

    return NGX_OK;
}


/* every pattern in one alternation, compiled once for all sessions */
char *
ngx_pty_redact_init_conf(ngx_conf_t *cf, ngx_pty_redact_conf_t *rc)
{
    u_char               *p, errstr[NGX_MAX_CONF_ERRSTR];
    size_t                len;
    ngx_str_t            *s, *files;
    ngx_uint_t            i;
    ngx_array_t           alts;
    ngx_regex_compile_t   rgc;

    if (ngx_array_init(&alts, cf->pool, 16, sizeof(ngx_str_t)) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    for (i = 0; rc->builtin && ngx_pty_redact_builtins[i]; i++) {
        s = ngx_array_push(&alts);
        if (s == NULL) {
            return NGX_CONF_ERROR;
        }

        s->data = (u_char *) ngx_pty_redact_builtins[i];
        s->len = ngx_strlen(ngx_pty_redact_builtins[i]);
    }

    for (i = 0; rc->patterns && i < rc->patterns->nelts; i++) {
        s = ngx_array_push(&alts);
        if (s == NULL) {
            return NGX_CONF_ERROR;
        }

        *s = ((ngx_str_t *) rc->patterns->elts)[i];
    }

    files = rc->files ? rc->files->elts : NULL;

    for (i = 0; rc->files && i < rc->files->nelts; i++) {
        if (ngx_pty_redact_file(cf, &alts, &files[i]) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    if (alts.nelts == 0) {
        return NGX_CONF_OK;
    }

    s = alts.elts;

    for (len = 0, i = 0; i < alts.nelts; i++) {
        len += s[i].len + sizeof("(?:)|");
    }

    p = ngx_pnalloc(cf->pool, len);
    if (p == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(&rgc, sizeof(ngx_regex_compile_t));
    rgc.pattern.data = p;

    for (i = 0; i < alts.nelts; i++) {
        p = ngx_sprintf(p, "%s(?:%V)", i ? "|" : "", &s[i]);
    }

    rgc.pattern.len = p - rgc.pattern.data;
    rgc.pool = cf->pool;
    rgc.err.len = NGX_MAX_CONF_ERRSTR;
    rgc.err.data = errstr;

    /* nginx's layer says what is wrong with them, in its words */
    if (ngx_regex_compile(&rgc) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "redaction patterns: %V",
                           &rgc.err);
        return NGX_CONF_ERROR;
    }

    return ngx_pty_redact_jit(cf, rc, &rgc.pattern);
}


/*
 * The matching copy is compiled again with PCRE2's own allocator and
 * JIT-compiled for whole and partial matches, whatever pcre_jit says:
 * every byte of a redacted session's output goes through it.
 */
static char *
ngx_pty_redact_jit(ngx_conf_t *cf, ngx_pty_redact_conf_t *rc,
    ngx_str_t *pattern)
{
    int                  err;
    PCRE2_SIZE           off;
    pcre2_code          *re;
    ngx_pool_cleanup_t  *cln;

    re = pcre2_compile(pattern->data, pattern->len, 0, &err, &off, NULL);
    if (re == NULL) {
        return NGX_CONF_ERROR;
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        pcre2_code_free(re);
        return NGX_CONF_ERROR;
    }

    cln->handler = ngx_pty_redact_free;
    cln->data = re;

    if (pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD)
        != 0)
    {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "redaction patterns: no JIT here, matching "
                           "costs more");
    }

    rc->regex = re;

    return NGX_CONF_OK;
}


static void
ngx_pty_redact_free(void *data)
{
    pcre2_code_free(data);
}


ngx_pty_redact_t *
ngx_pty_redact_create(ngx_pty_redact_conf_t *rc, ngx_log_t *log)
{
    ngx_pty_redact_t  *r;

    if (rc->regex == NULL) {
        return NULL;
    }

    r = ngx_calloc(sizeof(ngx_pty_redact_t), log);
    if (r == NULL) {
        return NULL;
    }

    r->re = rc->regex;
    r->md = pcre2_match_data_create(16, NULL);
    r->buf = ngx_alloc(NGX_PTY_REDACT_CONTEXT + NGX_PTY_REDACT_HOLD
                       + NGX_PTY_REDACT_READ, log);
    r->out = ngx_alloc(NGX_PTY_REDACT_HOLD + NGX_PTY_REDACT_READ, log);
    r->raw = ngx_alloc(NGX_PTY_REVEAL_SIZE, log);

    if (r->md == NULL || r->buf == NULL || r->out == NULL || r->raw == NULL)
    {
        ngx_pty_redact_destroy(r);
        return NULL;
    }

    return r;
}


void
ngx_pty_redact_destroy(ngx_pty_redact_t *r)
{
    if (r->md) {
        pcre2_match_data_free(r->md);
    }

    if (r->buf) {
        ngx_explicit_memzero(r->buf, r->ctx + r->held);
        ngx_free(r->buf);
    }

    if (r->raw) {
        ngx_explicit_memzero(r->raw, NGX_PTY_REVEAL_SIZE);
        ngx_free(r->raw);
    }

    ngx_free(r->out);
    ngx_free(r);
}


size_t
ngx_pty_redact_feed(ngx_pty_redact_t *r, u_char *in, size_t n,
    ngx_uint_t full, u_char **out)
{
    size_t  len;

    n = ngx_min(n, NGX_PTY_REDACT_READ);

    ngx_memcpy(r->buf + r->ctx + r->held, in, n);
    len = r->ctx + r->held + n;

    return ngx_pty_redact_run(r, len, 1, full, out);
}


size_t
ngx_pty_redact_flush(ngx_pty_redact_t *r, u_char **out)
{
    return ngx_pty_redact_run(r, r->ctx + r->held, 0, 0, out);
}


size_t
ngx_pty_redact_held(ngx_pty_redact_t *r)
{
    return r->held;
}


ngx_uint_t
ngx_pty_redact_spans(ngx_pty_redact_t *r, ngx_pty_redact_span_t **spans)
{
    *spans = r->spans;

    return r->nspans;
}


/*
 * A whole text at once (a command line, a message's text): its secrets
 * masked in place as output's are.  Returns how many, or NGX_ERROR.
 */
ngx_int_t
ngx_pty_redact_text(ngx_pty_redact_conf_t *conf, u_char *p, size_t len)
{
    int                rc;
    size_t             pos, start, end;
    ngx_int_t          n;
    PCRE2_SIZE        *ov;
    pcre2_match_data  *md;

    if (conf->regex == NULL || len == 0) {
        return 0;
    }

    md = pcre2_match_data_create(16, NULL);
    if (md == NULL) {
        return NGX_ERROR;
    }

    ov = pcre2_get_ovector_pointer(md);
    n = 0;

    for (pos = 0; pos < len; pos = (end > start) ? end : start + 1) {
        rc = pcre2_match(conf->regex, p, len, pos, 0, md, NULL);

        if (rc < 0) {
            break;
        }

        start = ov[0];
        end = ov[1];

        if (end > start) {
            ngx_pty_redact_mask(p, 0, start, end);
            n++;
        }
    }

    pcre2_match_data_free(md);

    return n;
}


/*
 * What a caller gives, as it is shown and kept: a masked copy (to be
 * freed), or p itself when it holds no secret; NULL: no memory.  A text
 * the patterns could not run over is masked whole.
 */
u_char *
ngx_pty_redact_copy(const u_char *p, size_t len, ngx_log_t *log)
{
    u_char               *copy;
    ngx_int_t             n;
    ngx_pty_main_conf_t  *pmcf;

    pmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle, ngx_pty_module);

    if (pmcf->redact->regex == NULL || len == 0) {
        return (u_char *) p;
    }

    copy = ngx_alloc(len, log);
    if (copy == NULL) {
        return NULL;
    }

    ngx_memcpy(copy, p, len);

    n = ngx_pty_redact_text(pmcf->redact, copy, len);

    if (n == 0) {
        ngx_free(copy);
        return (u_char *) p;
    }

    if (n == NGX_ERROR) {
        ngx_memset(copy, '*', len);
    }

    return copy;
}


/*
 * Masks whole secrets in buf[ctx, len), holds back what may begin one
 * (hold), and keeps the last bytes let go as the next call's context.
 */
static size_t
ngx_pty_redact_run(ngx_pty_redact_t *r, size_t len, ngx_uint_t hold,
    ngx_uint_t full, u_char **out)
{
    int                     rc;
    size_t                  from, pos, start, end, keep, ctx, a, b;
    PCRE2_SIZE             *ov;
    ngx_pty_redact_span_t  *sp;

    from = r->ctx;
    ngx_memcpy(r->out, r->buf + from, len - from);

    keep = len;

    if (hold) {
        start = ngx_pty_redact_partial(r, len);

        /* where it starts, or where the bytes not sent yet start */
        start = ngx_max(start, from);

        if (start < len && len - start <= NGX_PTY_REDACT_HOLD
            && (full || len - start >= NGX_PTY_REDACT_MIN))
        {
            keep = start;
        }
    }

    ov = pcre2_get_ovector_pointer(r->md);
    r->nspans = 0;

    for (pos = 0; pos < len; pos = (end > start) ? end : start + 1) {
        rc = pcre2_match(r->re, r->buf, len, pos, 0, r->md, NULL);

        if (rc < 0) {
            break;
        }

        start = ov[0];
        end = ov[1];

        if (end <= from) {
            continue;
        }

        ngx_pty_redact_mask(r->out, from, start, end);

        /* what goes out now; the held tail is masked again next time */
        a = ngx_max(start, from);
        b = ngx_min(end, keep);

        if (a < b) {
            sp = &r->spans[r->nspans++ % NGX_PTY_REDACT_SPANS];
            sp->pos = a - from;
            sp->len = b - a;
        }
    }

    ngx_pty_redact_originals(r, from);

    /* the next context: the last bytes let go, then what is held */
    ctx = ngx_min(keep, NGX_PTY_REDACT_CONTEXT);
    ngx_memmove(r->buf, r->buf + keep - ctx, ctx + (len - keep));
    r->ctx = ctx;
    r->held = len - keep;

    *out = r->out;

    return keep - from;
}


/*
 * The original bytes of the spans let go, while buf still has them: the
 * last ones that raw holds, as the ledger keeps the last; the others
 * stay masked for everyone.
 */
static void
ngx_pty_redact_originals(ngx_pty_redact_t *r, size_t from)
{
    size_t                  used;
    ngx_uint_t              i, n, first;
    ngx_pty_redact_span_t  *sp, ring[NGX_PTY_REDACT_SPANS];

    n = r->nspans;

    if (n > NGX_PTY_REDACT_SPANS) {
        /* the ring in order, oldest first */
        i = n % NGX_PTY_REDACT_SPANS;
        n = NGX_PTY_REDACT_SPANS;
        ngx_memcpy(ring, r->spans, sizeof(ring));
        ngx_memcpy(r->spans, ring + i, (n - i) * sizeof(*sp));
        ngx_memcpy(r->spans + n - i, ring, i * sizeof(*sp));
    }

    used = 0;

    for (first = n; first > 0; first--) {
        if (used + r->spans[first - 1].len > NGX_PTY_REVEAL_SIZE) {
            break;
        }

        used += r->spans[first - 1].len;
    }

    used = 0;

    for (i = first; i < n; i++) {
        sp = &r->spans[i - first];
        *sp = r->spans[i];
        sp->raw = r->raw + used;
        ngx_memcpy(sp->raw, r->buf + from + sp->pos, sp->len);
        used += sp->len;
    }

    r->nspans = n - first;
}


/* where a partial match at the end of buf[0, len) starts, or len */
static size_t
ngx_pty_redact_partial(ngx_pty_redact_t *r, size_t len)
{
    int          rc;
    size_t       pos;
    PCRE2_SIZE  *ov;

    ov = pcre2_get_ovector_pointer(r->md);
    pos = (len > NGX_PTY_REDACT_HOLD) ? len - NGX_PTY_REDACT_HOLD : 0;

    for ( ;; ) {
        rc = pcre2_match(r->re, r->buf, len, pos, PCRE2_PARTIAL_HARD, r->md,
                         NULL);

        if (rc == PCRE2_ERROR_PARTIAL) {
            return ov[0];
        }

        if (rc < 0 || ov[1] >= len) {
            return len;
        }

        /* a whole match before the end: look after it */
        pos = (ov[1] > ov[0]) ? ov[1] : ov[0] + 1;
    }
}


/*
 * out[i] holds buf[from + i]: the secret's bytes from there on become
 * '*', a run of ten or more starting with the marker when the secret
 * starts in it.
 */
static void
ngx_pty_redact_mask(u_char *out, size_t from, size_t start, size_t end)
{
    u_char  *p, *last;

    p = out + (ngx_max(start, from) - from);
    last = out + (end - from);

    if (start >= from
        && (size_t) (last - p) >= sizeof(NGX_PTY_REDACT_MARK) - 1)
    {
        p = ngx_cpymem(p, NGX_PTY_REDACT_MARK,
                       sizeof(NGX_PTY_REDACT_MARK) - 1);
    }

    ngx_memset(p, '*', last - p);
}

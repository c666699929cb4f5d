
/*
 * The audit log: JSON lines appended with one write(2) each.
 */

#include "ngx_pty.h"
#include "ngx_pty_audit.h"
#include "ngx_pty_util.h"


#define NGX_PTY_AUDIT_LINE  4096


static ngx_open_file_t *ngx_pty_audit_file(void);
static u_char *ngx_pty_audit_str(u_char *dst, u_char *s, size_t len);


/* pty_audit_log path | off */
char *
ngx_pty_audit_log_set(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    ngx_str_t  *value;

    if (pmcf->audit != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "off") == 0) {
        pmcf->audit = NULL;
        return NGX_CONF_OK;
    }

    /* opened by nginx with O_APPEND, reopened on USR1 (nginx -s reopen) */
    pmcf->audit = ngx_conf_open_file(cf->cycle, &value[1]);
    if (pmcf->audit == NULL) {
        return NGX_CONF_ERROR;
    }

    (void) cmd;

    return NGX_CONF_OK;
}


static ngx_open_file_t *
ngx_pty_audit_file(void)
{
    ngx_pty_main_conf_t  *pmcf;

    if (ngx_cycle->conf_ctx == NULL) {
        return NULL;
    }

    pmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle, ngx_pty_module);

    if (pmcf == NULL || pmcf->audit == NULL
        || pmcf->audit == NGX_CONF_UNSET_PTR
        || pmcf->audit->fd == NGX_INVALID_FILE)
    {
        return NULL;
    }

    return pmcf->audit;
}


ngx_uint_t
ngx_pty_audit_on(void)
{
    return ngx_pty_audit_file() != NULL;
}


void
ngx_pty_audit(ngx_pty_ident_t *id, ngx_connection_t *c, const char *event,
    const char *fmt, ...)
{
    u_char           *p, *last;
    size_t            n;
    va_list           args;
    ngx_open_file_t  *file;
    u_char            buf[NGX_PTY_AUDIT_LINE];

    static time_t     failed;

    file = ngx_pty_audit_file();
    if (file == NULL) {
        return;
    }

    last = buf + sizeof(buf) - 2;

    p = ngx_pty_cpylit(buf, "{\"ts\":\"");
    p = ngx_pty_ts_format(p, ngx_pty_now_ms());
    p = ngx_slprintf(p, last, "\",\"event\":\"%s\"", event);

    if (id) {
        /* 255 bytes of principal escape to at most 1530 */
        p = ngx_pty_cpylit(p, ",\"principal\":\"");
        p = ngx_pty_audit_str(p, id->principal.data,
                              ngx_min(id->principal.len, 255));
        *p++ = '"';

        if (id->status) {
            p = ngx_pty_cpylit(p, ",\"authenticated\":false");
        }
    }

    if (c) {
        n = ngx_min(c->addr_text.len, 64);
        p = ngx_slprintf(p, last, ",\"client_addr\":\"%*s\"", n,
                         c->addr_text.data);
    }

    if (id && id->session_name) {
        p = ngx_slprintf(p, last, ",\"session_id\":\"%*s\",\"session\":"
                         "\"pty-%ui\"", (size_t) NGX_PTY_ID_LEN,
                         id->session_id, id->session_name);
    }

    if (id && id->client_id) {
        p = ngx_slprintf(p, last, ",\"client_id\":\"c-%uD\"", id->client_id);
    }

    if (id && id->trace_len) {
        p = ngx_pty_cpylit(p, ",\"trace_id\":\"");
        p = ngx_pty_audit_str(p, id->trace_id, id->trace_len);
        *p++ = '"';
    }

    if (fmt && *fmt) {
        *p++ = ',';
        va_start(args, fmt);
        p = ngx_vslprintf(p, last, fmt, args);
        va_end(args);
    }

    *p++ = '}';
    *p++ = '\n';

    /* O_APPEND: one write is one line, wherever the other workers are */
    if (ngx_write_fd(file->fd, buf, p - buf) != (ssize_t) (p - buf)
        && failed != ngx_time())
    {
        failed = ngx_time();
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, ngx_errno,
                      "pty: writing the audit log \"%V\" failed",
                      &file->name);
    }
}


void
ngx_pty_audit_request(ngx_http_request_t *r, const char *event,
    const char *reason)
{
    u_char           *p;
    ngx_str_t         what;
    ngx_pty_ident_t  *id;

    if (!ngx_pty_audit_on()) {
        return;
    }

    id = ngx_pty_auth_ident(r);

    /* the call or the endpoint: the URI's last segment, at most 32 bytes */
    p = r->uri.data + r->uri.len;

    while (p > r->uri.data && p[-1] != '/') {
        p--;
    }

    what.data = p;
    what.len = ngx_min((size_t) (r->uri.data + r->uri.len - p), 32);

    for (p = what.data; p < what.data + what.len; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
              || *p == '-' || *p == '_'))
        {
            ngx_str_set(&what, "?");
            break;
        }
    }

    ngx_pty_audit(id, r->connection, event,
                  "\"reason\":\"%s\",\"what\":\"%V\"", reason, &what);
}


u_char *
ngx_pty_audit_escape(u_char *buf, size_t size, u_char *s, size_t len)
{
    u_char  *p;

    /* an escape takes at most 6 bytes; a cut is not inside a character */
    if (len > (size - 1) / 6) {
        len = (size - 1) / 6;

        while (len && (s[len] & 0xc0) == 0x80) {
            len--;
        }
    }

    p = ngx_pty_audit_str(buf, s, len);
    *p = '\0';

    return buf;
}


/*
 * JSON string text, as ngx_pty_json_escape, and UTF-8 however s is: a
 * byte that is not part of a character is written as \u00XX (a line
 * that is not UTF-8 is not JSON to a reader)
 */
static u_char *
ngx_pty_audit_str(u_char *dst, u_char *s, size_t len)
{
    u_char  *p, *last, *q;

    last = s + len;

    for (p = s; p < last; /* void */) {
        if (*p < 0x80) {
            dst = ngx_pty_json_escape(dst, p++, 1);
            continue;
        }

        q = p;

        if (ngx_utf8_decode(&q, last - p) <= 0x10ffff) {
            dst = ngx_cpymem(dst, p, q - p);
            p = q;
            continue;
        }

        dst = ngx_sprintf(dst, "\\u%04xd", (int) *p++);
    }

    return dst;
}

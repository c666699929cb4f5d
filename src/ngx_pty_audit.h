
/*
 * The audit log (pty_audit_log): one JSON object per line for every
 * security event (extension section 10.3): sessions started and killed,
 * attaches and detaches with their role, denied attaches and writes,
 * role changes, replays with their range, revocations, API calls that
 * change state.  Each line is one write(2) on a file nginx opened with
 * O_APPEND (cycle->open_files), so workers never wait on each other,
 * lines never interleave, and nginx -s reopen rotates it.
 */

#ifndef _NGX_PTY_AUDIT_H_INCLUDED_
#define _NGX_PTY_AUDIT_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_auth.h"


char *ngx_pty_audit_log_set(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

ngx_uint_t ngx_pty_audit_on(void);

/*
 * One line: time, event, the principal, the client's address, the
 * session and client the identity touched, its trace id, then the
 * members fmt writes (ngx_sprintf's format, JSON text: strings that come
 * from clients must go through ngx_pty_audit_escape first).
 */
void ngx_pty_audit(ngx_pty_ident_t *id, ngx_connection_t *c,
    const char *event, const char *fmt, ...);

/* the same for an HTTP request, with a reason */
void ngx_pty_audit_request(ngx_http_request_t *r, const char *event,
    const char *reason);

/* s as the body of a JSON string, cut to fit size, NUL-terminated */
u_char *ngx_pty_audit_escape(u_char *buf, size_t size, u_char *s,
    size_t len);


#endif /* _NGX_PTY_AUDIT_H_INCLUDED_ */


/*
 * Identity and access: the principal and scopes that auth_request left in
 * variables (pty_principal, pty_scopes), the bearer token for the auth
 * subrequest ($pty_bearer_token), each session's access list (kept in its
 * zone record, so every worker and location applies it), refusals a
 * browser can read (close codes 4401/4403/4404/4429), revocation, and the
 * $pty_* variables for access logs.
 *
 * Every caller that reaches a session asks ngx_pty_auth_check() first:
 * the attach handler, the agent API and any later endpoint alike.
 */

#ifndef _NGX_PTY_AUTH_H_INCLUDED_
#define _NGX_PTY_AUTH_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"


#define NGX_PTY_SCOPE_OBSERVE   0x01      /* pty:observe */
#define NGX_PTY_SCOPE_CONTROL   0x02      /* pty:control */
#define NGX_PTY_SCOPE_START     0x04      /* pty:start */
#define NGX_PTY_SCOPE_KILL      0x08      /* pty:kill */
#define NGX_PTY_SCOPE_ADMIN     0x10      /* pty:admin: every session */
#define NGX_PTY_SCOPE_REVEAL    0x20      /* pty:reveal: output unmasked */

/* what a location without pty_scopes, or with pty_auth off, grants */
#define NGX_PTY_SCOPE_DEFAULT                                                 \
    (NGX_PTY_SCOPE_OBSERVE|NGX_PTY_SCOPE_CONTROL|NGX_PTY_SCOPE_START          \
     |NGX_PTY_SCOPE_KILL)

#define NGX_PTY_PRINCIPAL_MAX   255
#define NGX_PTY_TRACE_MAX       128


/* what a principal may do with one session, from its access list */
typedef enum {
    NGX_PTY_RIGHT_NONE = 0,       /* may not know it exists: 404 */
    NGX_PTY_RIGHT_OBSERVE,
    NGX_PTY_RIGHT_CONTROL,
    NGX_PTY_RIGHT_OWNER           /* its starter, or pty:admin */
} ngx_pty_right_e;


/* a refusal, as an HTTP status, a binding Error code and a close code */
typedef enum {
    NGX_PTY_REFUSE_UNAUTHENTICATED = 0,
    NGX_PTY_REFUSE_PERMISSION_DENIED,
    NGX_PTY_REFUSE_NOT_FOUND,
    NGX_PTY_REFUSE_RATE_LIMITED,
    NGX_PTY_REFUSE_N              /* pty_refuse: from the error's status */
} ngx_pty_refuse_e;


/*
 * Who sent a request, fixed when it is first asked (for a WebSocket: at
 * the upgrade, for the connection's life), and what the request touched,
 * for the audit log and the $pty_* variables.  Kept in the request pool.
 */
typedef struct {
    ngx_str_t                  principal;     /* "" with pty_auth off */
    ngx_str_t                  scope_text;    /* as the auth service said */
    ngx_uint_t                 scopes;        /* NGX_PTY_SCOPE_* */
    ngx_uint_t                 status;        /* 0, or 401: no principal */
    ngx_uint_t                 anonymous;     /* pty_auth off */
    uint64_t                   since;         /* unix ms it was made */
    ngx_atomic_uint_t          revoked_seen;  /* revocations looked at */
    ngx_uint_t                 revoked;

    u_char                     trace_id[NGX_PTY_TRACE_MAX];
    size_t                     trace_len;

    u_char                     session_id[NGX_PTY_ID_LEN];
    ngx_uint_t                 session_name;  /* 0: none touched */
    ngx_uint_t                 right;         /* on it: NGX_PTY_RIGHT_* */
    uint32_t                   client_id;     /* 0: not a WebSocket */
    ngx_int_t                  role;          /* -1: not joined */
} ngx_pty_ident_t;


/* pty_share: principals or scopes a location's sessions are opened to */
typedef struct {
    ngx_uint_t                 right;         /* OBSERVE or CONTROL */
    ngx_uint_t                 scope;         /* else a principal */
    ngx_str_t                  name;
} ngx_pty_share_t;


ngx_int_t ngx_pty_auth_add_variables(ngx_conf_t *cf);

/* directives */
char *ngx_pty_auth_share(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_pty_auth_refuse_set(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
/* an attach or API location with no stance on auth fails nginx -t */
ngx_int_t ngx_pty_auth_merge(ngx_conf_t *cf, ngx_pty_loc_conf_t *prev,
    ngx_pty_loc_conf_t *conf);

/* the request's identity, made on the first call; NULL: no memory */
ngx_pty_ident_t *ngx_pty_auth_ident(ngx_http_request_t *r);

/*
 * May the request's principal do what scope names (one NGX_PTY_SCOPE_*)
 * with session sh (NULL: no session, the scope alone)?  NGX_OK, or the
 * HTTP status of the refusal: 401 (no principal), 404 (the session is not
 * one it may see: never 403, so ids do not leak), 403 (it may see it but
 * its scopes or the session's access list do not cover this).
 */
ngx_int_t ngx_pty_auth_check(ngx_http_request_t *r, ngx_pty_session_sh_t *sh,
    ngx_uint_t scope);
ngx_uint_t ngx_pty_auth_right(ngx_pty_ident_t *id, ngx_pty_session_sh_t *sh);

/* may the attached principal be controller (its scopes and the list)? */
#define ngx_pty_auth_may_control(id)                                          \
    ((id)->right >= NGX_PTY_RIGHT_CONTROL                                     \
     && ((id)->scopes & NGX_PTY_SCOPE_CONTROL))

/* the access list a new session gets: its starter and pty_share */
ngx_int_t ngx_pty_auth_acl(ngx_http_request_t *r, ngx_str_t *acl);

/* a JSON refusal of an API call for a status ngx_pty_auth_check gave */
ngx_int_t ngx_pty_auth_api_refuse(ngx_http_request_t *r, ngx_int_t status);
/* the same refusal's status, code and message (audited), not sent */
ngx_uint_t ngx_pty_auth_refusal_words(ngx_http_request_t *r,
    ngx_int_t status, const char **code, const char **message);

/*
 * A refusal of an attach: for a pty-ws/v1 upgrade, when close codes are
 * on (pty_close_codes, or always from pty_refuse), the upgrade completes,
 * an Error frame says why and the close code follows; otherwise the HTTP
 * status with a JSON body.
 */
ngx_int_t ngx_pty_auth_refuse(ngx_http_request_t *r, ngx_pty_refuse_e why,
    ngx_uint_t close_codes);
ngx_pty_refuse_e ngx_pty_auth_refusal(ngx_int_t status);

/* a token in the query string: refused, whatever else authenticates */
ngx_uint_t ngx_pty_auth_token_in_query(ngx_http_request_t *r);

/* the label MembershipChanged shows: the principal, then the client's */
size_t ngx_pty_auth_label(ngx_pty_ident_t *id, u_char *label, size_t len,
    u_char *buf);

void ngx_pty_auth_trace(ngx_pty_ident_t *id, const char *trace, size_t len);
void ngx_pty_auth_touch(ngx_pty_ident_t *id, ngx_pty_session_sh_t *sh);

/* the member's principal, for revocation; caller holds the session lock */
void ngx_pty_auth_member(ngx_pty_member_t *m, ngx_pty_ident_t *id);

/* every live connection of the principal gets goodbye principal_revoked */
ngx_int_t ngx_pty_auth_revoke(ngx_str_t *principal, ngx_log_t *log,
    ngx_uint_t *connections);
/*
 * Revoked after this identity was made?  Cheap when no revocation came
 * since the last call.  Asked at a join under the session lock (revoke
 * writes its entry before it walks the members, so one of the two sees
 * the other), and by each pull of the ring (a client that fell behind
 * may never read its revoke frame).
 */
ngx_uint_t ngx_pty_auth_revoked(ngx_pty_ident_t *id);


#endif /* _NGX_PTY_AUTH_H_INCLUDED_ */

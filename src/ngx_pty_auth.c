
/*
 * Identity and access (docs/SECURITY.md, "Identity and access").
 *
 * nginx authenticates: auth_request in front of a location asks an auth
 * service, and auth_request_set copies its answer into variables.  This
 * file reads the principal and scopes from those (pty_principal,
 * pty_scopes), once per request: for a WebSocket that is the upgrade, and
 * the identity holds for the connection's life.
 *
 * A session's access list is written into its zone record before the
 * record is linked into the tables, and never changes: the principal that
 * started it, and what pty_share opens it to.  Every worker and every
 * location reads the same list, so a session cannot be reached through a
 * location with weaker rules than the one that started it: an anonymous
 * location (pty_auth off) is the principal "", which owns only the
 * sessions started anonymously.
 *
 * The list is a run of entries {type, length, bytes}: 'O' the owner,
 * 'p' / 'P' a principal that may observe / control, 's' / 'S' a scope
 * that may observe / control.
 */

#include "ngx_pty.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_audit.h"
#include "ngx_pty_api.h"
#include "ngx_pty_ws.h"
#include "ngx_pty_binding.h"
#include "ngx_pty_session.h"
#include "ngx_pty_util.h"


typedef struct {
    ngx_str_t                  name;
    ngx_uint_t                 bits;
} ngx_pty_scope_name_t;


typedef struct {
    ngx_uint_t                 status;
    ngx_uint_t                 error;        /* ngx_pty_error_e */
    ngx_uint_t                 close;
    const char                *code;         /* of the JSON answer */
    const char                *message;
} ngx_pty_refusal_t;


static ngx_pty_ident_t *ngx_pty_auth_find(ngx_http_request_t *r);
static void ngx_pty_auth_ident_marker(void *data);
static u_char *ngx_pty_auth_word(u_char *p, u_char *last, ngx_str_t *word);
static void ngx_pty_auth_make(ngx_http_request_t *r, ngx_pty_ident_t *id);
static ngx_uint_t ngx_pty_auth_scopes(ngx_str_t *text);
static ngx_uint_t ngx_pty_auth_has_scope(ngx_str_t *text, u_char *name,
    size_t len);
static void ngx_pty_auth_traceparent(ngx_http_request_t *r,
    ngx_pty_ident_t *id);
static ngx_int_t ngx_pty_auth_bearer(ngx_http_request_t *r, ngx_str_t *tok);
static ngx_int_t ngx_pty_auth_refuse_handler(ngx_http_request_t *r);
static ngx_int_t ngx_pty_auth_refuse_ws(ngx_http_request_t *r,
    ngx_pty_refusal_t *rf);
static void ngx_pty_auth_refuse_message(ngx_pty_ws_t *ws, u_char *data,
    size_t len);
static ngx_uint_t ngx_pty_auth_revoke_session(ngx_pty_session_sh_t *sh,
    ngx_str_t *principal);

static ngx_int_t ngx_pty_auth_var_bearer(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_pty_auth_var_principal(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_pty_auth_var_session(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_pty_auth_var_client(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_pty_auth_var_role(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_pty_auth_var_trace(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);


static ngx_pty_scope_name_t  ngx_pty_scope_names[] = {
    { ngx_string("pty:observe"), NGX_PTY_SCOPE_OBSERVE },
    /* controlling a terminal one cannot see makes no sense */
    { ngx_string("pty:control"), NGX_PTY_SCOPE_CONTROL|NGX_PTY_SCOPE_OBSERVE },
    { ngx_string("pty:start"), NGX_PTY_SCOPE_START },
    { ngx_string("pty:kill"), NGX_PTY_SCOPE_KILL },
    { ngx_string("pty:admin"), NGX_PTY_SCOPE_DEFAULT|NGX_PTY_SCOPE_ADMIN },
    /* not implied by admin: seeing secrets is asked for by name */
    { ngx_string("pty:reveal"), NGX_PTY_SCOPE_REVEAL },
    { ngx_null_string, 0 }
};


/* indexed by ngx_pty_refuse_e */
static ngx_pty_refusal_t  ngx_pty_refusals[] = {
    { NGX_HTTP_UNAUTHORIZED, NGX_PTY_ERR_UNAUTHENTICATED, 4401,
      "unauthenticated", "authentication is required" },
    { NGX_HTTP_FORBIDDEN, NGX_PTY_ERR_PERMISSION_DENIED, 4403,
      "permission_denied", "the principal's scopes do not allow this" },
    { NGX_HTTP_NOT_FOUND, NGX_PTY_ERR_TASK_NOT_FOUND, 4404,
      "unknown_session", "no such session" },
    { NGX_HTTP_TOO_MANY_REQUESTS, NGX_PTY_ERR_RATE_LIMITED, 4429,
      "rate_limited", "too many connections or requests" }
};


static ngx_conf_enum_t  ngx_pty_refuse_names[] = {
    { ngx_string("unauthenticated"), NGX_PTY_REFUSE_UNAUTHENTICATED },
    { ngx_string("permission_denied"), NGX_PTY_REFUSE_PERMISSION_DENIED },
    { ngx_string("not_found"), NGX_PTY_REFUSE_NOT_FOUND },
    { ngx_string("rate_limited"), NGX_PTY_REFUSE_RATE_LIMITED },
    { ngx_null_string, 0 }
};


static ngx_http_variable_t  ngx_pty_auth_vars[] = {

    { ngx_string("pty_bearer_token"), NULL, ngx_pty_auth_var_bearer,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("pty_principal"), NULL, ngx_pty_auth_var_principal,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("pty_session_id"), NULL, ngx_pty_auth_var_session,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("pty_client_id"), NULL, ngx_pty_auth_var_client,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("pty_role"), NULL, ngx_pty_auth_var_role,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("pty_trace_id"), NULL, ngx_pty_auth_var_trace,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


ngx_int_t
ngx_pty_auth_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_pty_auth_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/* pty_share observe|control principal=NAME|scope=NAME ... */
char *
ngx_pty_auth_share(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_loc_conf_t  *plcf = conf;

    ngx_str_t        *value;
    ngx_uint_t        i, right;
    ngx_pty_share_t  *sh;

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "observe") == 0) {
        right = NGX_PTY_RIGHT_OBSERVE;

    } else if (ngx_strcmp(value[1].data, "control") == 0) {
        right = NGX_PTY_RIGHT_CONTROL;

    } else {
        return "takes \"observe\" or \"control\" first";
    }

    if (plcf->share == NGX_CONF_UNSET_PTR) {
        plcf->share = ngx_array_create(cf->pool, 4, sizeof(ngx_pty_share_t));
        if (plcf->share == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    for (i = 2; i < cf->args->nelts; i++) {
        sh = ngx_array_push(plcf->share);
        if (sh == NULL) {
            return NGX_CONF_ERROR;
        }

        sh->right = right;

        if (ngx_strncmp(value[i].data, "principal=", 10) == 0) {
            sh->scope = 0;
            sh->name.data = value[i].data + 10;
            sh->name.len = value[i].len - 10;

        } else if (ngx_strncmp(value[i].data, "scope=", 6) == 0) {
            sh->scope = 1;
            sh->name.data = value[i].data + 6;
            sh->name.len = value[i].len - 6;

        } else {
            return "takes \"principal=name\" or \"scope=name\" entries";
        }

        if (sh->name.len == 0 || sh->name.len > NGX_PTY_PRINCIPAL_MAX) {
            return "takes names of 1 to 255 bytes";
        }
    }

    (void) cmd;

    return NGX_CONF_OK;
}


/* pty_refuse [unauthenticated|permission_denied|not_found|rate_limited] */
char *
ngx_pty_auth_refuse_set(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_loc_conf_t  *plcf = conf;

    ngx_str_t                 *value;
    ngx_conf_enum_t           *e;
    ngx_http_core_loc_conf_t  *clcf;

    if (plcf->refuse != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    /* from the status the error page was for (error_page without "=") */
    plcf->refuse = NGX_PTY_REFUSE_N;

    if (cf->args->nelts == 2) {
        value = cf->args->elts;

        for (e = ngx_pty_refuse_names; e->name.len; e++) {
            if (e->name.len == value[1].len
                && ngx_strcmp(e->name.data, value[1].data) == 0)
            {
                plcf->refuse = e->value;
                break;
            }
        }

        if (e->name.len == 0) {
            return "takes unauthenticated, permission_denied, not_found "
                   "or rate_limited";
        }
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_pty_auth_refuse_handler;

    (void) cmd;

    return NGX_CONF_OK;
}


/*
 * Closed by default: a location that reaches sessions says who may, with
 * pty_principal (auth_request in front), or says pty_auth off.
 */
ngx_int_t
ngx_pty_auth_merge(ngx_conf_t *cf, ngx_pty_loc_conf_t *prev,
    ngx_pty_loc_conf_t *conf)
{
    ngx_conf_merge_value(conf->auth, prev->auth, NGX_CONF_UNSET);
    ngx_conf_merge_ptr_value(conf->principal, prev->principal, NULL);
    ngx_conf_merge_ptr_value(conf->scopes, prev->scopes, NULL);
    ngx_conf_merge_ptr_value(conf->share, prev->share, NULL);
    ngx_conf_merge_value(conf->close_codes, prev->close_codes, 0);

    if (conf->refuse == NGX_CONF_UNSET_UINT) {
        conf->refuse = prev->refuse;
    }

    if (conf->handler != NGX_PTY_HANDLER_ATTACH
        && conf->handler != NGX_PTY_HANDLER_API
        && conf->handler != NGX_PTY_HANDLER_MCP)
    {
        return NGX_OK;
    }

    if (conf->auth == 0 || (conf->auth != 0 && conf->principal)) {
        return NGX_OK;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"%s\" in location \"%V\" has no authentication: "
                       "set \"pty_principal\" (with auth_request in front) "
                       "or say \"pty_auth off\"",
                       conf->handler == NGX_PTY_HANDLER_ATTACH
                       ? "pty_attach"
                       : conf->handler == NGX_PTY_HANDLER_MCP
                       ? "pty_mcp" : "pty_api",
                       &conf->handler_location);

    return NGX_ERROR;
}


ngx_pty_ident_t *
ngx_pty_auth_ident(ngx_http_request_t *r)
{
    ngx_pty_ident_t     *id;
    ngx_pool_cleanup_t  *cln;

    r = r->main;

    id = ngx_pty_auth_find(r);
    if (id) {
        return id;
    }

    cln = ngx_pool_cleanup_add(r->pool, sizeof(ngx_pty_ident_t));
    if (cln == NULL) {
        return NULL;
    }

    id = cln->data;
    ngx_memzero(id, sizeof(ngx_pty_ident_t));
    id->role = -1;
    id->since = ngx_pty_now_ms();

    ngx_pty_auth_make(r, id);

    cln->handler = ngx_pty_auth_ident_marker;

    return id;
}


/* kept as a do-nothing cleanup: any endpoint finds it, ctx stays free */
static ngx_pty_ident_t *
ngx_pty_auth_find(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t  *cln;

    for (cln = r->main->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_pty_auth_ident_marker) {
            return cln->data;
        }
    }

    return NULL;
}


static void
ngx_pty_auth_ident_marker(void *data)
{
    (void) data;
}


static void
ngx_pty_auth_make(ngx_http_request_t *r, ngx_pty_ident_t *id)
{
    u_char              *p, *last;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    ngx_pty_auth_traceparent(r, id);

    if (plcf->auth == 0) {
        id->anonymous = 1;
        id->scopes = NGX_PTY_SCOPE_DEFAULT;
        ngx_str_set(&id->principal, "");
        return;
    }

    id->status = NGX_HTTP_UNAUTHORIZED;

    if (plcf->principal == NULL
        || ngx_http_complex_value(r, plcf->principal, &id->principal)
           != NGX_OK)
    {
        ngx_str_null(&id->principal);
        return;
    }

    if (id->principal.len == 0 || id->principal.len > NGX_PTY_PRINCIPAL_MAX) {
        return;
    }

    last = id->principal.data + id->principal.len;

    /*
     * A principal is a name: nothing that could end a line or a field,
     * and UTF-8, for it goes into text frames (MembershipChanged), which
     * a browser drops its connection over if they are not
     */
    for (p = id->principal.data; p < last; /* void */) {
        if (*p >= 0x80) {
            if (ngx_utf8_decode(&p, last - p) > 0x10ffff) {
                return;
            }

            continue;
        }

        if (*p < 0x20 || *p == 0x7f) {
            return;
        }

        p++;
    }

    if (plcf->scopes == NULL) {
        id->scopes = NGX_PTY_SCOPE_DEFAULT;

    } else {
        if (ngx_http_complex_value(r, plcf->scopes, &id->scope_text)
            != NGX_OK)
        {
            return;
        }

        id->scopes = ngx_pty_auth_scopes(&id->scope_text);
    }

    id->status = 0;
}


/*
 * The next word of a list separated by blanks or commas (scopes, as
 * OAuth2 and JWTs write them; subprotocols): NULL when none is left.
 */
static u_char *
ngx_pty_auth_word(u_char *p, u_char *last, ngx_str_t *word)
{
    while (p < last && (*p == ' ' || *p == ',' || *p == '\t')) {
        p++;
    }

    if (p == last) {
        return NULL;
    }

    word->data = p;

    while (p < last && *p != ' ' && *p != ',' && *p != '\t') {
        p++;
    }

    word->len = p - word->data;

    return p;
}


static ngx_uint_t
ngx_pty_auth_scopes(ngx_str_t *text)
{
    u_char                *p, *last;
    ngx_str_t              w;
    ngx_uint_t             bits;
    ngx_pty_scope_name_t  *s;

    bits = 0;
    p = text->data;
    last = p + text->len;

    while ((p = ngx_pty_auth_word(p, last, &w)) != NULL) {
        for (s = ngx_pty_scope_names; s->name.len; s++) {
            if (w.len == s->name.len
                && ngx_strncmp(w.data, s->name.data, w.len) == 0)
            {
                bits |= s->bits;
            }
        }
    }

    return bits;
}


static ngx_uint_t
ngx_pty_auth_has_scope(ngx_str_t *text, u_char *name, size_t len)
{
    u_char     *p, *last;
    ngx_str_t   w;

    p = text->data;
    last = p + text->len;

    while ((p = ngx_pty_auth_word(p, last, &w)) != NULL) {
        if (w.len == len && ngx_strncmp(w.data, name, len) == 0) {
            return 1;
        }
    }

    return 0;
}


/* W3C traceparent: 00-<trace id>-<parent id>-<flags>; the trace id */
static void
ngx_pty_auth_traceparent(ngx_http_request_t *r, ngx_pty_ident_t *id)
{
    u_char           *p;
    ngx_uint_t        i;
    ngx_table_elt_t  *h;

    h = ngx_pty_ws_header(r, "traceparent");

    if (h == NULL || h->value.len < 55 || h->value.data[2] != '-'
        || h->value.data[35] != '-')
    {
        return;
    }

    p = h->value.data + 3;

    for (i = 0; i < 32; i++) {
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) {
            return;
        }
    }

    ngx_pty_auth_trace(id, (char *) p, 32);
}


void
ngx_pty_auth_trace(ngx_pty_ident_t *id, const char *trace, size_t len)
{
    id->trace_len = ngx_min(len, NGX_PTY_TRACE_MAX);
    ngx_memcpy(id->trace_id, trace, id->trace_len);
}


void
ngx_pty_auth_touch(ngx_pty_ident_t *id, ngx_pty_session_sh_t *sh)
{
    ngx_memcpy(id->session_id, sh->id, NGX_PTY_ID_LEN);
    id->session_name = sh->name;
}


ngx_uint_t
ngx_pty_auth_right(ngx_pty_ident_t *id, ngx_pty_session_sh_t *sh)
{
    u_char      *p, *last, *name;
    size_t       len;
    ngx_uint_t   right, r;

    if (id->status) {
        return NGX_PTY_RIGHT_NONE;
    }

    if (id->scopes & NGX_PTY_SCOPE_ADMIN) {
        return NGX_PTY_RIGHT_OWNER;
    }

    right = NGX_PTY_RIGHT_NONE;

    /* written before the record was linked, never changed: no lock */
    p = sh->acl;
    last = p + sh->acl_len;

    while (last - p >= 2) {
        name = p + 2;
        len = p[1];

        if ((size_t) (last - name) < len) {
            break;
        }

        switch (p[0]) {

        case 'O':
        case 'p':
        case 'P':
            r = (p[0] == 'O') ? NGX_PTY_RIGHT_OWNER
                : (p[0] == 'P') ? NGX_PTY_RIGHT_CONTROL
                                : NGX_PTY_RIGHT_OBSERVE;

            if (id->principal.len == len
                && ngx_strncmp(id->principal.data, name, len) == 0)
            {
                right = ngx_max(right, r);
            }

            break;

        default: /* 's', 'S' */
            r = (p[0] == 'S') ? NGX_PTY_RIGHT_CONTROL : NGX_PTY_RIGHT_OBSERVE;

            if (!id->anonymous
                && ngx_pty_auth_has_scope(&id->scope_text, name, len))
            {
                right = ngx_max(right, r);
            }
        }

        p = name + len;
    }

    return right;
}


ngx_int_t
ngx_pty_auth_check(ngx_http_request_t *r, ngx_pty_session_sh_t *sh,
    ngx_uint_t scope)
{
    ngx_uint_t        right, need;
    ngx_pty_ident_t  *id;

    id = ngx_pty_auth_ident(r);
    if (id == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (id->status) {
        return NGX_HTTP_UNAUTHORIZED;
    }

    right = NGX_PTY_RIGHT_OWNER;

    if (sh) {
        right = ngx_pty_auth_right(id, sh);

        if (right == NGX_PTY_RIGHT_NONE) {
            return NGX_HTTP_NOT_FOUND;
        }

        ngx_pty_auth_touch(id, sh);
        id->right = right;
    }

    if ((id->scopes & scope) != scope) {
        return NGX_HTTP_FORBIDDEN;
    }

    need = (scope & (NGX_PTY_SCOPE_KILL|NGX_PTY_SCOPE_ADMIN))
           ? NGX_PTY_RIGHT_OWNER
           : (scope & NGX_PTY_SCOPE_CONTROL) ? NGX_PTY_RIGHT_CONTROL
                                             : NGX_PTY_RIGHT_OBSERVE;

    return (right >= need) ? NGX_OK : NGX_HTTP_FORBIDDEN;
}


/* the list of a session started by this request */
ngx_int_t
ngx_pty_auth_acl(ngx_http_request_t *r, ngx_str_t *acl)
{
    u_char              *p;
    size_t               len;
    ngx_uint_t           i, n;
    ngx_pty_share_t     *share;
    ngx_pty_ident_t     *id;
    ngx_pty_loc_conf_t  *plcf;

    id = ngx_pty_auth_ident(r);
    if (id == NULL) {
        return NGX_ERROR;
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);
    share = plcf->share ? plcf->share->elts : NULL;
    n = plcf->share ? plcf->share->nelts : 0;

    len = 2 + id->principal.len;

    for (i = 0; i < n; i++) {
        len += 2 + share[i].name.len;
    }

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    acl->data = p;
    acl->len = len;

    *p++ = 'O';
    *p++ = (u_char) id->principal.len;
    p = ngx_cpymem(p, id->principal.data, id->principal.len);

    for (i = 0; i < n; i++) {
        *p++ = share[i].scope
               ? (share[i].right == NGX_PTY_RIGHT_CONTROL ? 'S' : 's')
               : (share[i].right == NGX_PTY_RIGHT_CONTROL ? 'P' : 'p');
        *p++ = (u_char) share[i].name.len;
        p = ngx_cpymem(p, share[i].name.data, share[i].name.len);
    }

    return NGX_OK;
}


ngx_pty_refuse_e
ngx_pty_auth_refusal(ngx_int_t status)
{
    switch (status) {

    case NGX_HTTP_UNAUTHORIZED:
        return NGX_PTY_REFUSE_UNAUTHENTICATED;

    case NGX_HTTP_NOT_FOUND:
        return NGX_PTY_REFUSE_NOT_FOUND;

    case NGX_HTTP_TOO_MANY_REQUESTS:
    case NGX_HTTP_SERVICE_UNAVAILABLE:      /* limit_conn's default */
        return NGX_PTY_REFUSE_RATE_LIMITED;

    default:
        return NGX_PTY_REFUSE_PERMISSION_DENIED;
    }
}


ngx_int_t
ngx_pty_auth_api_refuse(ngx_http_request_t *r, ngx_int_t status)
{
    ngx_pty_refusal_t  *rf;

    if (status == NGX_HTTP_INTERNAL_SERVER_ERROR) {
        return status;
    }

    rf = &ngx_pty_refusals[ngx_pty_auth_refusal(status)];

    /* the client cannot tell a hidden session from none; the log can */
    ngx_pty_audit_request(r, "denied", rf->code);

    if (rf->status == NGX_HTTP_UNAUTHORIZED
        && ngx_pty_ws_add_header(r, "WWW-Authenticate", "Bearer", 6)
           != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_pty_api_error(r, rf->status, rf->code, rf->message);
}


ngx_uint_t
ngx_pty_auth_refusal_words(ngx_http_request_t *r, ngx_int_t status,
    const char **code, const char **message)
{
    ngx_pty_refusal_t  *rf;

    rf = &ngx_pty_refusals[ngx_pty_auth_refusal(status)];

    ngx_pty_audit_request(r, "denied", rf->code);

    *code = rf->code;
    *message = rf->message;

    return rf->status;
}


ngx_int_t
ngx_pty_auth_refuse(ngx_http_request_t *r, ngx_pty_refuse_e why,
    ngx_uint_t close_codes)
{
    ngx_int_t           rc;
    ngx_pty_refusal_t  *rf;

    rf = &ngx_pty_refusals[why];

    ngx_pty_audit_request(r, "attach_denied", rf->code);

    if (close_codes) {
        rc = ngx_pty_auth_refuse_ws(r, rf);

        if (rc == NGX_DONE || rc == NGX_ERROR) {
            return rc;
        }
    }

    if (rf->status == NGX_HTTP_UNAUTHORIZED
        && ngx_pty_ws_add_header(r, "WWW-Authenticate", "Bearer", 6)
           != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_pty_api_error(r, rf->status, rf->code, rf->message);
}


/*
 * A browser cannot read the status of a refused upgrade: the upgrade
 * completes, an Error frame says why, and the close code follows.  Not a
 * pty-ws/v1 upgrade: NGX_DECLINED, for the HTTP answer.
 */
static ngx_int_t
ngx_pty_auth_refuse_ws(ngx_http_request_t *r, ngx_pty_refusal_t *rf)
{
    u_char              *p;
    ngx_pty_ws_t        *ws;
    ngx_pty_loc_conf_t  *plcf;
    u_char               buf[1024];

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    ws = ngx_pcalloc(r->pool, sizeof(ngx_pty_ws_t));
    if (ws == NULL) {
        return NGX_ERROR;
    }

    ws->on_message = ngx_pty_auth_refuse_message;
    ws->max_message = 4096;
    ws->send_limit = plcf->ws_send_buffer;
    ws->send_frames = plcf->ws_send_frames;
    ws->ping_interval = plcf->ws_ping_interval;
    ws->pong_timeout = plcf->ws_pong_timeout;

    /* an error page's status would replace the 101 */
    r->err_status = 0;

    ngx_http_set_ctx(r, ws, ngx_pty_module);

    if (ngx_pty_ws_handshake(r, ws) != NGX_OK) {
        ngx_http_set_ctx(r, NULL, ngx_pty_module);
        return NGX_DECLINED;
    }

    ngx_pty_ws_start(ws);

    p = ngx_pty_binding_error_json(buf, NULL, rf->error, rf->message);

    if (ngx_pty_ws_reply(ws, buf, p - buf) != NGX_OK) {
        ngx_pty_ws_finalize(ws);
        return NGX_DONE;
    }

    ngx_pty_ws_close(ws, rf->close, rf->code);

    return NGX_DONE;
}


/* a refused connection's frames are not read */
static void
ngx_pty_auth_refuse_message(ngx_pty_ws_t *ws, u_char *data, size_t len)
{
    (void) ws;
    (void) data;
    (void) len;
}


/*
 * pty_refuse: where error_page sends a refused upgrade (auth_request's
 * 401 or 403, limit_conn's or limit_req's refusal).
 */
static ngx_int_t
ngx_pty_auth_refuse_handler(ngx_http_request_t *r)
{
    ngx_uint_t           why;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    why = plcf->refuse;

    if (why == NGX_PTY_REFUSE_N) {
        why = ngx_pty_auth_refusal(r->err_status ? r->err_status
                                                 : NGX_HTTP_UNAUTHORIZED);
    }

    return ngx_pty_auth_refuse(r, why, 1);
}


/* access_token=, token=, bearer=...: tokens must never ride in the URL */
ngx_uint_t
ngx_pty_auth_token_in_query(ngx_http_request_t *r)
{
    ngx_str_t          value;
    ngx_uint_t         i;
    static ngx_str_t   names[] = {
        ngx_string("access_token"), ngx_string("token"),
        ngx_string("bearer"), ngx_string("id_token"),
        ngx_string("auth"), ngx_string("authorization"),
        ngx_null_string
    };

    if (r->args.len == 0) {
        return 0;
    }

    for (i = 0; names[i].len; i++) {
        if (ngx_http_arg(r, names[i].data, names[i].len, &value) == NGX_OK) {
            return 1;
        }
    }

    return 0;
}


/*
 * The principal, then the client's own label in parentheses, cut to
 * NGX_PTY_LABEL_MAX characters (the schema's limit) on a character
 * boundary; without authentication the client's label as it is.
 */
size_t
ngx_pty_auth_label(ngx_pty_ident_t *id, u_char *label, size_t len,
    u_char *buf)
{
    u_char      *p, *q, *end;
    ngx_uint_t   chars;

    if (id == NULL || id->anonymous) {
        ngx_memcpy(buf, label, len);
        return len;
    }

    /* the principal's bytes are cut at 255; a label holds 128 characters */
    p = ngx_cpymem(buf, id->principal.data, id->principal.len);

    if (len) {
        p = ngx_cpymem(p, " (", 2);
        p = ngx_cpymem(p, label, ngx_min(len, NGX_PTY_LABEL_MAX * 4 - 260));
        *p++ = ')';
    }

    end = p;
    chars = 0;

    for (q = buf; q < end; q++) {
        if ((*q & 0xc0) != 0x80 && chars++ == NGX_PTY_LABEL_MAX) {
            return q - buf;
        }
    }

    return end - buf;
}


void
ngx_pty_auth_member(ngx_pty_member_t *m, ngx_pty_ident_t *id)
{
    m->principal_len = ngx_min(id->principal.len, sizeof(m->principal));
    ngx_memcpy(m->principal, id->principal.data, m->principal_len);
}


/*
 * Each session's members of that principal get a frame in the ring
 * targeted at them: their worker, wherever it is, is rung as for any
 * frame, and its walk ends them with binding_goodbye principal_revoked.
 */
ngx_int_t
ngx_pty_auth_revoke(ngx_str_t *principal, ngx_log_t *log,
    ngx_uint_t *connections)
{
    ngx_uint_t              i, n;
    ngx_queue_t            *q;
    ngx_pty_zone_t         *zone;
    ngx_pty_revoked_t      *rv;
    ngx_pty_session_sh_t  **all, *sh;

    zone = ngx_pty_shm_zone();
    *connections = 0;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* for connections that have not joined yet, or fell behind */
    rv = &zone->sh->revoked[zone->sh->revoked_next % NGX_PTY_REVOKED_MAX];
    rv->seq++;
    ngx_memory_barrier();
    rv->at = ngx_pty_now_ms();
    rv->len = ngx_min(principal->len, sizeof(rv->principal));
    ngx_memcpy(rv->principal, principal->data, rv->len);
    ngx_memory_barrier();
    rv->seq++;
    ngx_memory_barrier();
    zone->sh->revoked_next++;

    n = zone->sh->live;
    all = ngx_alloc((n + 1) * sizeof(ngx_pty_session_sh_t *), log);

    if (all == NULL) {
        ngx_shmtx_unlock(&zone->shpool->mutex);
        return NGX_ERROR;
    }

    i = 0;

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions) && i < n;
         q = ngx_queue_next(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);
        ngx_pty_shm_session_retain(sh);
        all[i++] = sh;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    n = i;

    for (i = 0; i < n; i++) {
        *connections += ngx_pty_auth_revoke_session(all[i], principal);
        ngx_pty_shm_session_release(all[i]);
    }

    ngx_free(all);

    return NGX_OK;
}


ngx_uint_t
ngx_pty_auth_revoked(ngx_pty_ident_t *id)
{
    ngx_uint_t          i, seq, match;
    ngx_atomic_uint_t   next;
    ngx_pty_zone_t     *zone;
    ngx_pty_revoked_t  *rv;

    zone = ngx_pty_shm_zone();

    if (zone == NULL || id->anonymous || id->revoked) {
        return id->revoked;
    }

    next = zone->sh->revoked_next;

    if (next == id->revoked_seen) {
        return 0;
    }

    ngx_memory_barrier();

    for (i = 0; i < NGX_PTY_REVOKED_MAX; i++) {
        rv = &zone->sh->revoked[i];

        seq = rv->seq;
        if (seq & 1) {
            /* being written: counted in revoked_next when it is done */
            continue;
        }

        ngx_memory_barrier();

        match = (rv->at >= id->since && rv->len == id->principal.len
                 && ngx_memcmp(rv->principal, id->principal.data, rv->len)
                    == 0);

        ngx_memory_barrier();

        if (match && rv->seq == seq) {
            id->revoked = 1;
            return 1;
        }
    }

    id->revoked_seen = next;

    return 0;
}


static ngx_uint_t
ngx_pty_auth_revoke_session(ngx_pty_session_sh_t *sh, ngx_str_t *principal)
{
    ngx_uint_t          n;
    ngx_queue_t        *q;
    ngx_pty_member_t   *m;
    ngx_pty_session_t  *s;

    n = 0;

    ngx_pty_shm_lock(sh);

    for (q = ngx_queue_head(&sh->members);
         q != ngx_queue_sentinel(&sh->members);
         q = ngx_queue_next(q))
    {
        m = ngx_queue_data(q, ngx_pty_member_t, queue);

        if (m->principal_len == principal->len
            && ngx_strncmp(m->principal, principal->data, principal->len) == 0)
        {
            /*
             * The frame ends it at once; when the ring has no room, the
             * wake-up below makes its pull find the revocation table
             */
            (void) ngx_pty_ring_append(sh, NGX_PTY_FRAME_REVOKE,
                                       m->client_id, (u_char *) "{}", 2);
            n++;
        }
    }

    ngx_pty_shm_unlock(sh);

    if (n == 0) {
        return 0;
    }

    s = ngx_pty_session_get(sh);
    if (s) {
        ngx_pty_session_notify(s);
        ngx_pty_session_put(s);
    }

    return n;
}


/* Authorization: Bearer <token>, else Sec-WebSocket-Protocol bearer.<b64> */
static ngx_int_t
ngx_pty_auth_bearer(ngx_http_request_t *r, ngx_str_t *tok)
{
    u_char           *p, *last;
    ngx_str_t         src;
    ngx_table_elt_t  *h;

    h = r->headers_in.authorization;

    if (h && h->value.len > 7
        && ngx_strncasecmp(h->value.data, (u_char *) "Bearer ", 7) == 0)
    {
        tok->data = h->value.data + 7;
        tok->len = h->value.len - 7;

        while (tok->len && tok->data[0] == ' ') {
            tok->data++;
            tok->len--;
        }

        return tok->len ? NGX_OK : NGX_DECLINED;
    }

    h = ngx_pty_ws_header(r, "Sec-WebSocket-Protocol");
    if (h == NULL) {
        return NGX_DECLINED;
    }

    p = h->value.data;
    last = p + h->value.len;

    while ((p = ngx_pty_auth_word(p, last, &src)) != NULL) {

        if (src.len <= 7 || ngx_strncmp(src.data, "bearer.", 7) != 0) {
            continue;
        }

        src.data += 7;
        src.len -= 7;

        tok->data = ngx_pnalloc(r->pool, ngx_base64_decoded_length(src.len));
        if (tok->data == NULL) {
            return NGX_ERROR;
        }

        if (ngx_decode_base64url(tok, &src) != NGX_OK || tok->len == 0) {
            return NGX_DECLINED;
        }

        /*
         * Decoded, it can hold any byte; proxy_set_header would write a
         * CR LF in it into the auth subrequest as another header, or as
         * another request.  A token is visible ASCII (RFC 6750 b64token).
         */
        for (p = tok->data; p < tok->data + tok->len; p++) {
            if (*p <= 0x20 || *p >= 0x7f) {
                return NGX_DECLINED;
            }
        }

        return NGX_OK;
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_pty_auth_var_str(ngx_http_variable_value_t *v, u_char *data, size_t len)
{
    if (len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->data = data;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_pty_auth_var_bearer(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_int_t  rc;
    ngx_str_t  tok;

    (void) data;

    rc = ngx_pty_auth_bearer(r, &tok);

    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    return ngx_pty_auth_var_str(v, tok.data, rc == NGX_OK ? tok.len : 0);
}


static ngx_int_t
ngx_pty_auth_var_principal(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_pty_ident_t  *id;

    (void) data;

    id = ngx_pty_auth_find(r);

    if (id == NULL || id->status) {
        return ngx_pty_auth_var_str(v, NULL, 0);
    }

    return ngx_pty_auth_var_str(v, id->principal.data, id->principal.len);
}


static ngx_int_t
ngx_pty_auth_var_session(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_pty_ident_t  *id;

    (void) data;

    id = ngx_pty_auth_find(r);

    if (id == NULL || id->session_name == 0) {
        return ngx_pty_auth_var_str(v, NULL, 0);
    }

    return ngx_pty_auth_var_str(v, id->session_id, NGX_PTY_ID_LEN);
}


static ngx_int_t
ngx_pty_auth_var_client(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char           *p;
    ngx_pty_ident_t  *id;

    (void) data;

    id = ngx_pty_auth_find(r);

    if (id == NULL || id->client_id == 0) {
        return ngx_pty_auth_var_str(v, NULL, 0);
    }

    p = ngx_pnalloc(r->pool, sizeof("c-4294967295") - 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    return ngx_pty_auth_var_str(v, p,
                                ngx_sprintf(p, "c-%uD", id->client_id) - p);
}


static ngx_int_t
ngx_pty_auth_var_role(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_pty_ident_t  *id;

    (void) data;

    id = ngx_pty_auth_find(r);

    if (id == NULL || id->role < 0) {
        return ngx_pty_auth_var_str(v, NULL, 0);
    }

    if (id->role == NGX_PTY_ROLE_CONTROLLER) {
        return ngx_pty_auth_var_str(v, (u_char *) "controller", 10);
    }

    return ngx_pty_auth_var_str(v, (u_char *) "observer", 8);
}


static ngx_int_t
ngx_pty_auth_var_trace(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_pty_ident_t  *id;

    (void) data;

    id = ngx_pty_auth_find(r);

    if (id == NULL) {
        return ngx_pty_auth_var_str(v, NULL, 0);
    }

    return ngx_pty_auth_var_str(v, id->trace_id, id->trace_len);
}

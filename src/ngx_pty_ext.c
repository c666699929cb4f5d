
/*
 * pty-extensions/v1: verbs, roles, membership, session frames.
 */

#include "ngx_pty.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_a2a.h"
#include "ngx_pty_replay.h"
#include "ngx_pty_util.h"
#include "ngx_pty_audit.h"


#define NGX_PTY_KEYFRAME_RATE  1000     /* ms between requested keyframes */
#define NGX_PTY_EXT_OP_COST    1024     /* a resize or role change, counted
                                           as input bytes */


/* a join_session, from its arguments to its admission */
typedef struct {
    u_char                    *label;
    size_t                     label_len;
    json_t                    *replay;       /* replay_from, or NULL */
    ngx_uint_t                 want;         /* the role asked, then given */
    ngx_uint_t                 cols;         /* 0: not given */
    ngx_uint_t                 rows;
    ngx_uint_t                 first_controller;
    ngx_uint_t                 downgraded;
    ngx_pty_frame_t           *ra;           /* its RoleAssigned */
    ngx_uint_t                 closed_copy;  /* ended, Closed not walked */
    ngx_uint_t                 archive;      /* replays from the archive */
    uint64_t                   archive_from;
    u_char                     reason[96];   /* of a downgrade */
    u_char                     label_buf[NGX_PTY_LABEL_MAX * 4];
} ngx_pty_ext_join_t;


/* why a join was refused under the lock; answered once it is released */
typedef enum {
    NGX_PTY_JOIN_ADMITTED = 0,
    NGX_PTY_JOIN_OBSERVER_LIMIT,
    NGX_PTY_JOIN_ZONE_FULL,
    NGX_PTY_JOIN_UNRECORDED
} ngx_pty_ext_admit_e;


static void ngx_pty_ext_join(ngx_pty_client_t *cl, json_t *msg, json_t *id);
static ngx_int_t ngx_pty_ext_join_args(ngx_pty_client_t *cl, json_t *msg,
    json_t *id, ngx_pty_ext_join_t *j);
static ngx_pty_ext_admit_e ngx_pty_ext_admit_locked(ngx_pty_client_t *cl,
    ngx_pty_ext_join_t *j);
static void ngx_pty_ext_join_refused(ngx_pty_client_t *cl, json_t *id,
    ngx_pty_ext_admit_e rc);
static ngx_uint_t ngx_pty_ext_cursor_locked(ngx_pty_client_t *cl,
    ngx_pty_ext_join_t *j);
static ngx_uint_t ngx_pty_ext_closed_ahead(ngx_pty_ring_t *ring,
    uint64_t off);
static void ngx_pty_ext_joined(ngx_pty_client_t *cl, json_t *id,
    ngx_pty_ext_join_t *j, ngx_uint_t out_of_range);
static void ngx_pty_ext_leave(ngx_pty_client_t *cl, json_t *id);
static void ngx_pty_ext_input(ngx_pty_client_t *cl, json_t *payload,
    json_t *id);
static void ngx_pty_ext_resize(ngx_pty_client_t *cl, json_t *payload,
    json_t *id);
static void ngx_pty_ext_request_role(ngx_pty_client_t *cl, json_t *payload,
    json_t *id);
static void ngx_pty_ext_request_keyframe(ngx_pty_client_t *cl, json_t *id);
static void ngx_pty_ext_keyframe_handler(ngx_event_t *ev);
static ngx_int_t ngx_pty_ext_cells(ngx_pty_client_t *cl, json_t *id,
    ngx_uint_t cols, ngx_uint_t rows);
static ngx_pty_frame_t *ngx_pty_ext_role_frame(ngx_pty_client_t *cl,
    ngx_uint_t downgraded, const char *reason);
static ngx_pty_frame_t *ngx_pty_ext_membership_locked(
    ngx_pty_session_sh_t *sh, ngx_log_t *log);
static ngx_int_t ngx_pty_ext_payload_keys(json_t *payload,
    const char **allowed);
static void ngx_pty_ext_remove_member(ngx_pty_client_t *cl, uint64_t *seq);
static void ngx_pty_ext_audit_join(ngx_pty_client_t *cl,
    ngx_pty_ext_join_t *j, ngx_uint_t out_of_range);


#define ngx_pty_ext_role_name(role)                                           \
    ((role) == NGX_PTY_ROLE_CONTROLLER ? "controller" : "observer")


/* an A2A-Extensions header naming pty-extensions/v1 */
ngx_uint_t
ngx_pty_ext_requested(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {
        if (i >= part->nelts) {
            if (part->next == NULL) {
                return 0;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == sizeof("A2A-Extensions") - 1
            && ngx_strncasecmp(h[i].key.data, (u_char *) "A2A-Extensions",
                               h[i].key.len) == 0
            && ngx_strlcasestrn(h[i].value.data,
                                h[i].value.data + h[i].value.len,
                                (u_char *) NGX_PTY_EXT_URI,
                                sizeof(NGX_PTY_EXT_URI) - 2))
        {
            return 1;
        }
    }
}


void
ngx_pty_ext_dispatch(ngx_pty_client_t *cl, json_t *msg, const char *op,
    json_t *id)
{
    json_t  *payload;

    if (!cl->ext_active) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_UNSUPPORTED_OPERATION,
                              "pty-extensions/v1 is not activated on this "
                              "connection");
        return;
    }

    payload = json_object_get(msg, "payload");

    if (ngx_strcmp(op, "pty.join_session") == 0) {
        ngx_pty_ext_join(cl, msg, id);
        return;
    }

    if (ngx_strcmp(op, "pty.leave_session") != 0
        && ngx_strcmp(op, "pty.session_input") != 0
        && ngx_strcmp(op, "pty.session_resize") != 0
        && ngx_strcmp(op, "pty.request_role") != 0
        && ngx_strcmp(op, "pty.request_keyframe") != 0)
    {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_UNSUPPORTED_OPERATION,
                              "unknown pty-extensions/v1 operation");
        return;
    }

    if (!cl->joined || cl->leaving) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "join the session first");
        return;
    }

    if (ngx_strcmp(op, "pty.session_input") == 0) {
        ngx_pty_ext_input(cl, payload, id);

    } else if (ngx_strcmp(op, "pty.leave_session") == 0) {
        ngx_pty_ext_leave(cl, id);

    } else if (ngx_strcmp(op, "pty.session_resize") == 0) {
        /* puts frames in the ring for everyone: paced as input */
        if (ngx_pty_ext_paced(cl, id, NGX_PTY_EXT_OP_COST) == NGX_OK) {
            ngx_pty_ext_resize(cl, payload, id);
        }

    } else if (ngx_strcmp(op, "pty.request_role") == 0) {
        if (ngx_pty_ext_paced(cl, id, NGX_PTY_EXT_OP_COST) == NGX_OK) {
            ngx_pty_ext_request_role(cl, payload, id);
        }

    } else {
        ngx_pty_ext_request_keyframe(cl, id);
    }
}


static ngx_int_t
ngx_pty_ext_payload_keys(json_t *payload, const char **allowed)
{
    json_t       *v;
    ngx_uint_t    i;
    const char   *key;

    if (payload == NULL || json_is_null(payload)) {
        return NGX_OK;
    }

    json_object_foreach(payload, key, v) {
        for (i = 0; allowed[i]; i++) {
            if (ngx_strcmp(key, allowed[i]) == 0) {
                break;
            }
        }

        if (allowed[i] == NULL) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* a JSON integer in [1, 1024], or absent (then *v is left alone) */
static ngx_int_t
ngx_pty_ext_size(json_t *payload, const char *name, ngx_uint_t *v,
    ngx_uint_t required)
{
    json_t  *j;

    j = json_object_get(payload, name);

    if (j == NULL) {
        return required ? NGX_ERROR : NGX_OK;
    }

    if (!json_is_integer(j) || json_integer_value(j) < 1
        || json_integer_value(j) > NGX_PTY_MAX_SIZE)
    {
        return NGX_ERROR;
    }

    *v = (ngx_uint_t) json_integer_value(j);

    return NGX_OK;
}


/* a size the screen models may take (pty_max_cells); refused here if not */
static ngx_int_t
ngx_pty_ext_cells(ngx_pty_client_t *cl, json_t *id, ngx_uint_t cols,
    ngx_uint_t rows)
{
    u_char  msg[128];

    if (cols * rows <= cl->conf->max_cells) {
        return NGX_OK;
    }

    ngx_log_error(NGX_LOG_NOTICE, cl->ws.connection->log, 0,
                  "pty: client c-%uD asked for %uix%ui on session pty-%ui, "
                  "above \"pty_max_cells\" %ui", cl->client_id, cols, rows,
                  cl->session->sh->name, cl->conf->max_cells);

    ngx_sprintf(msg, "cols x rows (%ui) is above the server's limit of "
                "%ui cells%Z", cols * rows, cl->conf->max_cells);

    ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST, (char *) msg);

    return NGX_ERROR;
}


static ngx_int_t
ngx_pty_ext_role(ngx_pty_client_t *cl, json_t *role, json_t *id,
    ngx_uint_t *want)
{
    if (ngx_strcmp(json_string_value(role), "controller") == 0) {
        *want = NGX_PTY_ROLE_CONTROLLER;
        return NGX_OK;
    }

    if (ngx_strcmp(json_string_value(role), "observer") == 0) {
        *want = NGX_PTY_ROLE_OBSERVER;
        return NGX_OK;
    }

    ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                          "role is \"controller\" or \"observer\"");

    return NGX_ERROR;
}


static ngx_int_t
ngx_pty_ext_label(json_t *j, u_char **label, size_t *len)
{
    u_char      *p;
    size_t       n, chars;

    *label = (u_char *) "";
    *len = 0;

    if (j == NULL) {
        return NGX_OK;
    }

    if (!json_is_string(j)) {
        return NGX_ERROR;
    }

    p = (u_char *) json_string_value(j);
    n = json_string_length(j);

    for (chars = 0; n--; p++) {
        chars += ((*p & 0xc0) != 0x80);
    }

    if (chars > NGX_PTY_LABEL_MAX) {
        return NGX_ERROR;
    }

    *label = (u_char *) json_string_value(j);
    *len = json_string_length(j);

    return NGX_OK;
}


/*
 * Arguments, admission under the session lock, the ring walk's start,
 * then what follows a join outside the lock.
 */
static void
ngx_pty_ext_join(ngx_pty_client_t *cl, json_t *msg, json_t *id)
{
    ngx_uint_t             out_of_range;
    ngx_pty_ext_admit_e    rc;
    ngx_pty_ext_join_t     j;
    ngx_pty_session_sh_t  *sh;

    if (cl->joined) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "already joined; leave first");
        return;
    }

    if (ngx_pty_ext_join_args(cl, msg, id, &j) != NGX_OK) {
        return;
    }

    sh = cl->session->sh;

    ngx_pty_shm_lock(sh);

    /*
     * Revoked while attached, before it joined.  Under the lock: a revoke
     * that walks this session's members after this join sees it among
     * them; one that walked before wrote its entry before
     */
    if (ngx_pty_auth_revoked(cl->ident)) {
        ngx_pty_shm_unlock(sh);
        ngx_pty_binding_goodbye(cl, "principal_revoked", NULL);
        return;
    }

    rc = ngx_pty_ext_admit_locked(cl, &j);

    if (rc != NGX_PTY_JOIN_ADMITTED) {
        ngx_pty_shm_unlock(sh);
        ngx_pty_ext_join_refused(cl, id, rc);
        return;
    }

    out_of_range = ngx_pty_ext_cursor_locked(cl, &j);

    ngx_pty_shm_unlock(sh);

    cl->ident->role = cl->role;
    ngx_pty_ext_audit_join(cl, &j, out_of_range);

    ngx_pty_ext_joined(cl, id, &j, out_of_range);
}


/* every attach is a potential disclosure (extension section 10.3) */
static void
ngx_pty_ext_audit_join(ngx_pty_client_t *cl, ngx_pty_ext_join_t *j,
    ngx_uint_t out_of_range)
{
    if (!ngx_pty_audit_on()) {
        return;
    }

    ngx_pty_audit(cl->ident, cl->ws.connection, "attach",
                  "\"role\":\"%s\",\"downgraded\":%s",
                  ngx_pty_ext_role_name(cl->role),
                  j->downgraded ? "true" : "false");

    if (j->replay && json_is_integer(j->replay)) {
        ngx_pty_audit(cl->ident, cl->ws.connection, "replay",
                      "\"from\":%uL,\"to\":%uL,\"in_window\":%s",
                      (uint64_t) json_integer_value(j->replay),
                      cl->session->sh->seq,
                      out_of_range ? "false" : "true");
    }
}


/* join_session's payload and replay_from; errors are answered here */
static ngx_int_t
ngx_pty_ext_join_args(ngx_pty_client_t *cl, json_t *msg, json_t *id,
    ngx_pty_ext_join_t *j)
{
    json_t             *payload, *role;
    static const char  *keys[] = { "role", "cols", "rows",
                                   "client_label", NULL };

    payload = json_object_get(msg, "payload");
    role = json_object_get(payload, "role");
    j->cols = 0;
    j->rows = 0;
    j->archive = 0;

    if (!json_is_object(payload) || ngx_pty_ext_payload_keys(payload, keys)
        || !json_is_string(role)
        || ngx_pty_ext_size(payload, "cols", &j->cols, 0) != NGX_OK
        || ngx_pty_ext_size(payload, "rows", &j->rows, 0) != NGX_OK
        || ngx_pty_ext_label(json_object_get(payload, "client_label"),
                             &j->label, &j->label_len) != NGX_OK)
    {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "join_session needs {role, cols?, rows?, "
                              "client_label?} with sizes in 1..1024 and a "
                              "label of at most 128 characters");
        return NGX_ERROR;
    }

    if (j->cols && j->rows
        && ngx_pty_ext_cells(cl, id, j->cols, j->rows) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ngx_pty_ext_role(cl, role, id, &j->want) != NGX_OK) {
        return NGX_ERROR;
    }

    /* MembershipChanged names the principal, fixed at the upgrade */
    j->label_len = ngx_pty_auth_label(cl->ident, j->label, j->label_len,
                                      j->label_buf);
    j->label = j->label_buf;

    j->replay = json_object_get(msg, "replay_from");
    j->downgraded = 0;
    j->first_controller = 0;

    return NGX_OK;
}


/*
 * The role within the limits, the member, its RoleAssigned and the
 * MembershipChanged in the ring.  The caller holds the session lock and
 * answers a refusal once it has released it.
 */
static ngx_pty_ext_admit_e
ngx_pty_ext_admit_locked(ngx_pty_client_t *cl, ngx_pty_ext_join_t *j)
{
    ngx_pty_params_t      *params;
    ngx_pty_session_sh_t  *sh;

    sh = cl->session->sh;
    params = &cl->conf->params;

    if (!ngx_pty_auth_may_control(cl->ident)) {
        /* no pty:control scope, or the session's list says observe */
        if (j->want == NGX_PTY_ROLE_CONTROLLER) {
            j->want = NGX_PTY_ROLE_OBSERVER;
            j->downgraded = 1;
            ngx_sprintf(j->reason, "the principal may only observe this "
                        "session (pty:control)%Z");
        }

    } else if (sh->fresh) {
        /* the first connection on a fresh session controls it */
        j->want = NGX_PTY_ROLE_CONTROLLER;
        j->first_controller = 1;

    } else if (j->want == NGX_PTY_ROLE_CONTROLLER
               && sh->controllers >= params->max_controllers)
    {
        j->want = NGX_PTY_ROLE_OBSERVER;
        j->downgraded = 1;
        ngx_sprintf(j->reason,
                    "controller limit reached (max_controllers=%ui)%Z",
                    params->max_controllers);
    }

    if (j->want == NGX_PTY_ROLE_OBSERVER
        && sh->observers >= params->max_observers)
    {
        return NGX_PTY_JOIN_OBSERVER_LIMIT;
    }

    cl->member = ngx_pty_shm_member_add(sh, cl->client_id, j->want,
                                        j->label, j->label_len);
    if (cl->member == NULL) {
        return NGX_PTY_JOIN_ZONE_FULL;
    }

    ngx_pty_auth_member(cl->member, cl->ident);

    if (j->want == NGX_PTY_ROLE_CONTROLLER) {
        sh->fresh = 0;
    }

    cl->role = j->want;

    j->ra = ngx_pty_ext_role_frame(cl, j->downgraded, (char *) j->reason);

    if (j->ra == NULL
        || ngx_pty_ext_membership_locked(sh, cl->ws.connection->log) == NULL)
    {
        ngx_pty_shm_member_remove(sh, cl->member);
        cl->member = NULL;
        return NGX_PTY_JOIN_UNRECORDED;
    }

    return NGX_PTY_JOIN_ADMITTED;
}


/* a refused join, answered once the session lock is released */
static void
ngx_pty_ext_join_refused(ngx_pty_client_t *cl, json_t *id,
    ngx_pty_ext_admit_e rc)
{
    u_char  reason[96];

    switch (rc) {

    case NGX_PTY_JOIN_OBSERVER_LIMIT:
        ngx_sprintf(reason, "observer limit reached (max_observers=%ui)%Z",
                    cl->conf->params.max_observers);
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_RATE_LIMITED,
                              (char *) reason);
        break;

    case NGX_PTY_JOIN_ZONE_FULL:
        if (ngx_pty_binding_log(cl, NGX_PTY_LOG_ZONE_FULL, NGX_LOG_ERR)) {
            ngx_log_error(NGX_LOG_ERR, cl->ws.connection->log, 0,
                          "pty: shared zone is full; raise the size in "
                          "\"pty_zone\"");
        }

        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INTERNAL,
                              "shared memory exhausted");
        break;

    default: /* NGX_PTY_JOIN_UNRECORDED */
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INTERNAL,
                              "cannot record the join");
    }
}


/*
 * Sends RoleAssigned and starts the client's ring walk after it, or at
 * replay_from while the ring still holds that.  Returns 1 for a
 * replay_from outside the retained window.  The caller holds the lock.
 */
static ngx_uint_t
ngx_pty_ext_cursor_locked(ngx_pty_client_t *cl, ngx_pty_ext_join_t *j)
{
    uint64_t               ra_seq, first, from;
    ngx_pty_session_sh_t  *sh;

    sh = cl->session->sh;

    /* RoleAssigned goes first, ahead of any replay */
    ra_seq = j->ra->seq;
    (void) ngx_pty_binding_send_frame(cl, j->ra);
    cl->sent_seq = ra_seq;
    cl->live_seq = ra_seq;

    first = ngx_pty_ring_first_seq(sh->ring);
    cl->cursor = ngx_pty_ring_find(sh->ring, ra_seq);
    j->closed_copy = (sh->state >= NGX_PTY_STATE_CLOSED);

    if (j->replay == NULL || !json_is_integer(j->replay)) {
        return 0;
    }

    from = (uint64_t) json_integer_value(j->replay);

    if (from < ra_seq && (from + 1 >= first)) {
        cl->cursor = ngx_pty_ring_find(sh->ring, from);
        j->closed_copy = j->closed_copy
                         && !ngx_pty_ext_closed_ahead(sh->ring, cl->cursor);
        return 0;
    }

    if (from < ra_seq && ngx_pty_replay_possible()) {
        /* older than the ring: the archive has it, or says it has not */
        j->archive = 1;
        j->archive_from = from;
        j->closed_copy = 0;
        return 0;
    }

    return 1;
}


/* whether a broadcast Closed lies on the walk from off */
static ngx_uint_t
ngx_pty_ext_closed_ahead(ngx_pty_ring_t *ring, uint64_t off)
{
    ngx_pty_frame_t  *f;

    while ((f = ngx_pty_ring_read(ring, &off)) != NULL) {
        if (f->kind == NGX_PTY_FRAME_CLOSED && f->target == 0) {
            return 1;
        }
    }

    return 0;
}


/* after the lock: the replay's error, the first size, a keyframe, output */
static void
ngx_pty_ext_joined(ngx_pty_client_t *cl, json_t *id, ngx_pty_ext_join_t *j,
    ngx_uint_t out_of_range)
{
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;

    s = cl->session;
    sh = s->sh;

    ngx_pty_session_notify(s);

    if (out_of_range) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_REPLAY_OUT_OF_RANGE,
                              "replay_from is outside the retained window; "
                              "a keyframe follows");
    }

    cl->joined = 1;

    if (j->archive && ngx_pty_replay_start(cl, id, j->archive_from) != NGX_OK) {
        ngx_pty_ws_finalize(&cl->ws);
        return;
    }

    if (j->first_controller && j->cols && j->rows
        && (j->cols != sh->cols || j->rows != sh->rows))
    {
        (void) ngx_pty_session_resize(s, j->cols, j->rows);
    }

    if (ngx_pty_session_request_keyframe(s, cl->client_id) != NGX_OK) {
        (void) ngx_pty_ext_error_frame(cl, "KEYFRAME_UNAVAILABLE",
                                       "no screen snapshot available");

    } else if (!json_is_integer(j->replay) || out_of_range) {
        /* nothing to build on before it: no Output ahead of it */
        ngx_pty_binding_hold(cl, cl->sent_seq, 0);
    }

    cl->last_keyframe_request = ngx_current_msec;

    /* a late joiner too learns how the session ended */
    if (j->closed_copy && ngx_pty_binding_closed_copy(cl) != NGX_OK) {
        ngx_pty_ws_finalize(&cl->ws);
        return;
    }

    ngx_pty_binding_pull(cl);
}


static void
ngx_pty_ext_leave(ngx_pty_client_t *cl, json_t *id)
{
    (void) id;

    /* the leaver's last frame is that MembershipChanged, then goodbye */
    ngx_pty_ext_remove_member(cl, &cl->leave_seq);
    cl->leaving = 1;

    ngx_pty_binding_pull(cl);
}


void
ngx_pty_ext_detach(ngx_pty_client_t *cl)
{
    uint64_t  seq;

    if (cl->member == NULL) {
        return;
    }

    ngx_pty_ext_remove_member(cl, &seq);
}


/*
 * Takes the client out of the membership and tells everyone; *seq is the
 * sequence of that MembershipChanged.  With terminate_on_last_controller
 * the session ends when its last controller goes.
 */
static void
ngx_pty_ext_remove_member(ngx_pty_client_t *cl, uint64_t *seq)
{
    ngx_uint_t             last;
    ngx_pty_frame_t       *f;
    ngx_pty_session_sh_t  *sh;

    sh = cl->session->sh;

    ngx_pty_audit(cl->ident, cl->ws.connection, "detach", "\"role\":\"%s\"",
                  ngx_pty_ext_role_name(cl->role));

    ngx_pty_shm_lock(sh);

    last = (cl->member->role == NGX_PTY_ROLE_CONTROLLER
            && sh->controllers == 1);

    ngx_pty_shm_member_remove(sh, cl->member);
    cl->member = NULL;

    f = ngx_pty_ext_membership_locked(sh, cl->ws.connection->log);
    *seq = f ? f->seq : sh->seq;

    ngx_pty_shm_unlock(sh);

    ngx_pty_session_notify(cl->session);

    /* the last of an ended session's members is gone */
    ngx_pty_session_settle(cl->session);

    if (last && cl->conf->terminate_on_last_controller) {
        ngx_log_error(NGX_LOG_INFO, cl->ws.connection->log, 0,
                      "pty: the last controller c-%uD left session pty-%ui: "
                      "terminating it (pty_terminate_on_last_controller)",
                      cl->client_id, sh->name);

        cl->session->kill_detail = NGX_PTY_DETAIL_LAST_CONTROLLER;

        (void) ngx_pty_session_kill(cl->session, NGX_PTY_CLOSED_KILLED);
    }
}


static ngx_int_t
ngx_pty_ext_may_control(ngx_pty_client_t *cl, json_t *id, const char *what)
{
    if (cl->role == NGX_PTY_ROLE_CONTROLLER) {
        return NGX_OK;
    }

    if (ngx_pty_binding_log(cl, NGX_PTY_LOG_DENIED, NGX_LOG_NOTICE)) {
        ngx_log_error(NGX_LOG_NOTICE, cl->ws.connection->log, 0,
                      "pty: observer c-%uD denied %s on session pty-%ui",
                      cl->client_id, what, cl->session->sh->name);
    }

    ngx_pty_audit(cl->ident, cl->ws.connection, "write_denied",
                  "\"what\":\"%s\"", what);

    ngx_pty_binding_error(cl, id, NGX_PTY_ERR_PERMISSION_DENIED,
                          "observers cannot send input or resize");

    return NGX_ERROR;
}


static void
ngx_pty_ext_input(ngx_pty_client_t *cl, json_t *payload, json_t *id)
{
    u_char            *buf;
    json_t            *data;
    ngx_int_t          rc;
    ngx_str_t          src, dst;
    static const char *keys[] = { "data", NULL };

    if (ngx_pty_ext_may_control(cl, id, "input") != NGX_OK) {
        return;
    }

    data = json_object_get(payload, "data");

    if (!json_is_string(data) || ngx_pty_ext_payload_keys(payload, keys)) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "session_input needs {data: base64}");
        return;
    }

    src.data = (u_char *) json_string_value(data);
    src.len = json_string_length(data);

    if (ngx_base64_decoded_length(src.len) > cl->conf->input_max) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "input frame too large (pty_input_max)");
        return;
    }

    buf = ngx_alloc(ngx_base64_decoded_length(src.len) + 1,
                    cl->ws.connection->log);
    if (buf == NULL) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INTERNAL, "out of memory");
        return;
    }

    dst.data = buf;

    if (ngx_decode_base64(&dst, &src) != NGX_OK) {
        ngx_free(buf);
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "data is not valid base64 (RFC 4648 section 4)");
        return;
    }

    if (ngx_pty_ext_paced(cl, id, dst.len) != NGX_OK) {
        ngx_free(buf);
        return;
    }

    rc = ngx_pty_session_input(cl->session, dst.data, dst.len);
    ngx_free(buf);

    if (rc != NGX_OK) {
        (void) ngx_pty_ext_error_frame(cl, "PTY_WRITE_FAILED",
                                       rc == NGX_DECLINED
                                       ? "the session is not running"
                                       : "the terminal did not take the "
                                         "input");
    }
}


/* within pty_input_rate; else dropped, and the client is told so */
ngx_int_t
ngx_pty_ext_paced(ngx_pty_client_t *cl, json_t *id, size_t cost)
{
    if (ngx_pty_bucket_take(&cl->input, &cl->conf->input_rate, cost)
        == NGX_OK)
    {
        return NGX_OK;
    }

    if (ngx_pty_binding_log(cl, NGX_PTY_LOG_RATE, NGX_LOG_INFO)) {
        ngx_log_error(NGX_LOG_INFO, cl->ws.connection->log, 0,
                      "pty: client c-%uD sends faster than "
                      "\"pty_input_rate\" (%uz bytes/s), requests dropped",
                      cl->client_id, cl->conf->input_rate.rate);
    }

    ngx_pty_binding_error(cl, id, NGX_PTY_ERR_RATE_LIMITED,
                          "over the input rate limit (pty_input_rate); "
                          "this request was dropped");

    return NGX_BUSY;
}


static void
ngx_pty_ext_resize(ngx_pty_client_t *cl, json_t *payload, json_t *id)
{
    ngx_int_t          rc;
    ngx_uint_t         cols, rows;
    static const char *keys[] = { "cols", "rows", NULL };

    if (ngx_pty_ext_may_control(cl, id, "resize") != NGX_OK) {
        return;
    }

    if (!json_is_object(payload) || ngx_pty_ext_payload_keys(payload, keys)
        || ngx_pty_ext_size(payload, "cols", &cols, 1) != NGX_OK
        || ngx_pty_ext_size(payload, "rows", &rows, 1) != NGX_OK)
    {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "session_resize needs {cols, rows} in 1..1024");
        return;
    }

    if (ngx_pty_ext_cells(cl, id, cols, rows) != NGX_OK) {
        return;
    }

    rc = ngx_pty_session_resize(cl->session, cols, rows);

    if (rc != NGX_OK) {
        (void) ngx_pty_ext_error_frame(cl, "PTY_RESIZE_FAILED",
                                       rc == NGX_DECLINED
                                       ? "the session is not running"
                                       : "TIOCSWINSZ failed");
    }
}


static void
ngx_pty_ext_request_role(ngx_pty_client_t *cl, json_t *payload, json_t *id)
{
    json_t                *role;
    ngx_uint_t             want, downgraded, changed;
    ngx_pty_session_sh_t  *sh;
    u_char                 reason[96];
    static const char     *keys[] = { "role", NULL };

    role = json_object_get(payload, "role");

    if (!json_is_string(role) || ngx_pty_ext_payload_keys(payload, keys)) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "request_role needs {role}");
        return;
    }

    if (ngx_pty_ext_role(cl, role, id, &want) != NGX_OK) {
        return;
    }

    if (want == NGX_PTY_ROLE_CONTROLLER && cl->role != want
        && !ngx_pty_auth_may_control(cl->ident))
    {
        /* role grants follow scopes, whoever left the controller seat */
        ngx_pty_audit(cl->ident, cl->ws.connection, "role_denied",
                      "\"role\":\"controller\"");
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_PERMISSION_DENIED,
                              "the principal may only observe this session "
                              "(pty:control)");
        return;
    }

    sh = cl->session->sh;
    downgraded = 0;
    changed = 0;

    ngx_pty_shm_lock(sh);

    if (want == NGX_PTY_ROLE_CONTROLLER && cl->role != want
        && sh->controllers >= cl->conf->params.max_controllers)
    {
        want = NGX_PTY_ROLE_OBSERVER;
        downgraded = 1;
        ngx_sprintf(reason, "controller limit reached (max_controllers=%ui)%Z",
                    cl->conf->params.max_controllers);
    }

    if (want != cl->role) {
        if (want == NGX_PTY_ROLE_CONTROLLER) {
            sh->observers--;
            sh->controllers++;

        } else {
            sh->controllers--;
            sh->observers++;
        }

        cl->role = want;
        cl->member->role = want;
        changed = 1;
    }

    (void) ngx_pty_ext_role_frame(cl, downgraded, (char *) reason);

    if (changed) {
        (void) ngx_pty_ext_membership_locked(sh, cl->ws.connection->log);
    }

    ngx_pty_shm_unlock(sh);

    ngx_pty_session_notify(cl->session);

    if (changed) {
        cl->ident->role = want;
        ngx_pty_audit(cl->ident, cl->ws.connection, "role_change",
                      "\"role\":\"%s\"", ngx_pty_ext_role_name(want));
    }
}


static void
ngx_pty_ext_request_keyframe(ngx_pty_client_t *cl, json_t *id)
{
    ngx_msec_t  elapsed;

    (void) id;

    elapsed = ngx_current_msec - cl->last_keyframe_request;

    if (elapsed < NGX_PTY_KEYFRAME_RATE) {
        /* one per second: a burst collapses into one, still within 1 s */
        if (!cl->keyframe_ev.timer_set) {
            cl->keyframe_ev.handler = ngx_pty_ext_keyframe_handler;
            ngx_add_timer(&cl->keyframe_ev, NGX_PTY_KEYFRAME_RATE - elapsed);
        }

        return;
    }

    cl->keyframe_ev.handler = ngx_pty_ext_keyframe_handler;
    ngx_pty_ext_keyframe_handler(&cl->keyframe_ev);
}


static void
ngx_pty_ext_keyframe_handler(ngx_event_t *ev)
{
    ngx_pty_client_t  *cl;

    cl = ev->data;

    if (cl->ws.finished || cl->session == NULL) {
        return;
    }

    cl->last_keyframe_request = ngx_current_msec;

    if (ngx_pty_session_request_keyframe(cl->session, cl->client_id)
        != NGX_OK)
    {
        (void) ngx_pty_ext_error_frame(cl, "KEYFRAME_UNAVAILABLE",
                                       "no screen snapshot available");
    }
}


/* caller holds the session lock */
static ngx_pty_frame_t *
ngx_pty_ext_role_frame(ngx_pty_client_t *cl, ngx_uint_t downgraded,
    const char *reason)
{
    u_char  buf[256], *p;

    p = ngx_sprintf(buf, "{\"kind\":\"RoleAssigned\",\"role\":\"%s\","
                    "\"client_id\":\"c-%uD\"",
                    cl->role == NGX_PTY_ROLE_CONTROLLER ? "controller"
                                                        : "observer",
                    cl->client_id);

    if (downgraded) {
        p = ngx_sprintf(p, ",\"downgraded\":true,\"reason\":\"%s\"", reason);
    }

    *p++ = '}';

    return ngx_pty_ring_append(cl->session->sh, NGX_PTY_FRAME_ROLE,
                               cl->client_id, buf, p - buf);
}


/* caller holds the session lock */
static ngx_pty_frame_t *
ngx_pty_ext_membership_locked(ngx_pty_session_sh_t *sh, ngx_log_t *log)
{
    u_char            *buf, *p;
    size_t             size;
    ngx_uint_t         pass, n;
    ngx_queue_t       *q;
    ngx_pty_frame_t   *f;
    ngx_pty_member_t  *m;

    size = 128;

    for (q = ngx_queue_head(&sh->members);
         q != ngx_queue_sentinel(&sh->members);
         q = ngx_queue_next(q))
    {
        m = ngx_queue_data(q, ngx_pty_member_t, queue);
        size += 64 + ngx_pty_json_escape_len(m->label, m->label_len);
    }

    buf = ngx_alloc(size, log);
    if (buf == NULL) {
        return NULL;
    }

    p = ngx_pty_cpylit(buf, "{\"kind\":\"MembershipChanged\"");

    for (pass = 0; pass < 2; pass++) {
        p = ngx_sprintf(p, pass ? "],\"observers\":[" : ",\"controllers\":[");
        n = 0;

        for (q = ngx_queue_head(&sh->members);
             q != ngx_queue_sentinel(&sh->members);
             q = ngx_queue_next(q))
        {
            m = ngx_queue_data(q, ngx_pty_member_t, queue);

            if ((m->role == NGX_PTY_ROLE_CONTROLLER) != (pass == 0)) {
                continue;
            }

            p = ngx_sprintf(p, "%s{\"client_id\":\"c-%uD\",\"label\":\"",
                            n++ ? "," : "", m->client_id);
            p = ngx_pty_json_escape(p, m->label, m->label_len);
            *p++ = '"';
            *p++ = '}';
        }
    }

    *p++ = ']';
    *p++ = '}';

    f = ngx_pty_ring_append(sh, NGX_PTY_FRAME_MEMBERSHIP, 0, buf, p - buf);

    ngx_free(buf);

    return f;
}


ngx_int_t
ngx_pty_ext_membership(ngx_pty_session_t *s)
{
    ngx_pty_frame_t  *f;

    ngx_pty_shm_lock(s->sh);
    f = ngx_pty_ext_membership_locked(s->sh, s->log);
    ngx_pty_shm_unlock(s->sh);

    ngx_pty_session_notify(s);

    return f ? NGX_OK : NGX_ERROR;
}


/* a PTY-level Error frame for one client, in sequence with the rest */
ngx_pty_frame_t *
ngx_pty_ext_error_frame(ngx_pty_client_t *cl, const char *code,
    const char *message)
{
    u_char  buf[512], *p;

    p = ngx_snprintf(buf, sizeof(buf) - 2,
                     "{\"kind\":\"Error\",\"code\":\"%s\",\"message\":\"%s\"",
                     code, message);
    *p++ = '}';

    return ngx_pty_session_append(cl->session, NGX_PTY_FRAME_ERROR,
                                  cl->client_id, buf, p - buf);
}


size_t
ngx_pty_ext_frame_size(ngx_pty_frame_t *f)
{
    return 320 + NGX_PTY_TS_LEN + ngx_base64_encoded_length(f->len);
}


u_char *
ngx_pty_ext_frame_write(u_char *p, ngx_pty_frame_t *f)
{
    ngx_str_t  src, dst;

    if (f->kind == NGX_PTY_FRAME_TASK) {
        return ngx_pty_a2a_frame_write(p, f);
    }

    p = ngx_pty_cpylit(p, "{\"op\":\"pty.session_frame\",\"id\":\"");
    p = ngx_pty_uuid_format(p, f->id);
    p = ngx_pty_cpylit(p, "\",\"ts\":\"");
    p = ngx_pty_ts_format(p, f->ts);
    p = ngx_sprintf(p, "\",\"sequence\":%uL,\"payload\":", f->seq);

    src.data = ngx_pty_frame_data(f);
    src.len = f->len;

    switch (f->kind) {

    case NGX_PTY_FRAME_OUTPUT:
        p = ngx_pty_cpylit(p, "{\"kind\":\"Output\",\"stream\":\"stdout\","
                       "\"data\":\"");
        dst.data = p;
        ngx_encode_base64(&dst, &src);
        p += dst.len;
        *p++ = '"';
        *p++ = '}';
        break;

    case NGX_PTY_FRAME_RESIZE:
        p = ngx_sprintf(p, "{\"kind\":\"Resize\",\"cols\":%uD,\"rows\":%uD}",
                        (uint32_t) f->cols, (uint32_t) f->rows);
        break;

    case NGX_PTY_FRAME_KEYFRAME:
        p = ngx_pty_cpylit(p, "{\"kind\":\"Keyframe\",\"snapshot\":\"");
        dst.data = p;
        ngx_encode_base64(&dst, &src);
        p += dst.len;
        p = ngx_sprintf(p, "\",\"snapshot_format\":\"" NGX_PTY_SNAPSHOT_FMT
                        "\",\"snapshot_cols\":%uD,\"snapshot_rows\":%uD,"
                        "\"anchor_sequence\":%uL}",
                        (uint32_t) f->cols, (uint32_t) f->rows, f->anchor);
        break;

    default:
        /* RoleAssigned, MembershipChanged, Closed, Error: stored as JSON */
        p = ngx_cpymem(p, src.data, src.len);
    }

    *p++ = '}';

    return p;
}


/*
 * Sessions as a worker sees them: PTY I/O for the sessions it owns,
 * listeners for the sessions it serves.
 */

#include "ngx_pty.h"
#include "ngx_pty_session.h"
#include "ngx_pty_keeper.h"
#include "ngx_pty_doorbell.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_util.h"
#include "ngx_pty_policy.h"
#include "ngx_pty_store.h"
#include "ngx_pty_redact.h"
#include "ngx_pty_reveal.h"

#include <sys/ioctl.h>
#include <termios.h>


#define NGX_PTY_READ_BUDGET     4           /* chunks per turn, then yield */
#define NGX_PTY_SCREEN_BUDGET   (32 * 1024) /* bytes folded per turn */
#define NGX_PTY_FOLD_CHUNK      (4 * NGX_PTY_READ_CHUNK)
#define NGX_PTY_BATCH_BYTES     (64 * 1024) /* a flood's output per notify */
#define NGX_PTY_BATCH_MSEC      1           /* and the longest it waits */
/* PTY reads pause while the model is this far behind: bounds the catch-up
 * a Keyframe does in one go, and so the turn it takes from other sessions */
#define NGX_PTY_SCREEN_LAG      (32 * 1024)

#define NGX_PTY_KEYFRAME_UNAVAILABLE                                          \
    "{\"kind\":\"Error\",\"code\":\"KEYFRAME_UNAVAILABLE\","                 \
    "\"message\":\"no screen snapshot available\"}"
#define NGX_PTY_URGENT_MAX      512         /* an echo, a prompt: not a flood */
#define NGX_PTY_DRAIN_GRACE     300         /* ms for output after exit */
#define NGX_PTY_INPUT_MAX       (1024 * 1024)


const char  *ngx_pty_closed_reasons[] = {
    "normal", "killed", "timeout", "instance_terminated", "error"
};


static ngx_rbtree_t       ngx_pty_local;
static ngx_rbtree_node_t  ngx_pty_local_sentinel;
static ngx_uint_t         ngx_pty_adopting;
static ngx_uint_t         ngx_pty_adopt_again;
static ngx_uint_t         ngx_pty_walking;   /* views must not go now */


static ngx_pty_session_t *ngx_pty_session_new(ngx_pty_session_sh_t *sh,
    ngx_log_t *log);
static void ngx_pty_session_free(ngx_pty_session_t *s);
static ngx_int_t ngx_pty_session_watch_keeper(ngx_pty_session_t *s,
    ngx_socket_t ctl);
static ngx_int_t ngx_pty_session_screen_init(ngx_pty_session_t *s,
    ngx_pty_ring_t *ring);
static void ngx_pty_session_own(ngx_pty_session_t *s);
static ngx_uint_t ngx_pty_session_coming(ngx_pty_session_t *s);
static ngx_uint_t ngx_pty_session_log_input(ngx_pty_session_t *s,
    ngx_uint_t level);
static ngx_int_t ngx_pty_session_adopt(ngx_pty_session_t *s);
static void ngx_pty_session_ctl_handler(ngx_event_t *rev);
static ngx_int_t ngx_pty_session_ready(ngx_pty_session_t *s, ngx_fd_t fd,
    ngx_pid_t child);
static void ngx_pty_session_read_handler(ngx_event_t *rev);
static ngx_int_t ngx_pty_session_redactor(ngx_pty_session_t *s);
static void ngx_pty_session_output(ngx_pty_session_t *s, u_char *buf,
    size_t n, ngx_uint_t full);
static void ngx_pty_session_redact_handler(ngx_event_t *ev);
static void ngx_pty_session_store_masked(ngx_pty_session_t *s, u_char *out,
    size_t len);
static void ngx_pty_session_write_handler(ngx_event_t *wev);
static ngx_int_t ngx_pty_session_input_room(ngx_pty_session_t *s, size_t len);
static void ngx_pty_session_input_taken(ngx_pty_session_t *s, size_t n);
static void ngx_pty_session_screen_handler(ngx_event_t *ev);
static void ngx_pty_session_fold(ngx_pty_session_t *s, size_t budget);
static void ngx_pty_session_reply(void *data, const u_char *buf, size_t len);
static void ngx_pty_session_drain_handler(ngx_event_t *ev);
static void ngx_pty_session_linger_handler(ngx_event_t *ev);
static void ngx_pty_session_keyframe_handler(ngx_event_t *ev);
static void ngx_pty_session_batch_handler(ngx_event_t *ev);
static void ngx_pty_session_limits_handler(ngx_event_t *ev);
static void ngx_pty_session_limits_arm(ngx_pty_session_t *s);
static void ngx_pty_session_exited(ngx_pty_session_t *s);
static void ngx_pty_session_close(ngx_pty_session_t *s, ngx_uint_t reason,
    ngx_int_t exit_code, const char *detail);
static void ngx_pty_session_release_io(ngx_pty_session_t *s);
static void ngx_pty_session_interest(ngx_pty_session_t *s);
static void ngx_pty_session_notify_local(ngx_pty_session_t *s);
static ngx_int_t ngx_pty_session_forward(ngx_pty_session_t *s,
    ngx_pty_inbox_t *rec, u_char *data);
static void ngx_pty_session_drain_inbox(ngx_pty_session_t *s);
static void ngx_pty_session_sweep_members(ngx_pty_session_t *s);
static void ngx_pty_session_replay_start(ngx_pty_ring_t *ring, uint64_t *kf,
    uint64_t *base, uint64_t *from);
static u_char *ngx_pty_session_screen_rebuild(ngx_pty_session_t *s,
    size_t *len);
static ngx_pty_screen_t *ngx_pty_session_screen_replay(ngx_pty_session_t *s,
    uint64_t *anchor);
static ngx_int_t ngx_pty_session_keyframe_replayed(ngx_pty_session_t *s,
    uint32_t target);
static void ngx_pty_session_spawned(ngx_pty_keeper_req_t *req);
static void ngx_pty_session_tty_mode(ngx_pty_session_t *s);
static void ngx_pty_session_log_command(ngx_pty_session_t *s,
    ngx_uint_t level, ngx_err_t err, const char *what, ngx_pid_t pid);
static void ngx_pty_session_store(ngx_pty_session_t *s, u_char *buf,
    size_t n);
static void ngx_pty_session_stored(ngx_pty_session_t *s, size_t got,
    ngx_uint_t urgent);
static ngx_pty_session_t *ngx_pty_session_lookup(ngx_pty_session_sh_t *sh);
static ngx_uint_t ngx_pty_sessions_reclaim(uint64_t ended_before);
static void ngx_pty_session_hand_over(ngx_pty_session_t *s);


static void
ngx_pty_local_init(void)
{
    if (ngx_pty_local.root == NULL) {
        ngx_rbtree_init(&ngx_pty_local, &ngx_pty_local_sentinel,
                        ngx_rbtree_insert_value);
    }
}


ngx_pty_session_t *
ngx_pty_session_start(ngx_pty_start_t *st, ngx_log_t *log)
{
    u_char                *masked;
    size_t                 len;
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;
    ngx_pty_loc_conf_t    *plcf;
    ngx_pty_keeper_req_t  *req;

    plcf = st->conf;

    /* the record (lists, logs, the archive) has its secrets masked */
    masked = st->command;

    if (plcf->redact) {
        masked = ngx_pty_redact_copy(st->command, st->command_len, log);
    }

    if (masked == NULL) {
        return NULL;
    }

    sh = ngx_pty_shm_session_create(log, masked, st->command_len,
                                    &st->acl, st->cols, st->rows,
                                    plcf->scroll_size, plcf->inbox_max);

    if (masked != st->command) {
        ngx_free(masked);
        masked = NULL;          /* the program gets the command as typed */
    }

    if (sh == NULL) {
        return NULL;
    }

    s = ngx_pty_session_new(sh, log);
    if (s == NULL) {
        ngx_pty_shm_session_unlink(sh);
        ngx_pty_shm_session_release(sh);
        return NULL;
    }

    /* the view holds its own reference now */
    ngx_pty_shm_session_release(sh);
    sh->answer_queries = plcf->answer_queries;
    sh->terminate_on_last_controller = plcf->terminate_on_last_controller;
    ngx_pty_ring_limits(sh, plcf->params.replay_buffer_frames,
                        plcf->ring_size, plcf->ring_max_size);
    sh->ring->capped = plcf->ring_capped;

    sh->idle_timeout = plcf->idle_timeout;
    sh->max_age = plcf->max_age;
    s->started = ngx_current_msec;
    s->last_active = ngx_current_msec;

    sh->params = plcf->params;
    sh->closed_linger = plcf->closed_linger;
    sh->redact = plcf->redact;
    ngx_pty_session_own(s);

    req = ngx_pcalloc(s->pool, sizeof(ngx_pty_keeper_req_t));
    if (req == NULL) {
        goto failed;
    }

    if (ngx_pty_random(sh->keeper_secret, NGX_PTY_SECRET_LEN) != NGX_OK) {
        goto failed;
    }

    req->spawn.sh = sh;
    req->spawn.id = sh->id;
    req->spawn.secret = sh->keeper_secret;
    req->spawn.command = sh->command;

    if (masked == NULL) {
        req->spawn.command = ngx_pnalloc(s->pool, st->command_len + 1);
        if (req->spawn.command == NULL) {
            goto failed;
        }

        ngx_memcpy(req->spawn.command, st->command, st->command_len);
        req->spawn.command[st->command_len] = '\0';
    }
    req->spawn.cols = st->cols;
    req->spawn.rows = st->rows;
    req->spawn.shell = (char *) plcf->shell.data;
    req->spawn.sandbox = plcf->sandbox;
    req->spawn.envp = ngx_pty_keeper_env(s->pool, plcf->env);
    req->handler = ngx_pty_session_spawned;
    req->data = s;
    req->log = log;

    if (req->spawn.envp == NULL) {
        goto failed;
    }

    if (st->argv) {
        /* the words outlive the request: a start may wait for a keeper */
        len = ngx_strlen(st->path) + 1;
        req->spawn.argv = ngx_pty_policy_argv_copy(s->pool, st->argv);
        req->spawn.path = ngx_pnalloc(s->pool, len);

        if (req->spawn.argv == NULL || req->spawn.path == NULL) {
            goto failed;
        }

        ngx_memcpy(req->spawn.path, st->path, len);
    }

    /* until its keeper comes: the handler may be called in the spawn */
    s->spawn = req;

    if (ngx_pty_keeper_spawn(req) == NGX_AGAIN) {
        return s;
    }

    ngx_pty_session_spawned(req);

    return s;

failed:

    ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                          "bridge_start_failed: out of memory");

    return s;
}


/* the start's keeper is forked (or not): the session runs */
static void
ngx_pty_session_spawned(ngx_pty_keeper_req_t *req)
{
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;

    s = req->data;
    sh = s->sh;
    s->spawn = NULL;

    if (req->pid == NGX_INVALID_PID) {
        ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                              "bridge_start_failed: no keeper");
        return;
    }

    /* the screen model is made while the program starts (or a join made it) */
    if (s->screen == NULL && ngx_pty_session_screen_init(s, NULL) != NGX_OK) {
        /*
         * SIGKILL: the record is freed once closed, and a keeper ending
         * gracefully would write its status into it; the program goes
         * with the hang-up of its terminal
         */
        kill(req->pid, SIGKILL);
        close(req->ctl);
        ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                              "bridge_start_failed: out of memory");
        return;
    }

    sh->keeper = req->pid;
    ngx_pty_session_interest(s);

    if (ngx_pty_session_watch_keeper(s, req->ctl) != NGX_OK) {
        /* the record stays: the keeper ends the program's whole session */
        kill(req->pid, SIGTERM);
        ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                              "bridge_eof: cannot watch the keeper");
        return;
    }

    ngx_pty_session_limits_arm(s);

    ngx_pty_session_log_command(s, NGX_LOG_INFO, 0, "started, keeper",
                                req->pid);
}


/* the command comes from a client: escaped, it cannot forge a log line */
static void
ngx_pty_session_log_command(ngx_pty_session_t *s, ngx_uint_t level,
    ngx_err_t err, const char *what, ngx_pid_t pid)
{
    size_t  n;
    u_char  cmd[NGX_PTY_LOG_STR];

    n = ngx_pty_log_escape(cmd, sizeof(cmd), s->sh->command,
                           s->sh->command_len);

    ngx_log_error(level, s->log, err,
                  "pty: session pty-%ui %*s %s %P: \"%*s\"",
                  s->sh->name, (size_t) NGX_PTY_ID_LEN, s->sh->id, what,
                  pid, n, cmd);
}


static ngx_int_t
ngx_pty_session_watch_keeper(ngx_pty_session_t *s, ngx_socket_t ctl)
{
    ngx_connection_t  *c;

    c = ngx_get_connection(ctl, s->log);
    if (c == NULL) {
        close(ctl);
        return NGX_ERROR;
    }

    c->data = s;
    c->read->handler = ngx_pty_session_ctl_handler;
    c->read->log = s->log;
    c->write->log = s->log;
    s->ctl = c;

    return ngx_handle_read_event(c->read, 0);
}


/*
 * The screen model; a new owner rebuilds it from the newest Keyframe in
 * the ring and the output after it, so a takeover keeps the screen.
 */
static ngx_int_t
ngx_pty_session_screen_init(ngx_pty_session_t *s, ngx_pty_ring_t *ring)
{
    uint64_t          off, after;
    ngx_pty_frame_t  *f, *kf;

    s->screen = ngx_pty_screen_create(s->sh->cols, s->sh->rows);
    if (s->screen == NULL) {
        return NGX_ERROR;
    }

    ngx_pty_screen_set_reply(s->screen, ngx_pty_session_reply, s);

    if (ring == NULL) {
        return NGX_OK;
    }

    ngx_pty_shm_lock(s->sh);

    kf = NULL;
    after = ring->tail;
    off = ring->tail;

    for ( ;; ) {
        f = ngx_pty_ring_read(ring, &off);

        if (f == NULL) {
            break;
        }

        if (f->kind == NGX_PTY_FRAME_KEYFRAME) {
            kf = f;
            after = off;
        }
    }

    if (kf) {
        (void) ngx_pty_screen_resize(s->screen, kf->cols, kf->rows);
        ngx_pty_screen_feed(s->screen, ngx_pty_frame_data(kf), kf->len);
        s->screen_seq = kf->anchor;
    }

    s->screen_off = after;

    ngx_pty_shm_unlock(s->sh);

    return NGX_OK;
}


/* this worker runs the session now, by the settings of its start */
static void
ngx_pty_session_own(ngx_pty_session_t *s)
{
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    s->owner = 1;
    ngx_pty_session_interest(s);
    s->params = sh->params;
    s->closed_linger = sh->closed_linger;
    s->idle_timeout = sh->idle_timeout;
    s->max_age = sh->max_age;
    s->answer_queries = sh->answer_queries;
    s->terminate_on_last_controller = sh->terminate_on_last_controller;
}


/* a session whose owner is gone: this worker takes its terminal over */
static ngx_int_t
ngx_pty_session_adopt(ngx_pty_session_t *s)
{
    ngx_pid_t              owner;
    ngx_socket_t           ctl;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    ngx_pty_shm_lock(sh);

    owner = sh->owner;

    if (owner == ngx_pid || ngx_pty_pid_alive(owner)) {
        ngx_pty_shm_unlock(sh);
        return NGX_DECLINED;
    }

    sh->owner = ngx_pid;

    ngx_pty_shm_unlock(sh);

    ngx_pty_session_own(s);
    s->started = ngx_current_msec - (ngx_time() - sh->created) * 1000;
    s->last_active = ngx_current_msec;

    ngx_log_error(NGX_LOG_INFO, s->log, 0,
                  "pty: taking over session pty-%ui from worker %P",
                  sh->name, owner);

    /* the clients of a killed worker are gone with it */
    ngx_pty_session_sweep_members(s);

    if (sh->keeper <= 0) {
        /* it died waiting for a keeper: no program was started */
        ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                              "bridge_start_failed: the worker starting "
                              "it died");
        return NGX_ERROR;
    }

    if (ngx_pty_session_screen_init(s, sh->ring) != NGX_OK) {
        ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1, "out of memory");
        return NGX_ERROR;
    }

    ctl = ngx_pty_keeper_connect(sh->id, sh->keeper_secret, s->log);

    if (ctl == (ngx_socket_t) -1) {
        /* the keeper is gone; it may have left the child's status */
        if (sh->keeper_status & 1) {
            s->exited = 1;
            s->eof = 1;
            s->wait_status = (ngx_int_t) (sh->keeper_status >> 1);
            ngx_pty_session_exited(s);

        } else {
            ngx_pty_session_close(s, NGX_PTY_CLOSED_INSTANCE_TERMINATED, -1,
                                  "the session keeper is gone");
        }

        return NGX_ERROR;
    }

    if (ngx_pty_session_watch_keeper(s, ctl) != NGX_OK) {
        ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                              "bridge_eof: cannot watch the keeper");
        return NGX_ERROR;
    }

    ngx_pty_session_limits_arm(s);

    return NGX_OK;
}


static ngx_pty_session_t *
ngx_pty_session_new(ngx_pty_session_sh_t *sh, ngx_log_t *log)
{
    ngx_pool_t         *pool;
    ngx_pty_session_t  *s;

    ngx_pty_local_init();

    pool = ngx_create_pool(1024, log);
    if (pool == NULL) {
        return NULL;
    }

    s = ngx_pcalloc(pool, sizeof(ngx_pty_session_t));
    if (s == NULL) {
        ngx_destroy_pool(pool);
        return NULL;
    }

    s->pool = pool;
    s->sh = sh;
    s->log = log;
    ngx_queue_init(&s->listeners);

    s->screen_ev.handler = ngx_pty_session_screen_handler;
    s->screen_ev.data = s;
    s->screen_ev.log = log;

    s->drain.handler = ngx_pty_session_drain_handler;
    s->drain.data = s;
    s->drain.log = log;
    s->drain.cancelable = 1;

    s->linger.handler = ngx_pty_session_linger_handler;
    s->linger.data = s;
    s->linger.log = log;
    s->linger.cancelable = 1;

    s->keyframe.handler = ngx_pty_session_keyframe_handler;
    s->keyframe.data = s;
    s->keyframe.log = log;
    s->keyframe.cancelable = 1;

    s->limits.handler = ngx_pty_session_limits_handler;
    s->limits.data = s;
    s->limits.log = log;
    s->limits.cancelable = 1;

    s->batch.handler = ngx_pty_session_batch_handler;
    s->batch.data = s;
    s->batch.log = log;
    s->batch.cancelable = 1;

    s->redact_ev.handler = ngx_pty_session_redact_handler;
    s->redact_ev.data = s;
    s->redact_ev.log = log;
    s->redact_ev.cancelable = 1;

    s->node.key = (ngx_rbtree_key_t) (uintptr_t) sh;
    ngx_rbtree_insert(&ngx_pty_local, &s->node);

    ngx_pty_shm_session_retain(sh);

    return s;
}


/*
 * A session brought back from the archive (ngx_pty_shm_session_restore):
 * this worker owns it as an ended one, forgotten after the closed linger
 * time.  The view holds the caller's reference.
 */
ngx_int_t
ngx_pty_session_restored(ngx_pty_session_sh_t *sh, ngx_log_t *log)
{
    ngx_pty_session_t  *s;

    s = ngx_pty_session_new(sh, log);
    if (s == NULL) {
        return NGX_ERROR;
    }

    ngx_pty_shm_session_release(sh);

    ngx_pty_session_own(s);
    s->closed = 1;

    ngx_add_timer(&s->linger, s->closed_linger);

    return NGX_OK;
}


/* this worker's view of a shared session, if it has one */
static ngx_pty_session_t *
ngx_pty_session_lookup(ngx_pty_session_sh_t *sh)
{
    ngx_rbtree_key_t    key;
    ngx_rbtree_node_t  *node, *sentinel;

    ngx_pty_local_init();

    key = (ngx_rbtree_key_t) (uintptr_t) sh;
    node = ngx_pty_local.root;
    sentinel = ngx_pty_local.sentinel;

    while (node != sentinel) {
        if (key == node->key) {
            return (ngx_pty_session_t *) node;
        }

        node = (key < node->key) ? node->left : node->right;
    }

    return NULL;
}


/* the local view of a shared session, made on first use */
ngx_pty_session_t *
ngx_pty_session_get(ngx_pty_session_sh_t *sh)
{
    ngx_pty_session_t  *s;

    s = ngx_pty_session_lookup(sh);

    if (s == NULL) {
        s = ngx_pty_session_new(sh, ngx_cycle->log);
        if (s == NULL) {
            return NULL;
        }
    }

    if (!s->owner && sh->state < NGX_PTY_STATE_CLOSED
        && (sh->keeper > 0 || sh->owner != 0)
        && !ngx_exiting && !ngx_quit && !ngx_terminate)
    {
        (void) ngx_pty_session_adopt(s);
    }

    return s;
}


/*
 * Whether what is typed now will be echoed (not while a program reads a
 * password: canonical input without echo), for the agent API's wait_for
 */
static void
ngx_pty_session_tty_mode(ngx_pty_session_t *s)
{
    struct termios  tio;

    if (tcgetattr(s->pty->fd, &tio) == 0) {
        s->sh->tty_noecho = (tio.c_lflag & ICANON) && !(tio.c_lflag & ECHO);
    }
}


/* drops a view nobody here uses any more */
void
ngx_pty_session_put(ngx_pty_session_t *s)
{
    if (s->owner || s->pinned || !ngx_queue_empty(&s->listeners)) {
        return;
    }

    ngx_pty_session_free(s);
}


static void
ngx_pty_session_free(ngx_pty_session_t *s)
{
    ngx_pty_log_limit_end(&s->input_log, s->log);
    ngx_pty_session_release_io(s);

    if (s->screen) {
        ngx_pty_screen_destroy(s->screen);
        s->screen = NULL;
    }

    if (s->input) {
        ngx_free(s->input);
    }

    if (s->screen_ev.posted) {
        ngx_delete_posted_event(&s->screen_ev);
    }

    if (s->drain.timer_set) {
        ngx_del_timer(&s->drain);
    }

    if (s->linger.timer_set) {
        ngx_del_timer(&s->linger);
    }

    if (s->keyframe.timer_set) {
        ngx_del_timer(&s->keyframe);
    }

    if (s->limits.timer_set) {
        ngx_del_timer(&s->limits);
    }

    if (s->batch.timer_set) {
        ngx_del_timer(&s->batch);
    }

    if (s->redact_ev.timer_set) {
        ngx_del_timer(&s->redact_ev);
    }

    if (s->redact) {
        ngx_pty_redact_destroy(s->redact);
        s->redact = NULL;
    }

    ngx_pty_mask_set(&s->sh->listen_mask, ngx_pty_doorbell_slot(), 0);

    ngx_rbtree_delete(&ngx_pty_local, &s->node);
    ngx_pty_shm_session_release(s->sh);
    ngx_destroy_pool(s->pool);
}


void
ngx_pty_session_listen(ngx_pty_session_t *s, ngx_pty_listener_t *l)
{
    ngx_queue_insert_tail(&s->listeners, &l->queue);
    ngx_pty_session_interest(s);
}


void
ngx_pty_session_unlisten(ngx_pty_session_t *s, ngx_pty_listener_t *l)
{
    ngx_queue_remove(&l->queue);
    ngx_pty_session_interest(s);
    ngx_pty_session_put(s);
}


/* this worker wants the session's doorbell while it owns it or serves it */
static void
ngx_pty_session_interest(ngx_pty_session_t *s)
{
    ngx_pty_mask_set(&s->sh->listen_mask, ngx_pty_doorbell_slot(),
                     s->owner || !ngx_queue_empty(&s->listeners));
}


/* new frames: this worker's listeners, then every other interested one */
void
ngx_pty_session_notify(ngx_pty_session_t *s)
{
    ngx_pty_session_notify_local(s);
    ngx_pty_doorbell_wake(s->sh, &s->sh->listen_mask);
    ngx_pty_store_note(s->sh);
}


static void
ngx_pty_session_notify_local(ngx_pty_session_t *s)
{
    ngx_queue_t         *q, *next;
    ngx_pty_listener_t  *l;

    for (q = ngx_queue_head(&s->listeners);
         q != ngx_queue_sentinel(&s->listeners);
         q = next)
    {
        next = ngx_queue_next(q);
        l = ngx_queue_data(q, ngx_pty_listener_t, queue);
        l->notify(l);
    }
}


ngx_pty_frame_t *
ngx_pty_session_append(ngx_pty_session_t *s, ngx_uint_t kind,
    uint32_t target, u_char *json, size_t len)
{
    ngx_pty_frame_t  *f;

    ngx_pty_ring_reserve(s->sh, len, 0);

    ngx_pty_shm_lock(s->sh);
    f = ngx_pty_ring_append(s->sh, kind, target, json, len);
    ngx_pty_shm_unlock(s->sh);

    if (f == NULL) {
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "pty: frame of %uz bytes does not fit the ring of "
                      "session pty-%ui; raise %s",
                      len, s->sh->name,
                      s->sh->ring->grow_failed
                      ? "the size in \"pty_zone\""
                      : s->sh->ring->capped ? "\"pty_session_max_memory\""
                                            : "\"pty_ring_max_size\"");
        return NULL;
    }

    ngx_pty_session_notify(s);

    return f;
}


static void
ngx_pty_session_ctl_handler(ngx_event_t *rev)
{
    ngx_fd_t               fd;
    ngx_int_t              rc;
    ngx_connection_t      *c;
    ngx_pty_session_t     *s;
    ngx_pty_keeper_msg_t   msg;

    c = rev->data;
    s = c->data;

    for ( ;; ) {
        rc = ngx_pty_keeper_recv(c->fd, &msg, &fd, s->log);

        if (rc == NGX_AGAIN) {
            if (ngx_handle_read_event(rev, 0) != NGX_OK) {
                ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                                      "bridge_eof: cannot watch the keeper");
            }

            return;
        }

        if (rc != NGX_OK) {
            /* the keeper is gone: the zone may still hold the status */
            ngx_pty_keeper_spare_refill(s->log);
            ngx_pty_session_release_io(s);

            if (!s->exited && (s->sh->keeper_status & 1)) {
                s->exited = 1;
                s->wait_status = (ngx_int_t) (s->sh->keeper_status >> 1);
            }

            if (s->exited) {
                ngx_pty_session_exited(s);

            } else if (s->killing) {
                /*
                 * asked to stop, gone before it could tell how: a spare
                 * stops before it reads its start (t/29)
                 */
                ngx_pty_session_close(s, s->kill_reason, -1,
                                      s->kill_detail ? s->kill_detail
                                      : "explicit_close: before the "
                                        "program started");

            } else {
                ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                                      "bridge_eof: the session keeper died");
            }

            return;
        }

        if (msg.type != NGX_PTY_KEEPER_READY && fd != NGX_INVALID_FILE) {
            /* only READY carries one */
            close(fd);
        }

        if (msg.type == NGX_PTY_KEEPER_READY
            || msg.type == NGX_PTY_KEEPER_FAILED)
        {
            ngx_pty_keeper_spare_refill(s->log);
        }

        switch (msg.type) {

        case NGX_PTY_KEEPER_READY:
            if (fd == NGX_INVALID_FILE
                || ngx_pty_session_ready(s, fd, msg.value) != NGX_OK)
            {
                if (fd != NGX_INVALID_FILE) {
                    close(fd);
                }

                (void) kill(s->sh->keeper, SIGTERM);
                ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                                      "cannot read the terminal");
                return;
            }

            break;

        case NGX_PTY_KEEPER_FAILED:
            ngx_pty_session_log_command(s, NGX_LOG_ERR, msg.value,
                                        "not started, keeper",
                                        s->sh->keeper);
            ngx_pty_session_close(s, NGX_PTY_CLOSED_ERROR, -1,
                                  "bridge_start_failed: the program could "
                                  "not be started");
            return;

        case NGX_PTY_KEEPER_EXIT:
            s->exited = 1;
            s->wait_status = msg.value;
            ngx_pty_session_exited(s);
            return;
        }
    }
}


static ngx_int_t
ngx_pty_session_ready(ngx_pty_session_t *s, ngx_fd_t fd, ngx_pid_t child)
{
    u_char            *local;
    size_t             len, start;
    struct winsize     ws;
    ngx_connection_t  *c;

    if (ngx_nonblocking(fd) == -1) {
        return NGX_ERROR;
    }

    c = ngx_get_connection(fd, s->log);
    if (c == NULL) {
        return NGX_ERROR;
    }

    c->data = s;
    c->read->handler = ngx_pty_session_read_handler;
    c->write->handler = ngx_pty_session_write_handler;
    c->read->log = s->log;
    c->write->log = s->log;
    s->pty = c;

    if (ngx_pty_session_redactor(s) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_pty_shm_lock(s->sh);
    s->sh->child = child;
    s->sh->state = NGX_PTY_STATE_RUNNING;
    ws.ws_col = (unsigned short) s->sh->cols;
    ws.ws_row = (unsigned short) s->sh->rows;
    ngx_pty_shm_unlock(s->sh);

    /* a resize may have come while the terminal was on its way */
    ws.ws_xpixel = 0;
    ws.ws_ypixel = 0;

    if (ioctl(fd, TIOCSWINSZ, &ws) == -1) {
        ngx_log_error(NGX_LOG_ERR, s->log, ngx_errno,
                      "pty: ioctl(TIOCSWINSZ) on session pty-%ui failed",
                      s->sh->name);
    }

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_pty_session_notify(s);

    /*
     * What other workers asked for while the terminal was not open comes
     * before what was typed here meanwhile: a worker that gave the session
     * up put its unwritten input at the inbox's head, and it is older
     */
    local = s->input;
    start = s->input_start;
    len = s->input_len;
    s->input = NULL;
    s->input_start = 0;
    s->input_len = 0;
    s->input_size = 0;

    ngx_pty_session_drain_inbox(s);

    if (local) {
        (void) ngx_pty_session_input(s, local + start, len);
        ngx_free(local);
    }

    if (s->input_len) {
        ngx_post_event(c->write, &ngx_posted_events);
    }

    return NGX_OK;
}


/*
 * Output frames for what was read (the caller holds the session lock); a
 * ring the full zone could not grow takes it in smaller frames.  Returns
 * the last frame's sequence, 0 if none could be kept.
 */
static uint64_t
ngx_pty_session_append_output(ngx_pty_session_sh_t *sh, u_char *buf,
    size_t n)
{
    size_t            k;
    uint64_t          seq, off;
    ngx_pty_frame_t  *f;

    /* an Output's anchor is where its bytes start in the scrollback */
    off = sh->scroll->head;

    for (seq = 0; n; buf += k, n -= k, off += k) {
        k = n;

        while ((f = ngx_pty_ring_append(sh, NGX_PTY_FRAME_OUTPUT, 0, buf, k))
               == NULL && k > 256)
        {
            k /= 2;
        }

        if (f) {
            f->anchor = off;
            seq = f->seq;
        }
    }

    return seq;
}


/* one read's output: to the ring and the scrollback, counted for Keyframes */
static void
ngx_pty_session_store(ngx_pty_session_t *s, u_char *buf, size_t n)
{
    uint64_t               seq;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    ngx_pty_ring_reserve(sh, n, n);

    ngx_pty_shm_lock(sh);
    seq = ngx_pty_session_append_output(sh, buf, n);
    ngx_pty_scroll_append(sh->scroll, buf, n);
    sh->last_output = seq ? seq : sh->last_output;
    sh->active = ngx_time();
    ngx_pty_shm_unlock(sh);

    s->frames_since_keyframe++;
    s->output_since_keyframe = 1;
    s->last_active = ngx_current_msec;

    if (s->frames_since_keyframe >= s->params.keyframe_interval_frames) {
        /* at most keyframe_interval_frames Outputs between two */
        ngx_pty_session_keyframe_handler(&s->keyframe);
    }
}


/* a turn's output is stored: the clients hear of it, now or batched */
static void
ngx_pty_session_stored(ngx_pty_session_t *s, size_t got, ngx_uint_t urgent)
{
    s->urgent = urgent;
    s->unnotified += got;

    if (s->urgent || s->eof
        || s->unnotified >= NGX_PTY_BATCH_BYTES
        || ngx_current_msec - s->notified >= NGX_PTY_BATCH_MSEC)
    {
        ngx_pty_session_batch_handler(&s->batch);

    } else if (!s->batch.timer_set) {
        ngx_add_timer(&s->batch, NGX_PTY_BATCH_MSEC);
    }

    s->urgent = 0;

    /* the model folds after the clients are served and input is read */
    if (!s->screen_ev.posted) {
        ngx_post_event(&s->screen_ev, &ngx_posted_next_events);
    }

    if (s->output_since_keyframe && !s->keyframe.timer_set) {
        ngx_add_timer(&s->keyframe,
                      s->params.keyframe_interval_seconds * 1000);
    }
}


static void
ngx_pty_session_read_handler(ngx_event_t *rev)
{
    u_char                 buf[NGX_PTY_READ_CHUNK];
    size_t                 got, reach;
    ssize_t                n;
    ngx_uint_t             i;
    ngx_pty_ring_t        *ring;
    ngx_connection_t      *c;
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;

    c = rev->data;
    s = c->data;
    sh = s->sh;
    got = 0;

    for (i = 0; i < NGX_PTY_READ_BUDGET; i++) {

        /* the ring grows ahead of appends up to pty_ring_size */
        ring = sh->ring;
        reach = ngx_pty_ring_reach(ring);

        if (ring->head - s->screen_off
            > ngx_min(reach / 2, NGX_PTY_SCREEN_LAG))
        {
            /* the screen model must not fall behind: wait for it */
            s->throttled = 1;

            if (!s->screen_ev.posted) {
                /* a new owner starts behind, with nothing folding yet */
                ngx_post_event(&s->screen_ev, &ngx_posted_next_events);
            }

            break;
        }

        n = read(c->fd, buf, sizeof(buf));

        if (n > 0) {
            ngx_pty_session_output(s, buf, n, (size_t) n == sizeof(buf));
            got += n;

            if ((size_t) n < sizeof(buf) && !s->exited) {
                /*
                 * The line discipline is empty: another read now would
                 * wait in the kernel (n_tty_read() flushes the pending tty
                 * work synchronously), which under a flood blocks the
                 * whole worker for as long as the kernel's tty worker
                 * takes to get a CPU.  The next output raises the next
                 * edge-triggered event.  Once the program has exited,
                 * reads go on to EIO: no event may follow.
                 */
                break;
            }

            continue;
        }

        if (n == -1 && ngx_errno == NGX_EAGAIN) {
            if (ngx_handle_read_event(rev, 0) != NGX_OK) {
                s->eof = 1;
            }

            break;
        }

        if (n == -1 && ngx_errno == NGX_EINTR) {
            continue;
        }

        /* EIO: every holder of the slave side is gone */
        s->eof = 1;
        break;
    }

    if (i == NGX_PTY_READ_BUDGET) {
        /*
         * Let other sessions and clients have a turn too: after the next
         * poll of the kernel, so that a flood cannot hold the posted queue
         * (and the keystrokes of other sessions) to itself.
         */
        ngx_post_event(rev, &ngx_posted_next_events);
    }

    if (got) {
        /* a few bytes that emptied the terminal are most likely an echo */
        ngx_pty_session_stored(s, got,
                               got <= NGX_PTY_URGENT_MAX
                               && i < NGX_PTY_READ_BUDGET);
    }

    if (s->eof) {
        ngx_pty_session_release_io(s);

        if (s->exited) {
            ngx_pty_session_exited(s);
        }
    }
}


/* pty_redact on: the owner of the terminal masks what it reads */
static ngx_int_t
ngx_pty_session_redactor(ngx_pty_session_t *s)
{
    ngx_pty_main_conf_t  *pmcf;

    if (!s->sh->redact || s->redact) {
        return NGX_OK;
    }

    pmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle, ngx_pty_module);

    if (pmcf->redact->regex == NULL) {
        return NGX_OK;          /* no pattern at all: nginx -t said so */
    }

    s->redact = ngx_pty_redact_create(pmcf->redact, s->log);
    s->redact_wait = pmcf->redact->wait;

    return s->redact ? NGX_OK : NGX_ERROR;
}


/* one read's output, masked first when the session redacts */
static void
ngx_pty_session_output(ngx_pty_session_t *s, u_char *buf, size_t n,
    ngx_uint_t full)
{
    u_char  *out;
    size_t   len;

    if (s->redact == NULL) {
        ngx_pty_session_store(s, buf, n);
        return;
    }

    len = ngx_pty_redact_feed(s->redact, buf, n, full, &out);

    if (len) {
        ngx_pty_session_store_masked(s, out, len);
    }

    if (ngx_pty_redact_held(s->redact)) {
        if (!s->redact_ev.timer_set) {
            ngx_add_timer(&s->redact_ev, s->redact_wait);
        }

    } else if (s->redact_ev.timer_set) {
        ngx_del_timer(&s->redact_ev);
    }
}


/*
 * Masked output to the ring; first, what it hid to the ledger, by the
 * scrollback offsets it is about to take (only the owner appends), so
 * a consumer shown the raw stream never meets a span not yet kept.
 */
static void
ngx_pty_session_store_masked(ngx_pty_session_t *s, u_char *out, size_t len)
{
    uint64_t                off;
    ngx_uint_t              i, n;
    ngx_pty_session_sh_t   *sh;
    ngx_pty_redact_span_t  *sp;

    sh = s->sh;
    n = ngx_pty_redact_spans(s->redact, &sp);

    if (n && ngx_pty_reveal_prepare(sh) == NGX_OK) {
        off = sh->scroll->head;

        ngx_pty_shm_lock(sh);

        for (i = 0; i < n; i++) {
            ngx_pty_reveal_keep(sh, off + sp[i].pos, sp[i].raw, sp[i].len);
        }

        ngx_pty_shm_unlock(sh);
    }

    ngx_pty_session_store(s, out, len);
}


/* no more output came: what was held back is not a secret's start */
static void
ngx_pty_session_redact_handler(ngx_event_t *ev)
{
    u_char             *out;
    size_t              len;
    ngx_pty_session_t  *s;

    s = ev->data;

    if (ev->timer_set) {
        ngx_del_timer(ev);
    }

    if (s->redact == NULL || ngx_pty_redact_held(s->redact) == 0) {
        return;
    }

    len = ngx_pty_redact_flush(s->redact, &out);

    if (len) {
        ngx_pty_session_store_masked(s, out, len);
        ngx_pty_session_stored(s, len, 1);
    }
}


/*
 * Output of a flood is notified every NGX_PTY_BATCH_BYTES or
 * NGX_PTY_BATCH_MSEC, whichever comes first, rather than a PTY read at a
 * time: each notification costs every client a write and every other
 * worker a wake-up.  The first read after a quiet spell goes at once.
 */
static void
ngx_pty_session_batch_handler(ngx_event_t *ev)
{
    ngx_pty_session_t  *s;

    s = ev->data;

    if (ev->timer_set) {
        ngx_del_timer(ev);
    }

    s->unnotified = 0;
    s->notified = ngx_current_msec;
    ngx_pty_session_notify(s);
}


static void
ngx_pty_session_screen_handler(ngx_event_t *ev)
{
    ngx_pty_session_t  *s;

    s = ev->data;

    if (s->screen == NULL) {
        /* a resize while the keeper is forked: folded with the output */
        return;
    }

    ngx_pty_session_fold(s, NGX_PTY_SCREEN_BUDGET);

    if (s->screen_off < s->sh->ring->head) {
        ngx_post_event(ev, &ngx_posted_next_events);
        return;
    }

    if (s->throttled && s->pty) {
        s->throttled = 0;
        ngx_post_event(s->pty->read, &ngx_posted_events);
    }
}


/*
 * Feeds ring frames into the screen model, behind the clients: consecutive
 * Output frames in one piece, so the model sees whole screenfuls of lines
 * it can skip (ngx_pty_screen.c).
 */
static void
ngx_pty_session_fold(ngx_pty_session_t *s, size_t budget)
{
    u_char                 buf[NGX_PTY_FOLD_CHUNK];
    size_t                 done, len;
    uint64_t               seq, off;
    ngx_uint_t             cols, rows, resize;
    ngx_pty_frame_t       *f;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    if (s->screen == NULL) {
        return;
    }

    for (done = 0; done < budget; /* void */ ) {
        len = 0;
        resize = 0;
        seq = s->screen_seq;
        cols = 0;
        rows = 0;

        ngx_pty_shm_lock(sh);

        if (s->screen_off < sh->ring->tail) {
            /* cannot happen while reads are throttled; never loop on it */
            s->screen_off = sh->ring->tail;
        }

        for (off = s->screen_off;
             (f = ngx_pty_ring_read(sh->ring, &off)) != NULL;
             s->screen_off = off)
        {
            if (f->kind == NGX_PTY_FRAME_RESIZE) {
                if (len == 0) {
                    resize = 1;
                    seq = f->seq;
                    cols = f->cols;
                    rows = f->rows;
                    s->screen_off = off;
                }

                break;
            }

            if (f->kind != NGX_PTY_FRAME_OUTPUT) {
                continue;
            }

            if (len + f->len > sizeof(buf)) {
                break;
            }

            ngx_memcpy(buf + len, ngx_pty_frame_data(f), f->len);
            len += f->len;
            seq = f->seq;
        }

        ngx_pty_shm_unlock(sh);

        if (resize) {
            (void) ngx_pty_screen_resize(s->screen, cols, rows);

        } else if (len) {
            ngx_pty_screen_feed(s->screen, buf, len);

        } else {
            return;
        }

        s->screen_seq = seq;

        /*
         * a resize rebuilds the screen and its scrollback ring (reflow, as
         * xterm.js does): it costs what its cells cost, not a byte
         */
        done += (resize ? cols * rows : len) + 1;
    }
}


/*
 * Answers to terminal queries (docs/PROTOCOL.md, "Terminal queries"):
 * a controller's terminal answers them itself (xterm.js does), so by
 * default ours go only when no controller is attached; "pty_answer_queries"
 * makes it always or never.
 */
static void
ngx_pty_session_reply(void *data, const u_char *buf, size_t len)
{
    ngx_pty_session_t  *s = data;

    if (s->pty == NULL || s->answer_queries == NGX_PTY_ANSWER_CLIENT) {
        return;
    }

    if (s->answer_queries == NGX_PTY_ANSWER_AUTO && s->sh->controllers) {
        return;
    }

    (void) ngx_pty_session_input(s, (u_char *) buf, len);
}


/* one line per episode of input not taken, however fast it comes */
static ngx_uint_t
ngx_pty_session_log_input(ngx_pty_session_t *s, ngx_uint_t level)
{
    return ngx_pty_log_limit(&s->input_log, s->log, level,
                             "session input not taken");
}


ngx_int_t
ngx_pty_session_input(ngx_pty_session_t *s, u_char *data, size_t len)
{
    ssize_t           n;
    ngx_pty_inbox_t   rec;

    if (!s->owner) {
        ngx_memzero(&rec, sizeof(ngx_pty_inbox_t));
        rec.type = NGX_PTY_INBOX_INPUT;
        rec.len = (uint32_t) len;
        return ngx_pty_session_forward(s, &rec, data);
    }

    if (s->closed || (s->pty == NULL && !ngx_pty_session_coming(s))) {
        return NGX_DECLINED;
    }

    s->last_active = ngx_current_msec;

    /*
     * What other workers queued before goes first: after a reload a
     * client's earlier input may still be in the inbox, put there by the
     * worker it was on, when its next input comes here
     */
    if (s->sh->inbox_len && s->pty && !s->draining) {
        ngx_pty_session_drain_inbox(s);
    }

    /* before the terminal arrives from the keeper, input waits in order */
    if (s->input_len == 0 && s->pty) {
        ngx_pty_session_tty_mode(s);

        n = write(s->pty->fd, data, len);

        if (n == (ssize_t) len) {
            return NGX_OK;
        }

        if (n == -1 && ngx_errno != NGX_EAGAIN && ngx_errno != NGX_EINTR) {
            if (ngx_pty_session_log_input(s, NGX_LOG_ERR)) {
                ngx_log_error(NGX_LOG_ERR, s->log, ngx_errno,
                              "pty: write to session pty-%ui failed",
                              s->sh->name);
            }

            return NGX_ERROR;
        }

        if (n > 0) {
            data += n;
            len -= n;
        }
    }

    /* the program reads slower than input comes: keep it, in order */
    if (len > NGX_PTY_INPUT_MAX - s->input_len) {
        if (ngx_pty_session_log_input(s, NGX_LOG_WARN)) {
            ngx_log_error(NGX_LOG_WARN, s->log, 0,
                          "pty: session pty-%ui does not read its input, "
                          "%uz bytes dropped", s->sh->name, len);
        }

        return NGX_ERROR;
    }

    if (ngx_pty_session_input_room(s, len) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_memcpy(s->input + s->input_start + s->input_len, data, len);
    s->input_len += len;

    if (s->pty && ngx_handle_write_event(s->pty->write, 0) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * Room for len more bytes behind the queued input.  What the terminal
 * took is skipped by input_start, not moved at each write: the queue is
 * moved down only when that frees at least as much as it moves (or the
 * bound leaves no other way), and grows by doubling, so a flood of small
 * inputs or a program reading a few bytes at a time costs each byte O(1).
 */
static ngx_int_t
ngx_pty_session_input_room(ngx_pty_session_t *s, size_t len)
{
    size_t   size;
    u_char  *p;

    if (s->input_start + s->input_len + len <= s->input_size) {
        return NGX_OK;
    }

    if (s->input_len + len <= s->input_size
        && (s->input_start >= s->input_len
            || s->input_size == NGX_PTY_INPUT_MAX))
    {
        ngx_memmove(s->input, s->input + s->input_start, s->input_len);
        s->input_start = 0;
        return NGX_OK;
    }

    size = ngx_max(s->input_size * 2, 4096);
    size = ngx_min(ngx_max(size, s->input_len + len), NGX_PTY_INPUT_MAX);

    p = ngx_alloc(size, s->log);
    if (p == NULL) {
        return NGX_ERROR;
    }

    if (s->input) {
        ngx_memcpy(p, s->input + s->input_start, s->input_len);
        ngx_free(s->input);
    }

    s->input = p;
    s->input_start = 0;
    s->input_size = size;

    return NGX_OK;
}


/* the terminal took n queued bytes; a drained queue gives its memory back */
static void
ngx_pty_session_input_taken(ngx_pty_session_t *s, size_t n)
{
    s->input_start += n;
    s->input_len -= n;

    if (s->input_len == 0) {
        ngx_free(s->input);
        s->input = NULL;
        s->input_start = 0;
        s->input_size = 0;
    }
}


/*
 * The keeper has not handed the terminal over yet, but will; or it is
 * still being forked (no spare was there for the start)
 */
static ngx_uint_t
ngx_pty_session_coming(ngx_pty_session_t *s)
{
    return (s->ctl != NULL || s->spawn != NULL) && !s->exited && !s->closed;
}


static void
ngx_pty_session_write_handler(ngx_event_t *wev)
{
    ssize_t             n;
    ngx_connection_t   *c;
    ngx_pty_session_t  *s;

    c = wev->data;
    s = c->data;

    if (s->input_len == 0) {
        return;
    }

    n = write(c->fd, s->input + s->input_start, s->input_len);

    if (n == -1) {
        if (ngx_errno == NGX_EAGAIN || ngx_errno == NGX_EINTR) {
            (void) ngx_handle_write_event(wev, 0);
            return;
        }

        ngx_log_error(NGX_LOG_ERR, s->log, ngx_errno,
                      "pty: write to session pty-%ui failed", s->sh->name);
        ngx_pty_session_input_taken(s, s->input_len);
        return;
    }

    ngx_pty_session_input_taken(s, n);

    if (s->input_len) {
        (void) ngx_handle_write_event(wev, 0);
    }
}


ngx_int_t
ngx_pty_session_resize(ngx_pty_session_t *s, ngx_uint_t cols, ngx_uint_t rows)
{
    struct winsize         ws;
    ngx_pty_inbox_t        rec;
    ngx_pty_frame_t       *f;
    ngx_pty_session_sh_t  *sh;

    if (!s->owner) {
        ngx_memzero(&rec, sizeof(ngx_pty_inbox_t));
        rec.type = NGX_PTY_INBOX_RESIZE;
        rec.cols = (uint16_t) cols;
        rec.rows = (uint16_t) rows;
        return ngx_pty_session_forward(s, &rec, NULL);
    }

    if (s->closed || (s->pty == NULL && !ngx_pty_session_coming(s))) {
        return NGX_DECLINED;
    }

    sh = s->sh;

    ngx_memzero(&ws, sizeof(struct winsize));
    ws.ws_col = (unsigned short) cols;
    ws.ws_row = (unsigned short) rows;

    /* the kernel sends SIGWINCH to the foreground process group; a
     * terminal still on its way gets the size when it arrives */
    if (s->pty && ioctl(s->pty->fd, TIOCSWINSZ, &ws) == -1) {
        ngx_log_error(NGX_LOG_ERR, s->log, ngx_errno,
                      "pty: ioctl(TIOCSWINSZ) on session pty-%ui failed",
                      sh->name);
        return NGX_ERROR;
    }

    ngx_pty_shm_lock(sh);

    sh->cols = cols;
    sh->rows = rows;

    f = ngx_pty_ring_append(sh, NGX_PTY_FRAME_RESIZE, 0, NULL, 0);
    if (f) {
        f->cols = (uint16_t) cols;
        f->rows = (uint16_t) rows;
        sh->last_output = f->seq;
    }

    ngx_pty_shm_unlock(sh);

    ngx_pty_session_notify(s);

    if (!s->screen_ev.posted) {
        ngx_post_event(&s->screen_ev, &ngx_posted_events);
    }

    return NGX_OK;
}


/* a Keyframe of everything output so far; target 0 sends it to everyone */
ngx_pty_frame_t *
ngx_pty_session_keyframe(ngx_pty_session_t *s, uint32_t target)
{
    u_char                 *snap;
    size_t                  len;
    ngx_uint_t              cols, rows;
    ngx_pty_frame_t        *f;
    ngx_pty_session_sh_t   *sh;

    if (s->owner && s->screen == NULL && s->spawn) {
        /* joined while its keeper is on its way: the screen is blank */
        if (ngx_pty_session_screen_init(s, NULL) != NGX_OK) {
            return NULL;
        }
    }

    if (!s->owner || s->screen == NULL) {
        return NULL;
    }

    sh = s->sh;

    /* all output appended before this frame is folded in: no gap */
    ngx_pty_session_fold(s, (size_t) -1);

    snap = ngx_pty_screen_snapshot(s->screen, &len);
    if (snap == NULL) {
        return NULL;
    }

    ngx_pty_screen_size(s->screen, (unsigned *) &cols, (unsigned *) &rows);

    ngx_pty_ring_reserve(sh, len, 0);

    ngx_pty_shm_lock(sh);

    f = ngx_pty_ring_append(sh, NGX_PTY_FRAME_KEYFRAME, target, snap, len);
    if (f) {
        f->anchor = s->screen_seq;
        f->cols = (uint16_t) cols;
        f->rows = (uint16_t) rows;
    }

    ngx_pty_shm_unlock(sh);

    free(snap);

    if (f == NULL) {
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "pty: keyframe of %uz bytes does not fit the ring of "
                      "session pty-%ui; raise %s",
                      len, sh->name,
                      sh->ring->grow_failed ? "the size in \"pty_zone\""
                      : sh->ring->capped ? "\"pty_session_max_memory\""
                                         : "\"pty_ring_max_size\"");
        return NULL;
    }

    if (target == 0) {
        s->frames_since_keyframe = 0;
        s->output_since_keyframe = 0;
        s->last_keyframe = ngx_current_msec;
        s->keyframe_anchor = s->screen_seq;
    }

    ngx_pty_session_notify(s);

    return f;
}


/*
 * A Keyframe for one client (or all): made here by the owner, or asked of
 * the owner through the inbox; it reaches the client through the ring.
 */
ngx_int_t
ngx_pty_session_request_keyframe(ngx_pty_session_t *s, uint32_t target)
{
    ngx_pty_inbox_t  rec;

    if (s->owner && (s->screen || s->sh->state < NGX_PTY_STATE_CLOSED)) {
        return ngx_pty_session_keyframe(s, target) ? NGX_OK : NGX_ERROR;
    }

    /* ended, and no model here (another's, or one from the archive) */
    if (s->sh->state >= NGX_PTY_STATE_CLOSED) {
        return ngx_pty_session_keyframe_replayed(s, target);
    }

    ngx_memzero(&rec, sizeof(ngx_pty_inbox_t));
    rec.type = NGX_PTY_INBOX_KEYFRAME;
    rec.target = target;

    return ngx_pty_session_forward(s, &rec, NULL);
}


/* the periodic Keyframe: only while output flows */
static void
ngx_pty_session_keyframe_handler(ngx_event_t *ev)
{
    ngx_pty_session_t  *s;

    s = ev->data;

    if (ev->timer_set) {
        ngx_del_timer(ev);
    }

    if (s->closed || !s->output_since_keyframe) {
        return;
    }

    (void) ngx_pty_session_keyframe(s, 0);
}


/* pty_max_age and pty_idle_timeout: one timer, due at the nearer one */
static void
ngx_pty_session_limits_arm(ngx_pty_session_t *s)
{
    ngx_msec_t  due, t;

    due = NGX_TIMER_INFINITE;

    if (s->max_age) {
        t = s->started + s->max_age - ngx_current_msec;
        due = (ngx_msec_int_t) t > 0 ? t : 1;
    }

    if (s->idle_timeout) {
        t = s->last_active + s->idle_timeout - ngx_current_msec;
        t = (ngx_msec_int_t) t > 0 ? t : 1;
        due = ngx_min(due, t);
    }

    if (due != NGX_TIMER_INFINITE) {
        ngx_add_timer(&s->limits, due);
    }
}


static void
ngx_pty_session_limits_handler(ngx_event_t *ev)
{
    ngx_msec_t          now;
    ngx_uint_t          aged;
    ngx_pty_session_t  *s;

    s = ev->data;
    now = ngx_current_msec;

    if (s->closed || s->killing) {
        return;
    }

    aged = (s->max_age && now - s->started >= s->max_age);

    if (aged
        || (s->idle_timeout && now - s->last_active >= s->idle_timeout))
    {
        ngx_log_error(NGX_LOG_INFO, s->log, 0,
                      "pty: session pty-%ui reached its %s, ending it",
                      s->sh->name, aged ? "pty_max_age" : "pty_idle_timeout");

        /* the Closed detail names the limit, not the signal that ended it */
        s->kill_detail = aged ? "max_age: the session reached pty_max_age"
                              : "idle_timeout: no input or output for "
                                "pty_idle_timeout";

        (void) ngx_pty_session_kill(s, NGX_PTY_CLOSED_TIMEOUT);
        return;
    }

    ngx_pty_session_limits_arm(s);
}


ngx_int_t
ngx_pty_session_kill(ngx_pty_session_t *s, ngx_uint_t reason)
{
    ngx_pid_t        keeper;
    ngx_pty_inbox_t  rec;

    if (s->closed || s->sh->state >= NGX_PTY_STATE_CLOSED) {
        return NGX_DECLINED;
    }

    if (!s->owner && ngx_pty_doorbell_slot_of(s->sh->owner) != -1) {
        /* the owner must know why the child ends: the Closed frame says */
        ngx_memzero(&rec, sizeof(ngx_pty_inbox_t));
        rec.type = NGX_PTY_INBOX_KILL;
        rec.arg = (uint16_t) (reason | (s->kill_detail ? 0x100 : 0));

        if (ngx_pty_session_forward(s, &rec, NULL) == NGX_OK) {
            return NGX_OK;
        }
    }

    if (s->spawn) {
        /* its keeper has not come yet: none will */
        ngx_pty_session_close(s, reason, -1,
                              s->kill_detail ? s->kill_detail
                                             : "explicit_close: before the "
                                               "program started");
        return NGX_OK;
    }

    keeper = s->sh->keeper;

    if (s->owner) {
        s->killing = 1;
        s->kill_reason = reason;
    }

    /* the keeper runs SIGTERM, the grace period, SIGKILL */
    if (keeper > 0 && kill(keeper, SIGTERM) == -1) {
        ngx_log_error(NGX_LOG_ERR, s->log, ngx_errno,
                      "pty: kill(%P) of the keeper of pty-%ui failed",
                      keeper, s->sh->name);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void
ngx_pty_session_exited(ngx_pty_session_t *s)
{
    int          status;
    u_char       detail[64];
    ngx_int_t    code;
    ngx_uint_t   reason;

    if (s->pty && !s->eof) {
        /* collect what the program wrote last, then close */
        if (!s->drain.timer_set) {
            ngx_add_timer(&s->drain, NGX_PTY_DRAIN_GRACE);
        }

        ngx_post_event(s->pty->read, &ngx_posted_events);
        return;
    }

    status = (int) s->wait_status;
    reason = s->killing ? s->kill_reason : NGX_PTY_CLOSED_NORMAL;

    /* the extension's finer causes lead the detail (docs/PROTOCOL.md) */
    if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        ngx_sprintf(detail, "%s: terminated by signal %d%Z",
                    s->killing ? "explicit_close" : "command_result",
                    WTERMSIG(status));

    } else {
        code = WEXITSTATUS(status);
        ngx_sprintf(detail, "%s: exited with code %i%Z",
                    s->killing ? "explicit_close" : "command_result", code);
    }

    ngx_pty_session_close(s, reason, code,
                          (s->killing && s->kill_detail) ? s->kill_detail
                                                         : (char *) detail);
}


static void
ngx_pty_session_drain_handler(ngx_event_t *ev)
{
    ngx_pty_session_t  *s;

    s = ev->data;

    /* something still holds the terminal open; the program is done */
    ngx_pty_session_release_io(s);
    s->eof = 1;
    ngx_pty_session_exited(s);
}


static void
ngx_pty_session_close(ngx_pty_session_t *s, ngx_uint_t reason,
    ngx_int_t exit_code, const char *detail)
{
    u_char                 buf[NGX_PTY_CLOSED_MAX];
    size_t                 len;
    ngx_pty_session_sh_t  *sh;

    if (s->closed) {
        return;
    }

    s->closed = 1;
    sh = s->sh;

    if (s->spawn) {
        ngx_pty_keeper_spawn_cancel(s->spawn);
        s->spawn = NULL;
    }

    ngx_pty_session_fold(s, (size_t) -1);

    /*
     * The final screen in a Keyframe: once nobody is joined, the ring is
     * cut down to it and Closed (ngx_pty_session_settle)
     */
    if (s->screen && sh->last_output > s->keyframe_anchor) {
        (void) ngx_pty_session_keyframe(s, 0);
    }

    len = ngx_pty_closed_json(buf, sizeof(buf), reason, exit_code, detail);

    ngx_pty_ring_reserve(sh, len, 0);

    ngx_pty_shm_lock(sh);

    if (sh->state < NGX_PTY_STATE_CLOSED) {
        (void) ngx_pty_ring_append(sh, NGX_PTY_FRAME_CLOSED, 0, buf, len);
        sh->state = NGX_PTY_STATE_CLOSED;
        sh->exit_code = exit_code;
        sh->closed_reason = reason;
        sh->closed_at = ngx_pty_now_ms();
    }

    ngx_pty_shm_unlock(sh);

    ngx_log_error(NGX_LOG_INFO, s->log, 0,
                  "pty: session pty-%ui closed: %s, %s",
                  sh->name, ngx_pty_closed_reasons[reason], detail);

    ngx_pty_session_release_io(s);

    if (s->keyframe.timer_set) {
        ngx_del_timer(&s->keyframe);
    }

    if (s->limits.timer_set) {
        ngx_del_timer(&s->limits);
    }

    ngx_pty_session_notify(s);

    /* the record stays for late readers of the exit code and replay */
    ngx_add_timer(&s->linger, s->closed_linger);

    ngx_pty_session_settle(s);
}


void
ngx_pty_session_settle(ngx_pty_session_t *s)
{
    ngx_uint_t             idle;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    ngx_pty_shm_lock(sh);
    idle = (sh->state == NGX_PTY_STATE_CLOSED
            && ngx_queue_empty(&sh->members));
    ngx_pty_shm_unlock(sh);

    if (idle) {
        ngx_pty_shm_session_compact(sh);
    }
}


size_t
ngx_pty_closed_json(u_char *buf, size_t size, ngx_uint_t reason,
    ngx_int_t exit_code, const char *detail)
{
    u_char  *p;

    p = ngx_snprintf(buf, size - 200, "{\"kind\":\"Closed\",\"exit_code\":");

    p = (exit_code >= 0) ? ngx_sprintf(p, "%i", exit_code)
                         : ngx_pty_cpylit(p, "null");

    p = ngx_sprintf(p, ",\"reason\":\"%s\",\"detail\":\"",
                    ngx_pty_closed_reasons[reason]);

    p = ngx_pty_json_escape(p, (u_char *) detail,
                            ngx_min(ngx_strlen(detail), 128));

    *p++ = '"';
    *p++ = '}';

    return p - buf;
}


static void
ngx_pty_session_release_io(ngx_pty_session_t *s)
{
    if (s->pty) {
        /* what was held back goes before the terminal does */
        ngx_pty_session_redact_handler(&s->redact_ev);

        if (s->pty->read->posted) {
            ngx_delete_posted_event(s->pty->read);
        }

        ngx_close_connection(s->pty);
        s->pty = NULL;
    }

    if (s->ctl && s->closed) {
        ngx_close_connection(s->ctl);
        s->ctl = NULL;
    }
}


static void
ngx_pty_session_linger_handler(ngx_event_t *ev)
{
    ngx_pty_session_t  *s;

    s = ev->data;

    if (ev->timer_set) {
        ngx_del_timer(ev);
    }

    ngx_pty_shm_session_unlink(s->sh);

    s->owner = 0;
    ngx_pty_session_put(s);
}


/*
 * Worker exit (reload, stop): clients are told goodbye, and this worker
 * lets go of the terminals.  The keepers hold the PTYs, so the programs
 * keep running until nginx itself stops.
 */
void
ngx_pty_sessions_shutdown(ngx_cycle_t *cycle)
{
    ngx_queue_t         *q;
    ngx_rbtree_node_t   *node;
    ngx_pty_session_t   *s;
    ngx_pty_listener_t  *l;

    (void) cycle;

    if (ngx_pty_local.root == NULL) {
        return;
    }

    while (ngx_pty_local.root != ngx_pty_local.sentinel) {
        node = ngx_rbtree_min(ngx_pty_local.root, ngx_pty_local.sentinel);
        s = (ngx_pty_session_t *) node;

        /* the last listener leaving must not free it under us */
        s->pinned = 1;

        while (!ngx_queue_empty(&s->listeners)) {
            q = ngx_queue_head(&s->listeners);
            l = ngx_queue_data(q, ngx_pty_listener_t, queue);

            l->shutdown(l);

            if (!ngx_queue_empty(&s->listeners)
                && ngx_queue_head(&s->listeners) == q)
            {
                /* it could not detach itself */
                ngx_queue_remove(q);
            }
        }

        if (s->ctl) {
            ngx_close_connection(s->ctl);
            s->ctl = NULL;
        }

        if (s->owner) {
            ngx_pty_session_hand_over(s);
        }

        if (s->sh->owner == ngx_pid) {
            s->sh->owner = 0;
        }

        ngx_pty_session_free(s);
    }
}


/*
 * The worker is told to quit (a reload, or nginx -s quit): before its exit
 * hands the sessions over, its listeners may say goodbye and still take
 * what their clients sent until they answer (ngx_pty_binding_quit).
 */
void
ngx_pty_sessions_quit(void)
{
    ngx_queue_t         *q, *next;
    ngx_rbtree_node_t   *node;
    ngx_pty_session_t   *s;
    ngx_pty_listener_t  *l;

    if (ngx_pty_local.root == NULL
        || ngx_pty_local.root == ngx_pty_local.sentinel)
    {
        return;
    }

    ngx_pty_walking++;

    for (node = ngx_rbtree_min(ngx_pty_local.root, ngx_pty_local.sentinel);
         node;
         node = ngx_rbtree_next(&ngx_pty_local, node))
    {
        s = (ngx_pty_session_t *) node;

        /* a listener leaving here must not free the view under the walk */
        s->pinned = 1;

        for (q = ngx_queue_head(&s->listeners);
             q != ngx_queue_sentinel(&s->listeners);
             q = next)
        {
            next = ngx_queue_next(q);
            l = ngx_queue_data(q, ngx_pty_listener_t, queue);

            if (l->quit) {
                l->quit(l);
            }
        }
    }

    ngx_pty_walking--;
}


/*
 * Input this worker took but the terminal did not yet: it goes to the
 * head of the inbox, ahead of what other workers queued since (they came
 * later), for the next owner to write.
 */
static void
ngx_pty_session_hand_over(ngx_pty_session_t *s)
{
    ssize_t                n;
    ngx_int_t              rc;
    ngx_pty_inbox_t        rec;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    if (s->input_len && s->pty) {
        n = write(s->pty->fd, s->input + s->input_start, s->input_len);

        if (n > 0) {
            ngx_pty_session_input_taken(s, n);
        }
    }

    if (s->input_len == 0 || s->closed) {
        return;
    }

    ngx_memzero(&rec, sizeof(ngx_pty_inbox_t));
    rec.type = NGX_PTY_INBOX_INPUT;
    rec.len = (uint32_t) s->input_len;

    for ( ;; ) {
        ngx_pty_shm_lock(sh);
        rc = ngx_pty_inbox_unshift(sh, &rec, s->input + s->input_start);
        ngx_pty_shm_unlock(sh);

        if (rc != NGX_AGAIN
            || ngx_pty_inbox_grow(sh, sizeof(ngx_pty_inbox_t)
                                      + ngx_align(rec.len, 8))
               != NGX_OK)
        {
            break;
        }
    }

    if (rc != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "pty: %uz bytes of input to session pty-%ui are lost "
                      "with this worker's exit: no room in its inbox",
                      s->input_len, sh->name);
        return;
    }

    ngx_pty_session_input_taken(s, s->input_len);
}


/* the session ends with nginx: one Closed instance_terminated (locked) */
static ngx_uint_t
ngx_pty_session_sh_terminate(ngx_pty_session_sh_t *sh, ngx_log_t *log)
{
    u_char  buf[256];
    size_t  len;

    if (sh->state >= NGX_PTY_STATE_CLOSED) {
        return 0;
    }

    len = ngx_pty_closed_json(buf, sizeof(buf),
                              NGX_PTY_CLOSED_INSTANCE_TERMINATED, -1,
                              NGX_PTY_CLOSED_SHUTDOWN);

    (void) ngx_pty_ring_append(sh, NGX_PTY_FRAME_CLOSED, 0, buf, len);
    sh->state = NGX_PTY_STATE_CLOSED;
    sh->closed_reason = NGX_PTY_CLOSED_INSTANCE_TERMINATED;
    sh->closed_at = ngx_pty_now_ms();

    ngx_log_error(NGX_LOG_INFO, log, 0,
                  "pty: session pty-%ui closed: instance_terminated",
                  sh->name);

    return 1;
}


/*
 * nginx stops: every live session gets its one Closed frame and its
 * keeper is told to end the child.  Runs in the master (or the single
 * process) after the workers are gone.
 */
void
ngx_pty_sessions_terminate_all(ngx_log_t *log)
{
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_session_sh_t  *sh;

    zone = ngx_pty_shm_zone();
    if (zone == NULL) {
        return;
    }

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_next(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        ngx_pty_shm_lock(sh);

        if (ngx_pty_session_sh_terminate(sh, log) && sh->keeper > 0) {
            (void) kill(sh->keeper, SIGTERM);
        }

        ngx_pty_shm_unlock(sh);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}


static ngx_atomic_uint_t  ngx_pty_generation;


void
ngx_pty_instance_started(void)
{
    ngx_pty_zone_t  *zone;

    zone = ngx_pty_shm_zone();

    if (zone) {
        ngx_pty_generation = zone->sh->generation;
    }

    ngx_pty_shm_set_reclaim(ngx_pty_sessions_reclaim);
}


/*
 * A worker exits either because a reload replaced it (the zone's
 * generation moved on: its sessions live on in the new workers) or
 * because nginx stops.
 */
ngx_uint_t
ngx_pty_instance_stopping(void)
{
    ngx_pty_zone_t  *zone;

    zone = ngx_pty_shm_zone();

    return zone && zone->sh->generation == ngx_pty_generation;
}


u_char *
ngx_pty_session_screen_text(ngx_pty_session_t *s, size_t *len)
{
    if (!s->owner) {
        return ngx_pty_session_screen_rebuild(s, len);
    }

    if (s->screen == NULL) {
        return NULL;
    }

    ngx_pty_session_fold(s, (size_t) -1);

    return ngx_pty_screen_text(s->screen, len);
}


ngx_int_t
ngx_pty_session_screen_apply(ngx_pty_session_t *s,
    ngx_pty_screen_handler_pt handler, void *data)
{
    uint64_t           anchor;
    ngx_pty_screen_t  *screen;

    if (s->owner && s->screen) {
        ngx_pty_session_fold(s, (size_t) -1);
        handler(s->screen, data);
        return NGX_OK;
    }

    screen = ngx_pty_session_screen_replay(s, &anchor);
    if (screen == NULL) {
        return NGX_ERROR;
    }

    handler(screen, data);
    ngx_pty_screen_destroy(screen);

    return NGX_OK;
}


/*
 * The screen in a worker that does not own the terminal: a screen model
 * made for the occasion from the newest Keyframe in the ring and the
 * Output and Resize frames after its anchor; *anchor is the last of those.
 * A Keyframe made for one joiner is as good a start as a broadcast one:
 * in a small ring (a full zone, an ended session) it may be all that is
 * left.  The frames are copied out under the lock and folded after it, so
 * the lock is held only for a memory copy (at most the ring).
 */
static ngx_pty_screen_t *
ngx_pty_session_screen_replay(ngx_pty_session_t *s, uint64_t *anchor)
{
    u_char                *copy, *p, *last;
    size_t                 size;
    uint64_t               off, from, kf, base;
    ngx_pty_frame_t       *f;
    ngx_pty_screen_t      *screen;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;
    *anchor = 0;

    ngx_pty_shm_lock(sh);

    ngx_pty_session_replay_start(sh->ring, &kf, &base, &from);

    size = sh->ring->head - from;
    copy = ngx_alloc(size + 1, s->log);

    p = copy;

    /* the Keyframe first: frames after its anchor may precede it */
    if (copy && kf != sh->ring->head) {
        off = kf;
        f = ngx_pty_ring_read(sh->ring, &off);
        ngx_memcpy(p, f, sizeof(ngx_pty_frame_t) + f->len);
        p += ngx_align(sizeof(ngx_pty_frame_t) + f->len, 8);
    }

    for (off = from; copy && (f = ngx_pty_ring_read(sh->ring, &off)); ) {
        if ((f->kind == NGX_PTY_FRAME_OUTPUT
             || f->kind == NGX_PTY_FRAME_RESIZE)
            && f->seq > base)
        {
            /* 8-aligned for the header; the ring's records have room */
            ngx_memcpy(p, f, sizeof(ngx_pty_frame_t) + f->len);
            p += ngx_align(sizeof(ngx_pty_frame_t) + f->len, 8);
        }
    }

    ngx_pty_shm_unlock(sh);

    if (copy == NULL) {
        return NULL;
    }

    screen = ngx_pty_screen_create(sh->cols, sh->rows);
    if (screen == NULL) {
        ngx_free(copy);
        return NULL;
    }

    last = p;

    for (p = copy; p < last;
         p += ngx_align(sizeof(ngx_pty_frame_t) + f->len, 8))
    {
        f = (ngx_pty_frame_t *) p;

        if (f->kind == NGX_PTY_FRAME_OUTPUT) {
            ngx_pty_screen_feed(screen, ngx_pty_frame_data(f), f->len);
            *anchor = f->seq;
            continue;
        }

        if (f->kind == NGX_PTY_FRAME_KEYFRAME) {
            /* a snapshot is for a freshly reset terminal of its size */
            ngx_pty_screen_destroy(screen);

            screen = ngx_pty_screen_create(f->cols, f->rows);
            if (screen == NULL) {
                ngx_free(copy);
                return NULL;
            }

            ngx_pty_screen_feed(screen, ngx_pty_frame_data(f), f->len);
            *anchor = f->anchor;
            continue;
        }

        (void) ngx_pty_screen_resize(screen, f->cols, f->rows);
        *anchor = f->seq;
    }

    ngx_free(copy);

    return screen;
}


/*
 * Where a replay of the screen starts, under the lock: *kf the newest
 * Keyframe (ring->head: none), *base its anchor (0: none), *from the
 * first Output or Resize after that anchor, or the Keyframe if earlier.
 */
static void
ngx_pty_session_replay_start(ngx_pty_ring_t *ring, uint64_t *kf,
    uint64_t *base, uint64_t *from)
{
    uint64_t          off, at;
    ngx_pty_frame_t  *f;

    *kf = ring->head;
    *base = 0;
    *from = ring->head;

    for (off = ring->tail; (f = ngx_pty_ring_read(ring, &off)); ) {
        if (f->kind == NGX_PTY_FRAME_KEYFRAME) {
            *kf = off - ngx_pty_ring_need(f->len);
            *base = f->anchor;
        }
    }

    for (off = ring->tail; (f = ngx_pty_ring_read(ring, &off)); ) {
        at = off - ngx_pty_ring_need(f->len);

        if ((f->kind == NGX_PTY_FRAME_OUTPUT
             || f->kind == NGX_PTY_FRAME_RESIZE)
            && f->seq > *base)
        {
            *from = at;
            break;
        }
    }

    if (*kf < *from) {
        *from = *kf;
    }
}


static u_char *
ngx_pty_session_screen_rebuild(ngx_pty_session_t *s, size_t *len)
{
    u_char            *text;
    uint64_t           anchor;
    ngx_pty_screen_t  *screen;

    screen = ngx_pty_session_screen_replay(s, &anchor);
    if (screen == NULL) {
        return NULL;
    }

    text = ngx_pty_screen_text(screen, len);
    ngx_pty_screen_destroy(screen);

    return text;
}


/*
 * A Keyframe for one client of an ended session, in a worker that does
 * not own it: no owner will answer a request for it any more.
 */
static ngx_int_t
ngx_pty_session_keyframe_replayed(ngx_pty_session_t *s, uint32_t target)
{
    u_char            *snap;
    size_t             len;
    uint64_t           anchor;
    unsigned           cols, rows;
    ngx_pty_frame_t   *f;
    ngx_pty_screen_t  *screen;

    screen = ngx_pty_session_screen_replay(s, &anchor);
    if (screen == NULL) {
        return NGX_ERROR;
    }

    snap = ngx_pty_screen_snapshot(screen, &len);
    ngx_pty_screen_size(screen, &cols, &rows);
    ngx_pty_screen_destroy(screen);

    if (snap == NULL) {
        return NGX_ERROR;
    }

    ngx_pty_ring_reserve(s->sh, len, 0);

    ngx_pty_shm_lock(s->sh);

    f = ngx_pty_ring_append(s->sh, NGX_PTY_FRAME_KEYFRAME, target, snap, len);
    if (f) {
        f->anchor = anchor;
        f->cols = (uint16_t) cols;
        f->rows = (uint16_t) rows;
    }

    ngx_pty_shm_unlock(s->sh);

    free(snap);

    if (f == NULL) {
        return NGX_ERROR;
    }

    ngx_pty_session_notify(s);

    return NGX_OK;
}


/*
 * A request of a non-owner worker: queued in the session's inbox in the
 * zone, in order, and the owner's doorbell rung.  With no live owner this
 * worker takes the session over and serves the request itself.
 */
static ngx_int_t
ngx_pty_session_forward(ngx_pty_session_t *s, ngx_pty_inbox_t *rec,
    u_char *data)
{
    ngx_int_t              rc;
    ngx_pid_t              owner;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    for ( ;; ) {
        ngx_pty_shm_lock(sh);

        if (sh->state >= NGX_PTY_STATE_CLOSED) {
            ngx_pty_shm_unlock(sh);
            return NGX_DECLINED;
        }

        rc = ngx_pty_inbox_put(sh, rec, data);
        owner = sh->owner;

        ngx_pty_shm_unlock(sh);

        if (rc != NGX_AGAIN) {
            break;
        }

        /* the inbox is made or grown only when a request needs it */
        if (ngx_pty_inbox_grow(sh, sizeof(ngx_pty_inbox_t)
                                   + ngx_align(rec->len, 8))
            != NGX_OK)
        {
            if (ngx_pty_session_log_input(s, NGX_LOG_ERR)) {
                ngx_log_error(NGX_LOG_ERR, s->log, 0,
                              "pty: no room in the shared zone for the "
                              "inbox of session pty-%ui; raise the size in "
                              "\"pty_zone\"", sh->name);
            }

            return NGX_ERROR;
        }
    }

    if (rc != NGX_OK) {
        if (ngx_pty_session_log_input(s, NGX_LOG_ERR)) {
            ngx_log_error(NGX_LOG_ERR, s->log, 0,
                          "pty: the inbox of session pty-%ui is full "
                          "(%uz bytes): its owner, worker %P, is not taking "
                          "requests; raise \"pty_input_max\" to enlarge it",
                          sh->name, sh->inbox_size, owner);
        }

        return NGX_ERROR;
    }

    if (owner == 0 || !ngx_pty_pid_alive(owner)) {
        if (ngx_exiting || ngx_quit || ngx_terminate) {
            /* the worker that adopts it drains the inbox */
            return NGX_OK;
        }

        rc = ngx_pty_session_adopt(s);

        if (rc == NGX_OK) {
            ngx_pty_session_drain_inbox(s);
            return NGX_OK;
        }

        if (rc != NGX_DECLINED) {
            return NGX_OK;
        }

        /* another worker took it over meanwhile: it must look */
        owner = sh->owner;
    }

    ngx_pty_doorbell_wake_slot(sh, ngx_pty_doorbell_slot_of(owner));

    return NGX_OK;
}


/* the owner serves what other workers queued, in their order */
static void
ngx_pty_session_drain_inbox(ngx_pty_session_t *s)
{
    u_char                *buf, *p, *last, *old;
    size_t                 len;
    ngx_pty_inbox_t        rec;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    if (!s->owner || (s->pty == NULL && !s->closed)) {
        /* the terminal is not open yet: ready() drains */
        return;
    }

    ngx_pty_shm_lock(sh);

    len = sh->inbox_len;

    if (len == 0) {
        ngx_pty_shm_unlock(sh);
        return;
    }

    buf = ngx_alloc(len, s->log);
    if (buf == NULL) {
        ngx_pty_shm_unlock(sh);
        return;
    }

    ngx_memcpy(buf, sh->inbox, len);
    sh->inbox_len = 0;
    old = NULL;

    if (sh->inbox_size > NGX_PTY_INBOX_KEEP) {
        /* a burst of input does not keep its inbox */
        old = sh->inbox;
        sh->inbox = NULL;
        sh->inbox_size = 0;
    }

    ngx_pty_shm_unlock(sh);

    if (old) {
        ngx_slab_free(ngx_pty_shm_zone()->shpool, old);
    }

    last = buf + len;

    /* what comes meanwhile waits for the next drain: it came later */
    s->draining = 1;

    for (p = buf; p < last; p += sizeof(ngx_pty_inbox_t)
                                 + ngx_align(rec.len, 8))
    {
        ngx_memcpy(&rec, p, sizeof(ngx_pty_inbox_t));

        switch (rec.type) {

        case NGX_PTY_INBOX_INPUT:
            (void) ngx_pty_session_input(s, p + sizeof(ngx_pty_inbox_t),
                                         rec.len);
            break;

        case NGX_PTY_INBOX_RESIZE:
            (void) ngx_pty_session_resize(s, rec.cols, rec.rows);
            break;

        case NGX_PTY_INBOX_KEYFRAME:
            if (ngx_pty_session_keyframe(s, rec.target) == NULL
                && rec.target)
            {
                /* the client waits for it (ngx_pty_binding_hold()) */
                (void) ngx_pty_session_append(s, NGX_PTY_FRAME_ERROR,
                    rec.target, (u_char *) NGX_PTY_KEYFRAME_UNAVAILABLE,
                    sizeof(NGX_PTY_KEYFRAME_UNAVAILABLE) - 1);
            }
            break;

        case NGX_PTY_INBOX_KILL:
            if (rec.arg & 0x100) {
                s->kill_detail = NGX_PTY_DETAIL_LAST_CONTROLLER;
            }

            (void) ngx_pty_session_kill(s, rec.arg & 0xff);
            break;
        }
    }

    s->draining = 0;

    ngx_free(buf);
}


/* members whose worker is gone (killed) leave, and everyone is told */
static void
ngx_pty_session_sweep_members(ngx_pty_session_t *s)
{
    ngx_uint_t             gone;
    ngx_queue_t           *q, *next;
    ngx_pty_member_t      *m;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;
    gone = 0;

    ngx_pty_shm_lock(sh);

    for (q = ngx_queue_head(&sh->members);
         q != ngx_queue_sentinel(&sh->members);
         q = next)
    {
        next = ngx_queue_next(q);
        m = ngx_queue_data(q, ngx_pty_member_t, queue);

        if (m->worker != ngx_pid && !ngx_pty_pid_alive(m->worker)) {
            ngx_pty_shm_member_remove(sh, m);
            gone++;
        }
    }

    ngx_pty_shm_unlock(sh);

    if (gone) {
        ngx_log_error(NGX_LOG_INFO, s->log, 0,
                      "pty: %ui member(s) of session pty-%ui left with "
                      "their worker", gone, sh->name);
        (void) ngx_pty_ext_membership(s);
    }
}


void
ngx_pty_sessions_stat(ngx_pty_sessions_stat_t *st)
{
    ngx_rbtree_node_t  *node;
    ngx_pty_session_t  *s;

    ngx_memzero(st, sizeof(ngx_pty_sessions_stat_t));

    ngx_pty_local_init();

    if (ngx_pty_local.root == ngx_pty_local.sentinel) {
        return;
    }

    for (node = ngx_rbtree_min(ngx_pty_local.root, ngx_pty_local.sentinel);
         node;
         node = ngx_rbtree_next(&ngx_pty_local, node))
    {
        s = (ngx_pty_session_t *) node;

        st->views++;
        st->owned += s->owner;

        if (s->screen) {
            st->screens += ngx_pty_screen_memory(s->screen);
        }
    }
}


/* our doorbell rang: every session marked for us gets looked at */
void
ngx_pty_sessions_wake(ngx_int_t slot)
{
    ngx_rbtree_node_t  *node, *next;
    ngx_pty_session_t  *s;

    if (ngx_pty_local.root == NULL
        || ngx_pty_local.root == ngx_pty_local.sentinel)
    {
        return;
    }

    node = ngx_rbtree_min(ngx_pty_local.root, ngx_pty_local.sentinel);

    ngx_pty_walking++;

    while (node) {
        next = ngx_rbtree_next(&ngx_pty_local, node);
        s = (ngx_pty_session_t *) node;

        if (ngx_pty_mask_take(&s->sh->wake_mask, slot)) {
            if (s->owner && s->closed
                && s->sh->state == NGX_PTY_STATE_GONE)
            {
                /* forgotten for room in the zone: its linger is over */
                ngx_add_timer(&s->linger, 0);
            }

            if (s->owner) {
                ngx_pty_session_drain_inbox(s);
            }

            ngx_pty_session_notify_local(s);
        }

        node = next;
    }

    ngx_pty_walking--;
}


/*
 * The zone is too full for a live session, or for one that ended after
 * ended_before: the ended session that ended first is forgotten
 * (ngx_pty_shm_forget_oldest), its rings given back at once, and the
 * view that holds its record, the owner's, dropped: here, or by the owner
 * when its doorbell rings.  1: something was given back.
 */
static ngx_uint_t
ngx_pty_sessions_reclaim(uint64_t ended_before)
{
    ngx_pid_t              owner;
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;

    if (ngx_pty_shm_forget_oldest(&sh, ended_before) != NGX_OK) {
        return 0;
    }

    if (sh == NULL) {
        return 1;
    }

    ngx_pty_shm_session_strip(sh);

    s = ngx_pty_session_lookup(sh);
    owner = sh->owner;

    if (s && s->owner && s->closed) {
        if (ngx_pty_walking) {
            ngx_add_timer(&s->linger, 0);

        } else {
            ngx_pty_session_linger_handler(&s->linger);
        }

    } else if (owner != ngx_pid && ngx_pty_pid_alive(owner)) {
        ngx_pty_doorbell_wake_slot(sh, ngx_pty_doorbell_slot_of(owner));
    }

    ngx_pty_shm_session_release(sh);

    return 1;
}


/*
 * Sessions whose owner is gone (killed, or an old worker that exited on
 * reload) are taken over by the first worker to look: the owner field is
 * claimed under the session lock, so only one does.  Sessions we own lose
 * the members of workers that died.  Exiting workers take nothing.
 */
void
ngx_pty_sessions_adopt_orphans(void)
{
    ngx_uint_t             i, n;
    ngx_pid_t              owner;
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh, **list;

    zone = ngx_pty_shm_zone();

    if (zone == NULL || ngx_exiting || ngx_quit || ngx_terminate) {
        return;
    }

    if (ngx_pty_adopting) {
        ngx_pty_adopt_again = 1;
        return;
    }

    ngx_pty_adopting = 1;

    do {
        ngx_pty_adopt_again = 0;

        ngx_shmtx_lock(&zone->shpool->mutex);

        list = ngx_alloc((zone->sh->live + 1) * sizeof(void *),
                         ngx_cycle->log);
        n = 0;

        for (q = ngx_queue_head(&zone->sh->sessions);
             list && q != ngx_queue_sentinel(&zone->sh->sessions);
             q = ngx_queue_next(q))
        {
            sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);
            owner = sh->owner;

            if (sh->state >= NGX_PTY_STATE_CLOSED
                || (sh->keeper <= 0 && owner == 0))
            {
                continue;
            }

            /* ours: a worker may have died with members of it */
            if (owner != ngx_pid && owner && ngx_pty_pid_alive(owner)) {
                continue;
            }

            (void) ngx_atomic_fetch_add(&sh->refs, 1);
            list[n++] = sh;
        }

        ngx_shmtx_unlock(&zone->shpool->mutex);

        for (i = 0; i < n; i++) {
            s = ngx_pty_session_get(list[i]);

            if (s) {
                if (s->owner) {
                    ngx_pty_session_sweep_members(s);
                }

                ngx_pty_session_put(s);
            }

            ngx_pty_shm_session_release(list[i]);
        }

        if (list) {
            ngx_free(list);
        }

    } while (ngx_pty_adopt_again);

    ngx_pty_adopting = 0;
}

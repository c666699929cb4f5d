
/*
 * The session keeper process.  Everything below ngx_pty_keeper_main() runs
 * in the forked keeper, outside nginx's event loop: blocking calls are fine
 * there, nginx's own functions are not used (its state is the worker's).
 */

#include "ngx_pty.h"
#include "ngx_pty_keeper.h"
#include "ngx_pty_spawner.h"

#include <pty.h>
#include <poll.h>
#include <pwd.h>
#include <dirent.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <grp.h>
#include <linux/capability.h>


#define NGX_PTY_KEEPER_FD  3

/* ms a keeper waits for a connected worker's secret */
#define NGX_PTY_KEEPER_SECRET_WAIT  5000

/* peers connected whose secret has not come yet (the listen backlog) */
#define NGX_PTY_KEEPER_PEERS  4


static ngx_int_t ngx_pty_keeper_user_env(char **home, char **user);
static void ngx_pty_keeper_main(ngx_pty_spawn_t *sp) ngx_pty_noreturn;
static ngx_pty_spawn_t *ngx_pty_keeper_spare_start(int ctl, int sfd, int wfd,
    ngx_pid_t child, int master);
static ngx_pty_spawn_t *ngx_pty_keeper_wait_start(int ctl, int sfd, int wfd,
    ngx_pid_t child, u_char **raw, size_t *len);
static void ngx_pty_keeper_spare_exit(ngx_pid_t child) ngx_pty_noreturn;
static int64_t ngx_pty_keeper_msec(void);
static ngx_pty_spawn_t *ngx_pty_keeper_exec_wait(void);
static int ngx_pty_keeper_start_parse(u_char *buf, size_t n,
    ngx_pty_spawn_t *sp, char **env);
static void ngx_pty_keeper_reset_signals(sigset_t *keep);
static int ngx_pty_keeper_watch(ngx_pid_t pid);
static void ngx_pty_keeper_kill_session(ngx_pid_t sid, int signo);
static void ngx_pty_keeper_exec(ngx_pty_spawn_t *sp) ngx_pty_noreturn;
static void ngx_pty_keeper_exec_failed(int err) ngx_pty_noreturn;
static size_t ngx_pty_keeper_argv_size(ngx_pty_spawn_t *sp, uint32_t *argc);
static u_char *ngx_pty_keeper_argv_put(u_char *p, ngx_pty_spawn_t *sp);
static size_t ngx_pty_keeper_words_size(char **words, uint32_t *n);
static u_char *ngx_pty_keeper_words_parse(u_char *p, u_char *last,
    uint32_t n, char **words);
static int ngx_pty_keeper_sandbox_parse(u_char *p, u_char *last, uint32_t n,
    ngx_pty_spawn_t *sp);
static u_char *ngx_pty_keeper_argv_parse(u_char *p, u_char *last,
    uint32_t argc,
    ngx_pty_spawn_t *sp);
static void ngx_pty_keeper_exec_program(ngx_pty_spawn_t *sp)
    ngx_pty_noreturn;
static void ngx_pty_keeper_close_from(int from, int keep, int keep2);
static void ngx_pty_keeper_close_range(int from, int to);

static int  ngx_pty_keeper_exec_pipe[2];
static int  ngx_pty_keeper_go[2];       /* a spare's start, to its child */
static int ngx_pty_keeper_put(int ctl, uint32_t type, int32_t value, int fd);
static int ngx_pty_keeper_listen(u_char *id);
static int ngx_pty_keeper_drop_to_workers(void);
static void ngx_pty_keeper_drop_to_program(void);
static void ngx_pty_keeper_reap_all(void);
static void ngx_pty_keeper_refused(ngx_uint_t why);
static int ngx_pty_keeper_start_room(int fd);

/* who the keeper and the program run as: the spawner's, for each spare */
static ngx_pty_creds_t  ngx_pty_keeper_creds;
/* the zone: the only memory a start may point the keeper at */
static u_char          *ngx_pty_keeper_zone_start;
static u_char          *ngx_pty_keeper_zone_end;


/*
 * The keeper forker.  A keeper forked from the worker would share every
 * page of the worker, whose memory grows with its sessions: fork() copies
 * its page tables, each keeper keeps the old copy of every page the worker
 * writes after it, and starting and ending sessions gets slower as there
 * are more.  So at its start each worker forks a forker, still small, that
 * forks the keepers for it.
 *
 * The spare keeper.  Forks are also kept off the start's path: the forker
 * forks one keeper ahead, a spare, that sets itself up (its own session,
 * signals, the watch on nginx), opens the terminal and forks the process
 * that will exec the program, which waits too.  Neither knows anything of
 * a session yet; the worker holds the spare's control socket.  A start
 * hands the spare its session (the zone record, size, shell, environment)
 * in one message, which the spare passes on to its child: the start's
 * path has no fork, only two wake-ups and the exec.  When the keeper
 * reports the program started, the worker asks the forker for the next
 * spare, whose answer comes to the event loop.  With no spare at hand a
 * start is queued until the forker's next one comes, NGX_PTY_FORKER_WAIT
 * at most: the event loop never waits for the forker.  Without a forker
 * (it could not start, died, or did not answer) the worker forks keepers
 * itself, and tries a new forker later.  Whatever belongs to a session
 * reaches the spare only with its start.
 */

#define NGX_PTY_FORKER_FD      3
/*
 * A start, with the environment and the words: one message.  Sockets
 * hold that much only when root sized them (the spawner's keepers); a
 * worker's own forker falls back to forking the keeper with the start in
 * its memory when a start is over NGX_PTY_START_SMALL.
 */
#define NGX_PTY_START_MAX      (1024 * 1024 + 65536)
#define NGX_PTY_START_SMALL    65536
#define NGX_PTY_START_ENV      1024
#define NGX_PTY_START_ARGV     1024      /* NGX_PTY_ARGV_MAX */
#define NGX_PTY_FORKER_WAIT    2000      /* ms for its answer, then drop it */
#define NGX_PTY_SPAWNER_WAIT   10000     /* the spawner serves every worker */
#define ngx_pty_forker_wait()                                                 \
    (ngx_pty_forker_pid == ngx_pty_spawner_pid() ? NGX_PTY_SPAWNER_WAIT        \
                                                : NGX_PTY_FORKER_WAIT)
#define NGX_PTY_FORKER_ASKED_MAX  4      /* spares asked for at once */
#define NGX_PTY_FORKER_RESTART 1000      /* ms to a new forker, doubling */
#define NGX_PTY_FORKER_RESTART_MAX  60000
#define NGX_PTY_EXIT_WAIT      1000      /* ms for a keeper forked at exit */

/* worker -> spare keeper: the session it runs */
typedef struct {
    uint32_t                   type;     /* NGX_PTY_KEEPER_START */
    uint32_t                   cols;
    uint32_t                   rows;
    uint32_t                   nenv;
    uint32_t                   argc;     /* 0: the command by the shell */
    uint32_t                   nsandbox; /* pty_sandbox's words */
    ngx_pty_session_sh_t      *sh;
    u_char                     id[NGX_PTY_ID_LEN];
    u_char                     secret[NGX_PTY_SECRET_LEN];
    /*
     * then the shell, the command and nenv environment strings, with
     * argc the program's path and argc words, then nsandbox words, each
     * null-terminated
     */
} ngx_pty_keeper_start_t;


static ngx_connection_t  *ngx_pty_forker;
static ngx_pid_t          ngx_pty_forker_pid = NGX_INVALID_PID;
static ngx_uint_t         ngx_pty_forker_asked;   /* answers due */
static ngx_msec_t         ngx_pty_forker_backoff = NGX_PTY_FORKER_RESTART;
static ngx_event_t        ngx_pty_forker_deadline;
static ngx_event_t        ngx_pty_forker_restart;
static ngx_connection_t   ngx_pty_keeper_dumb;
static ngx_pid_t          ngx_pty_nginx_pid;      /* the forker's and the
                                                    keepers' too */
static ngx_socket_t       ngx_pty_spare = (ngx_socket_t) -1;
static ngx_pid_t          ngx_pty_spare_pid = NGX_INVALID_PID;
static ngx_queue_t        ngx_pty_pending;        /* starts waiting a spare */
static ngx_uint_t         ngx_pty_npending;


static void ngx_pty_keeper_init_once(ngx_log_t *log);
static void ngx_pty_keeper_forker_main(ngx_cycle_t *cycle) ngx_pty_noreturn;
static void ngx_pty_keeper_forker_handler(ngx_event_t *rev);
static ngx_int_t ngx_pty_keeper_forker_answer(ngx_log_t *log);
static void ngx_pty_keeper_forker_late(ngx_event_t *ev);
static void ngx_pty_keeper_forker_again(ngx_event_t *ev);
static void ngx_pty_keeper_forker_drop(void);
static void ngx_pty_keeper_forker_lost(ngx_log_t *log);
static void ngx_pty_keeper_spares_ask(ngx_log_t *log);
static ngx_int_t ngx_pty_keeper_spare_give(ngx_pty_keeper_req_t *req);
static void ngx_pty_keeper_serve_pending(ngx_log_t *log);
static void ngx_pty_keeper_fork_now(ngx_pty_keeper_req_t *req);
static u_char *ngx_pty_keeper_start_request(ngx_pty_spawn_t *sp,
    size_t *len, ngx_log_t *log);
static ngx_pid_t ngx_pty_keeper_fork(ngx_pty_spawn_t *sp, ngx_socket_t *ctl,
    ngx_err_t *err);


static void
ngx_pty_keeper_init_once(ngx_log_t *log)
{
    if (ngx_pty_pending.next) {
        return;
    }

    ngx_queue_init(&ngx_pty_pending);

    /* the timers' debug lines read ev->data as a connection's fd */
    ngx_pty_keeper_dumb.fd = (ngx_socket_t) -1;

    ngx_pty_forker_deadline.handler = ngx_pty_keeper_forker_late;
    ngx_pty_forker_deadline.data = &ngx_pty_keeper_dumb;
    ngx_pty_forker_deadline.log = log;
    ngx_pty_forker_deadline.cancelable = 1;

    ngx_pty_forker_restart.handler = ngx_pty_keeper_forker_again;
    ngx_pty_forker_restart.data = &ngx_pty_keeper_dumb;
    ngx_pty_forker_restart.log = log;
    ngx_pty_forker_restart.cancelable = 1;
}


ngx_int_t
ngx_pty_keeper_forker_start(ngx_cycle_t *cycle)
{
    int                sv[2];
    char              *home, *user;
    ngx_pid_t          pid;
    ngx_connection_t  *c;

    ngx_pty_keeper_init_once(cycle->log);

    ngx_pty_nginx_pid = (ngx_process == NGX_PROCESS_SINGLE) ? ngx_pid
                                                            : getppid();

    ngx_pty_keeper_zone_bounds((u_char *) ngx_pty_shm_zone()->shpool,
                               ngx_pty_shm_zone()->shpool->end);

    /* before serving: getpwuid() may wait on a user database */
    (void) ngx_pty_keeper_user_env(&home, &user);

    /* the spawner forks the keepers: the program's user is its to set */
    sv[0] = ngx_pty_spawner_channel(cycle->log, ngx_pty_nginx_pid);

    if (sv[0] != -1) {
        pid = ngx_pty_spawner_pid();
        goto connected;
    }

    if (ngx_pty_spawner_privileged()) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "pty: no line to the spawner: sessions cannot start "
                      "in this worker");
        return NGX_OK;
    }

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, ngx_errno,
                      "pty: socketpair() for the keeper forker failed; "
                      "the worker forks keepers itself");
        return NGX_OK;
    }

    pid = fork();

    switch (pid) {

    case -1:
        ngx_log_error(NGX_LOG_WARN, cycle->log, ngx_errno,
                      "pty: fork() of the keeper forker failed; "
                      "the worker forks keepers itself");
        close(sv[0]);
        close(sv[1]);
        return NGX_OK;

    case 0:
        if (dup2(sv[1], NGX_PTY_FORKER_FD) == -1) {
            _exit(0);
        }

        ngx_pty_keeper_forker_main(cycle);
    }

    close(sv[1]);

connected:

    /* its answers come to the event loop */
    if (ngx_nonblocking(sv[0]) == -1) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, ngx_socket_errno,
                      ngx_nonblocking_n " for the keeper forker failed; "
                      "the worker forks keepers itself");
        close(sv[0]);
        return NGX_OK;
    }

    c = ngx_get_connection(sv[0], cycle->log);
    if (c == NULL) {
        /* the forker ends on the end of its socket */
        close(sv[0]);
        return NGX_OK;
    }

    c->read->handler = ngx_pty_keeper_forker_handler;
    c->read->log = cycle->log;
    c->write->log = cycle->log;

    ngx_pty_forker = c;
    ngx_pty_forker_pid = pid;

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                      "pty: cannot watch the keeper forker; "
                      "the worker forks keepers itself");
        ngx_pty_keeper_forker_drop();
        return NGX_OK;
    }

    /* the first spare, ready before the first start */
    ngx_pty_keeper_spares_ask(cycle->log);

    return NGX_OK;
}


/* at the worker's exit: the forker and the spare end on their sockets' end */
void
ngx_pty_keeper_forker_stop(void)
{
    ngx_pty_keeper_forker_drop();

    if (ngx_pty_forker_restart.timer_set) {
        ngx_del_timer(&ngx_pty_forker_restart);
    }

    if (ngx_pty_spare != (ngx_socket_t) -1) {
        close(ngx_pty_spare);
        ngx_pty_spare = (ngx_socket_t) -1;
        ngx_pty_spare_pid = NGX_INVALID_PID;
    }
}


/*
 * A keeper reported its program started (or not): the next spare is forked
 * now, while the program starts up.  Forked at the start itself, it would
 * take a CPU from the keeper and the program on their way to exec.
 */
void
ngx_pty_keeper_spare_refill(ngx_log_t *log)
{
    if (!ngx_exiting && !ngx_quit && !ngx_terminate) {
        ngx_pty_keeper_spares_ask(log);
    }
}


static void
ngx_pty_keeper_forker_drop(void)
{
    if (ngx_pty_forker) {
        ngx_close_connection(ngx_pty_forker);
        ngx_pty_forker = NULL;
        ngx_pty_forker_pid = NGX_INVALID_PID;
        ngx_pty_forker_asked = 0;
    }

    if (ngx_pty_forker_deadline.timer_set) {
        ngx_del_timer(&ngx_pty_forker_deadline);
    }
}


/*
 * The forker failed: the starts waiting for it fork their keepers from the
 * worker, and a new forker is tried later, less often while they keep
 * failing.
 */
static void
ngx_pty_keeper_forker_lost(ngx_log_t *log)
{
    ngx_pty_keeper_forker_drop();
    ngx_pty_keeper_spawn_flush(0);

    if (ngx_exiting || ngx_quit || ngx_terminate
        || ngx_pty_forker_restart.timer_set)
    {
        return;
    }

    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "pty: a new keeper forker is tried in %M ms",
                  ngx_pty_forker_backoff);

    ngx_add_timer(&ngx_pty_forker_restart, ngx_pty_forker_backoff);

    ngx_pty_forker_backoff = ngx_min(2 * ngx_pty_forker_backoff,
                                     NGX_PTY_FORKER_RESTART_MAX);
}


static void
ngx_pty_keeper_forker_again(ngx_event_t *ev)
{
    if (ngx_pty_forker || ngx_exiting || ngx_quit || ngx_terminate) {
        return;
    }

    (void) ngx_pty_keeper_forker_start((ngx_cycle_t *) ngx_cycle);

    if (ngx_pty_forker == NULL) {
        /* it could not start: later again */
        ngx_pty_keeper_forker_lost(ev->log);
    }
}


/*
 * A start's keeper: the spare at hand takes it (NGX_OK, req->pid and
 * req->ctl set), or it waits for the forker's next spare (NGX_AGAIN: the
 * handler is called, usually later from the event loop), or without a
 * forker the worker forks it (NGX_OK; req->pid is NGX_INVALID_PID if that
 * failed).
 */
ngx_int_t
ngx_pty_keeper_spawn(ngx_pty_keeper_req_t *req)
{
    ngx_int_t  rc;

    ngx_pty_keeper_init_once(req->log);

    req->pid = NGX_INVALID_PID;
    req->ctl = (ngx_socket_t) -1;

    /* the starts before it come first */
    rc = ngx_queue_empty(&ngx_pty_pending) ? ngx_pty_keeper_spare_give(req)
                                            : NGX_DECLINED;

    if (rc == NGX_OK) {
        return NGX_OK;
    }

    if (ngx_pty_forker && rc == NGX_DECLINED) {
        ngx_queue_insert_tail(&ngx_pty_pending, &req->queue);
        ngx_pty_npending++;
        req->pending = 1;

        /* a forker found gone here: the handler is called at once */
        ngx_pty_keeper_spares_ask(req->log);

        return NGX_AGAIN;
    }

    ngx_pty_keeper_fork_now(req);

    return NGX_OK;
}


/* the start is gone before its keeper came: no keeper is made for it */
void
ngx_pty_keeper_spawn_cancel(ngx_pty_keeper_req_t *req)
{
    if (req->pending) {
        ngx_queue_remove(&req->queue);
        ngx_pty_npending--;
        req->pending = 0;
    }
}


/*
 * Every waiting start forks its keeper from the worker, now.  At the
 * worker's exit the keepers are waited for until they listen (each has
 * reported its start, NGX_PTY_EXIT_WAIT at most for all): the next worker
 * adopts the sessions as soon as this one is gone, and must find them.
 */
void
ngx_pty_keeper_spawn_flush(ngx_uint_t exiting)
{
    int64_t                left, deadline;
    ngx_queue_t           *q, forked;
    struct pollfd          pfd;
    ngx_pty_keeper_req_t  *req;

    if (ngx_pty_pending.next == NULL) {
        return;
    }

    ngx_queue_init(&forked);

    while (!ngx_queue_empty(&ngx_pty_pending)) {
        q = ngx_queue_head(&ngx_pty_pending);
        req = ngx_queue_data(q, ngx_pty_keeper_req_t, queue);

        ngx_pty_keeper_spawn_cancel(req);
        ngx_pty_keeper_fork_now(req);
        ngx_queue_insert_tail(&forked, &req->queue);
    }

    deadline = ngx_pty_keeper_msec() + NGX_PTY_EXIT_WAIT;

    while (!ngx_queue_empty(&forked)) {
        q = ngx_queue_head(&forked);
        req = ngx_queue_data(q, ngx_pty_keeper_req_t, queue);
        ngx_queue_remove(q);

        left = deadline - ngx_pty_keeper_msec();

        if (exiting && req->pid != NGX_INVALID_PID && left > 0) {
            pfd.fd = req->ctl;
            pfd.events = POLLIN;
            (void) poll(&pfd, 1, (int) left);
        }

        req->handler(req);
    }
}


static void
ngx_pty_keeper_fork_now(ngx_pty_keeper_req_t *req)
{
    ngx_err_t  err;

    if (ngx_pty_spawner_privileged()) {
        /* a keeper of the worker's would run the program as the worker */
        ngx_log_error(NGX_LOG_ERR, req->log, 0,
                      "pty: no keeper for the session: the spawner did not "
                      "give one, and programs never run as the workers' "
                      "user");
        req->pid = NGX_INVALID_PID;
        return;
    }

    req->pid = ngx_pty_keeper_fork(&req->spawn, &req->ctl, &err);

    if (req->pid == NGX_INVALID_PID) {
        ngx_log_error(NGX_LOG_ALERT, req->log, err,
                      "pty: fork() of the keeper failed");
    }
}


/*
 * The spare at hand takes the start: NGX_OK.  NGX_DECLINED with none, or
 * a dead one; NGX_ABORT when the start cannot go to any spare (too big
 * for one message): the worker forks its keeper.
 */
static ngx_int_t
ngx_pty_keeper_spare_give(ngx_pty_keeper_req_t *req)
{
    u_char  *buf;
    size_t   len;
    ssize_t  n;

    if (ngx_pty_spare == (ngx_socket_t) -1) {
        return NGX_DECLINED;
    }

    buf = ngx_pty_keeper_start_request(&req->spawn, &len, req->log);
    if (buf == NULL) {
        return NGX_ABORT;
    }

    n = send(ngx_pty_spare, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    ngx_free(buf);

    if (n != (ssize_t) len) {
        ngx_log_error(NGX_LOG_WARN, req->log, ngx_socket_errno,
                      "pty: the spare keeper %P is gone", ngx_pty_spare_pid);
        close(ngx_pty_spare);

    } else {
        ngx_log_debug1(NGX_LOG_DEBUG_CORE, req->log, 0,
                       "pty: spare keeper %P takes the session",
                       ngx_pty_spare_pid);

        req->pid = ngx_pty_spare_pid;
        req->ctl = ngx_pty_spare;
    }

    ngx_pty_spare = (ngx_socket_t) -1;
    ngx_pty_spare_pid = NGX_INVALID_PID;

    return (req->ctl != (ngx_socket_t) -1) ? NGX_OK : NGX_DECLINED;
}


/*
 * The start message for a spare; NULL when it is too big for one (the
 * worker then forks the keeper itself, with the request in its memory).
 */
static u_char *
ngx_pty_keeper_start_request(ngx_pty_spawn_t *sp, size_t *len,
    ngx_log_t *log)
{
    u_char                  *buf, *p;
    size_t                   n;
    uint32_t                 argc, nsandbox;
    ngx_uint_t               i;
    ngx_pty_keeper_start_t   st;

    n = sizeof(ngx_pty_keeper_start_t) + ngx_strlen(sp->shell) + 1
        + ngx_strlen(sp->command) + 1 + ngx_pty_keeper_argv_size(sp, &argc)
        + ngx_pty_keeper_words_size(sp->sandbox, &nsandbox);

    for (i = 0; sp->envp[i]; i++) {
        n += ngx_strlen(sp->envp[i]) + 1;
    }

    if (n > (ngx_pty_spawner_privileged() ? NGX_PTY_START_MAX
                                           : NGX_PTY_START_SMALL)
        || i > NGX_PTY_START_ENV)
    {
        return NULL;
    }

    buf = ngx_alloc(n, log);
    if (buf == NULL) {
        return NULL;
    }

    ngx_memzero(&st, sizeof(ngx_pty_keeper_start_t));
    st.type = NGX_PTY_KEEPER_START;
    st.cols = (uint32_t) sp->cols;
    st.rows = (uint32_t) sp->rows;
    st.nenv = (uint32_t) i;
    st.argc = argc;
    st.nsandbox = nsandbox;
    st.sh = sp->sh;
    ngx_memcpy(st.id, sp->id, NGX_PTY_ID_LEN);
    ngx_memcpy(st.secret, sp->secret, NGX_PTY_SECRET_LEN);

    p = ngx_cpymem(buf, &st, sizeof(ngx_pty_keeper_start_t));
    p = ngx_cpymem(p, sp->shell, ngx_strlen(sp->shell) + 1);
    p = ngx_cpymem(p, sp->command, ngx_strlen(sp->command) + 1);

    for (i = 0; sp->envp[i]; i++) {
        p = ngx_cpymem(p, sp->envp[i], ngx_strlen(sp->envp[i]) + 1);
    }

    p = ngx_pty_keeper_argv_put(p, sp);

    for (i = 0; sp->sandbox && sp->sandbox[i]; i++) {
        p = ngx_cpymem(p, sp->sandbox[i], ngx_strlen(sp->sandbox[i]) + 1);
    }

    *len = n;

    return buf;
}


/*
 * The forker forks a spare for each start waiting, a few at a time, or one
 * to keep at hand: ngx_pty_keeper_forker_answer() gets them.
 */
static void
ngx_pty_keeper_spares_ask(ngx_log_t *log)
{
    ngx_uint_t            want;
    ngx_pty_keeper_msg_t  msg;

    want = ngx_min(ngx_pty_npending, NGX_PTY_FORKER_ASKED_MAX);

    if (want == 0 && ngx_pty_spare == (ngx_socket_t) -1) {
        want = 1;
    }

    msg.type = NGX_PTY_KEEPER_SPARE;
    msg.value = 0;

    while (ngx_pty_forker && ngx_pty_forker_asked < want) {

        if (send(ngx_pty_forker->fd, &msg, sizeof(msg),
                 MSG_DONTWAIT | MSG_NOSIGNAL)
            != (ssize_t) sizeof(msg))
        {
            ngx_log_error(NGX_LOG_ALERT, log, ngx_socket_errno,
                          "pty: the keeper forker is gone; the worker "
                          "forks keepers itself");
            ngx_pty_keeper_forker_lost(log);
            return;
        }

        if (ngx_pty_forker_asked++ == 0) {
            ngx_add_timer(&ngx_pty_forker_deadline, ngx_pty_forker_wait());
        }
    }
}


static void
ngx_pty_keeper_forker_handler(ngx_event_t *rev)
{
    ngx_int_t   rc;
    ngx_log_t  *log;

    log = rev->log;

    while (ngx_pty_forker) {
        rc = ngx_pty_keeper_forker_answer(log);

        if (rc == NGX_AGAIN || rc == NGX_ERROR) {
            break;
        }

        ngx_pty_keeper_serve_pending(log);
    }

    if (ngx_pty_forker && ngx_handle_read_event(rev, 0) != NGX_OK) {
        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "pty: cannot watch the keeper forker; the worker "
                      "forks keepers itself");
        ngx_pty_keeper_forker_lost(log);
    }
}


/* one answer of the forker, if it has come: a spare, or why there is none */
static ngx_int_t
ngx_pty_keeper_forker_answer(ngx_log_t *log)
{
    ngx_fd_t               fd;
    ngx_int_t              rc;
    ngx_pty_keeper_msg_t   msg;
    ngx_pty_keeper_req_t  *req;

    rc = ngx_pty_keeper_recv(ngx_pty_forker->fd, &msg, &fd, log);

    if (rc == NGX_AGAIN) {
        return NGX_AGAIN;
    }

    if (rc != NGX_OK || msg.type != NGX_PTY_KEEPER_SPAWNED
        || ngx_pty_forker_asked == 0)
    {
        if (rc == NGX_OK && fd != NGX_INVALID_FILE) {
            close(fd);
        }

        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "pty: the keeper forker is gone; the worker forks "
                      "keepers itself");
        ngx_pty_keeper_forker_lost(log);
        return NGX_ERROR;
    }

    /* the next answer due has its full time again */
    if (--ngx_pty_forker_asked) {
        ngx_add_timer(&ngx_pty_forker_deadline, ngx_pty_forker_wait());

    } else if (ngx_pty_forker_deadline.timer_set) {
        ngx_del_timer(&ngx_pty_forker_deadline);
    }

    if (msg.value <= 0 || fd == NGX_INVALID_FILE) {
        ngx_log_error(NGX_LOG_ALERT, log, (ngx_err_t) -msg.value,
                      "pty: the keeper forker could not fork a keeper");

        if (fd != NGX_INVALID_FILE) {
            close(fd);
        }

        /* a start waiting gets its keeper from the worker: it may fork */
        if (!ngx_queue_empty(&ngx_pty_pending)) {
            req = ngx_queue_data(ngx_queue_head(&ngx_pty_pending),
                                 ngx_pty_keeper_req_t, queue);
            ngx_pty_keeper_spawn_cancel(req);
            ngx_pty_keeper_fork_now(req);
            req->handler(req);
        }

        return NGX_DECLINED;
    }

    ngx_pty_forker_backoff = NGX_PTY_FORKER_RESTART;

    if (ngx_pty_spare != (ngx_socket_t) -1) {
        /* one spare is enough; this one ends on the end of its socket */
        close(fd);
        return NGX_OK;
    }

    /* non-blocking already: the flag travels with the open file */
    ngx_pty_spare = fd;
    ngx_pty_spare_pid = (ngx_pid_t) msg.value;

    return NGX_OK;
}


/* the spare just come goes to the first start waiting */
static void
ngx_pty_keeper_serve_pending(ngx_log_t *log)
{
    ngx_int_t              rc;
    ngx_queue_t           *q;
    ngx_pty_keeper_req_t  *req;

    if (ngx_queue_empty(&ngx_pty_pending)) {
        return;
    }

    q = ngx_queue_head(&ngx_pty_pending);
    req = ngx_queue_data(q, ngx_pty_keeper_req_t, queue);

    rc = ngx_pty_keeper_spare_give(req);

    if (rc != NGX_DECLINED) {
        ngx_pty_keeper_spawn_cancel(req);

        if (rc == NGX_ABORT) {
            ngx_pty_keeper_fork_now(req);
        }

        req->handler(req);
    }

    /* more waiting, or a dead spare: more are asked for */
    ngx_pty_keeper_spares_ask(log);
}


/*
 * The forker did not answer in time (stopped, or starved): it is killed
 * and dropped.  It knew nothing of any session, so the worker may fork
 * the keepers itself without meeting a second one.
 */
static void
ngx_pty_keeper_forker_late(ngx_event_t *ev)
{
    if (ngx_pty_forker_pid == ngx_pty_spawner_pid()) {
        /* every worker's: it is not this worker's to kill */
        ngx_log_error(NGX_LOG_ALERT, ev->log, 0,
                      "pty: the spawner did not answer in %d s",
                      NGX_PTY_SPAWNER_WAIT / 1000);
        ngx_pty_keeper_forker_lost(ev->log);
        return;
    }

    ngx_log_error(NGX_LOG_ALERT, ev->log, 0,
                  "pty: the keeper forker did not answer in %d s; it is "
                  "killed, and the worker forks keepers itself",
                  NGX_PTY_FORKER_WAIT / 1000);

    if (kill(ngx_pty_forker_pid, SIGKILL) == -1) {
        ngx_log_error(NGX_LOG_ALERT, ev->log, ngx_errno,
                      "pty: kill(%P) of the keeper forker failed",
                      ngx_pty_forker_pid);
    }

    ngx_pty_keeper_forker_lost(ev->log);
}


/*
 * Forks a keeper: a spare (sp NULL) waits for its session, the worker's own
 * fork gets it in its memory.  No logging: the forker has no log.
 */
static ngx_pid_t
ngx_pty_keeper_fork(ngx_pty_spawn_t *sp, ngx_socket_t *ctl, ngx_err_t *err)
{
    int        sv[2];
    ngx_pid_t  pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        *err = ngx_errno;
        return NGX_INVALID_PID;
    }

    /* the worker sends the start on sv[0] */
    if (ngx_pty_keeper_start_room(sv[0]) == -1) {
        *err = ngx_errno;
        close(sv[0]);
        close(sv[1]);
        return NGX_INVALID_PID;
    }

    pid = fork();

    switch (pid) {

    case -1:
        *err = ngx_errno;
        close(sv[0]);
        close(sv[1]);
        return NGX_INVALID_PID;

    case 0:
        if (sv[1] != NGX_PTY_KEEPER_FD) {
            if (dup2(sv[1], NGX_PTY_KEEPER_FD) == -1) {
                _exit(0);
            }

        } else if (fcntl(sv[1], F_SETFD, 0) == -1) {
            _exit(0);
        }

        ngx_pty_keeper_main(sp);
    }

    close(sv[1]);

    if (ngx_nonblocking(sv[0]) == -1) {
        *err = ngx_socket_errno;
        close(sv[0]);
        kill(pid, SIGKILL);
        return NGX_INVALID_PID;
    }

    *ctl = sv[0];

    return pid;
}


/* the spawner's: a spare keeper whose program runs as cr says */
ngx_pid_t
ngx_pty_keeper_fork_spare(ngx_pty_creds_t *cr, ngx_socket_t *ctl,
    ngx_err_t *err)
{
    ngx_pty_keeper_creds = *cr;
    ngx_pty_nginx_pid = cr->nginx_pid;

    return ngx_pty_keeper_fork(NULL, ctl, err);
}


void
ngx_pty_keeper_zone_bounds(u_char *start, u_char *end)
{
    ngx_pty_keeper_zone_start = start;
    ngx_pty_keeper_zone_end = end;
}


/* ---- below: the forker process ---- */


static void
ngx_pty_keeper_forker_main(ngx_cycle_t *cycle)
{
    ssize_t                 n;
    ngx_err_t               err;
    ngx_pid_t               pid;
    ngx_socket_t            ctl;
    struct sigaction        sa;
    ngx_pty_keeper_msg_t    msg;

    ngx_setproctitle("pty keeper forker");

    /* nothing of the worker's but the socket, the zone and stdio */
    ngx_pty_keeper_close_from(NGX_PTY_FORKER_FD + 1, -1, -1);

    /*
     * A session of its own: signals a terminal sends nginx's process group
     * (^C of nginx in the foreground) are not for it.  It ends when its
     * worker closes the socket, and the worker hears of it otherwise.
     */
    (void) setsid();

    /* the worker's connections: the keepers need not share them */
    ngx_free(cycle->connections);
    ngx_free(cycle->read_events);
    ngx_free(cycle->write_events);

    ngx_pty_keeper_reset_signals(NULL);

    /* keepers are reaped by the kernel; they reset this for themselves */
    ngx_memzero(&sa, sizeof(struct sigaction));
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    (void) sigaction(SIGCHLD, &sa, NULL);

    for ( ;; ) {
        n = recv(NGX_PTY_FORKER_FD, &msg, sizeof(msg), 0);

        if (n == -1 && errno == EINTR) {
            continue;
        }

        if (n <= 0) {
            /* the worker is gone */
            _exit(0);
        }

        if (n != (ssize_t) sizeof(msg) || msg.type != NGX_PTY_KEEPER_SPARE) {
            (void) ngx_pty_keeper_put(NGX_PTY_FORKER_FD,
                                      NGX_PTY_KEEPER_SPAWNED, -EINVAL, -1);
            continue;
        }

        pid = ngx_pty_keeper_fork(NULL, &ctl, &err);

        if (pid == NGX_INVALID_PID) {
            (void) ngx_pty_keeper_put(NGX_PTY_FORKER_FD,
                                      NGX_PTY_KEEPER_SPAWNED, -err, -1);
            continue;
        }

        /* a spare the worker does not get ends on the end of its socket */
        (void) ngx_pty_keeper_put(NGX_PTY_FORKER_FD, NGX_PTY_KEEPER_SPAWNED,
                                  pid, ctl);
        close(ctl);
    }
}


/*
 * HOME and USER of the worker's user, looked up once per worker: a start
 * need not read /etc/passwd.
 */
static ngx_int_t
ngx_pty_keeper_user_env(char **home, char **user)
{
    char            *dir;
    struct passwd   *pw;
    static char     *h, *u;

    if (h == NULL && ngx_pty_spawner_user_env(&h, &u) == NGX_OK) {
        *home = h;
        *user = u;
        return NGX_OK;
    }

    if (h == NULL) {
        pw = getpwuid(getuid());
        dir = (pw && pw->pw_dir) ? pw->pw_dir : "/";

        h = ngx_alloc(sizeof("HOME=") + ngx_strlen(dir), ngx_cycle->log);
        if (h == NULL) {
            return NGX_ERROR;
        }

        ngx_sprintf((u_char *) h, "HOME=%s%Z", dir);

        if (pw && pw->pw_name) {
            u = ngx_alloc(sizeof("USER=") + ngx_strlen(pw->pw_name),
                          ngx_cycle->log);
            if (u == NULL) {
                ngx_free(h);
                h = NULL;
                return NGX_ERROR;
            }

            ngx_sprintf((u_char *) u, "USER=%s%Z", pw->pw_name);
        }
    }

    *home = h;
    *user = u;

    return NGX_OK;
}


/* the child's environment: a terminal's basics, then the operator's */
char **
ngx_pty_keeper_env(ngx_pool_t *pool, ngx_array_t *extra)
{
    char            **envp, *home, *user;
    size_t            n, i, j;
    ngx_str_t        *e;
    static char      *base[] = {
        "TERM=xterm-256color",
        "COLORTERM=truecolor",
        "LANG=C.UTF-8",
        "PATH=" NGX_PTY_PATH,
        NULL
    };

    if (ngx_pty_keeper_user_env(&home, &user) != NGX_OK) {
        return NULL;
    }

    n = (extra ? extra->nelts : 0) + 8;

    envp = ngx_pcalloc(pool, n * sizeof(char *));
    if (envp == NULL) {
        return NULL;
    }

    for (i = 0; base[i]; i++) {
        envp[i] = base[i];
    }

    envp[i++] = home;

    if (user) {
        envp[i++] = user;
    }

    if (extra == NULL) {
        return envp;
    }

    e = extra->elts;

    for (j = 0; j < extra->nelts; j++) {
        /* pty_env NAME=value replaces a default of the same NAME */
        size_t  k, nlen;

        nlen = (u_char *) ngx_strlchr(e[j].data, e[j].data + e[j].len, '=')
               - e[j].data;

        for (k = 0; k < i; k++) {
            if (ngx_strncmp(envp[k], e[j].data, nlen + 1) == 0) {
                break;
            }
        }

        envp[k] = (char *) e[j].data;   /* null-terminated by the parser */

        if (k == i) {
            i++;
        }
    }

    return envp;
}


socklen_t
ngx_pty_keeper_address(struct sockaddr_un *sa, u_char *id)
{
    u_char  *p;

    ngx_memzero(sa, sizeof(struct sockaddr_un));
    sa->sun_family = AF_UNIX;

    /* abstract namespace: the leading NUL; nothing on disk to clean up */
    p = (u_char *) sa->sun_path + 1;
    p = ngx_cpymem(p, "ngx_pty_keeper/", sizeof("ngx_pty_keeper/") - 1);
    p = ngx_cpymem(p, id, NGX_PTY_ID_LEN);

    return (socklen_t) (p - (u_char *) sa);
}


/*
 * A new owner's line to a running keeper; READY and the fd follow.  Only
 * a failed connect means the keeper is gone: a line it closed before the
 * secret came (this worker stalled past its wait) is tried again.
 */
ngx_socket_t
ngx_pty_keeper_connect(u_char *id, u_char *secret, ngx_log_t *log)
{
    ngx_err_t           err;
    ngx_uint_t          tries;
    ngx_socket_t        fd;
    socklen_t           len;
    struct sockaddr_un  sa;

    len = ngx_pty_keeper_address(&sa, id);

    for (tries = 0; tries < 3; tries++) {
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);
        if (fd == -1) {
            ngx_log_error(NGX_LOG_ALERT, log, ngx_socket_errno,
                          "pty: socket() for the keeper failed");
            return (ngx_socket_t) -1;
        }

        /* a local stream connect completes at once or fails */
        if (connect(fd, (struct sockaddr *) &sa, len) == -1) {
            ngx_log_error(NGX_LOG_INFO, log, ngx_socket_errno,
                          "pty: keeper of session %*s is gone",
                          (size_t) NGX_PTY_ID_LEN, id);
            close(fd);
            return (ngx_socket_t) -1;
        }

        /* an empty new socket takes a small message at once */
        if (send(fd, secret, NGX_PTY_SECRET_LEN, MSG_DONTWAIT | MSG_NOSIGNAL)
            == NGX_PTY_SECRET_LEN)
        {
            return fd;
        }

        err = ngx_socket_errno;
        close(fd);

        ngx_log_error(NGX_LOG_ERR, log, err,
                      "pty: send() to the keeper of session %*s failed%s",
                      (size_t) NGX_PTY_ID_LEN, id,
                      tries < 2 ? ", trying again" : "");
    }

    return (ngx_socket_t) -1;
}


ngx_int_t
ngx_pty_keeper_recv(ngx_socket_t ctl, ngx_pty_keeper_msg_t *msg, ngx_fd_t *fd,
    ngx_log_t *log)
{
    ssize_t  n;

    n = ngx_pty_keeper_take(ctl, msg, fd, 0);

    if (n == -1 && ngx_socket_errno == NGX_ECONNRESET) {
        /*
         * The keeper closed with a message of ours unread (a spare asked
         * to stop before it read its start).  Linux reports that ahead of
         * the messages the keeper sent before it closed: they come next.
         */
        ngx_log_error(NGX_LOG_INFO, log, ngx_socket_errno,
                      "pty: the keeper closed with a message unread");

        n = ngx_pty_keeper_take(ctl, msg, fd, 0);
    }

    if (n == -1) {
        if (ngx_socket_errno == NGX_EAGAIN || ngx_socket_errno == NGX_EINTR) {
            return NGX_AGAIN;
        }

        ngx_log_error(NGX_LOG_ERR, log, ngx_socket_errno,
                      "pty: recvmsg() from the keeper failed");
        return NGX_ERROR;
    }

    if (n == 0) {
        return NGX_DONE;        /* the keeper is gone */
    }

    if (n != sizeof(ngx_pty_keeper_msg_t)) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "pty: short message from the keeper");

        if (*fd != NGX_INVALID_FILE) {
            close(*fd);
        }

        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * One message of the keepers' protocol and the descriptor it carries
 * (*fd, or -1); recvmsg()'s result.  No log: the spawner uses it too.
 */
ssize_t
ngx_pty_keeper_take(int ctl, ngx_pty_keeper_msg_t *msg, int *fd, int flags)
{
    int              got;
    size_t           i;
    ssize_t          n;
    struct iovec     iov;
    struct msghdr    mh;
    struct cmsghdr  *cm;
    union {
        struct cmsghdr  cm;
        char            space[CMSG_SPACE(sizeof(int))];
    } cmsg;

    iov.iov_base = msg;
    iov.iov_len = sizeof(ngx_pty_keeper_msg_t);

    ngx_memzero(&mh, sizeof(struct msghdr));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = &cmsg;
    mh.msg_controllen = sizeof(cmsg);

    *fd = -1;

    n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC | flags);

    if (n == -1) {
        return n;
    }

    /*
     * The first descriptor is the message's; any more a peer sent (two
     * fit the buffer's padding) are closed, never kept open by mistake.
     */
    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
            continue;
        }

        for (i = 0; CMSG_LEN((i + 1) * sizeof(int)) <= cm->cmsg_len; i++) {
            ngx_memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));

            if (*fd == -1) {
                *fd = got;

            } else {
                close(got);
            }
        }
    }

    if (n == 0 && *fd != -1) {
        /* an empty message reads as the end: nothing may come with it */
        close(*fd);
        *fd = -1;
    }

    return n;
}


/* ---- below: the keeper process ---- */


typedef struct {
    int                        fd;        /* -1: a free slot */
    int64_t                    deadline;  /* of its secret */
} ngx_pty_keeper_peer_t;


typedef struct {
    int                        ctl;       /* to the owner, -1 without one */
    int                        sfd;       /* signalfd */
    int                        wfd;       /* pidfd on nginx, or -1 */
    int                        lfd;       /* where a new owner connects */
    int                        master;
    ngx_pid_t                  child;
    int64_t                    deadline;  /* of the kill's grace, or -1 */
    int                        status;
    u_char                    *secret;    /* a new owner's proof */
    ngx_pty_keeper_peer_t      peers[NGX_PTY_KEEPER_PEERS];
} ngx_pty_keeper_t;


static void ngx_pty_keeper_begin(ngx_pty_keeper_t *k, ngx_pty_spawn_t *sp);
static void ngx_pty_keeper_fail(ngx_pty_keeper_t *k, int err)
    ngx_pty_noreturn;
static void ngx_pty_keeper_started(ngx_pty_keeper_t *k);
static void ngx_pty_keeper_serve(ngx_pty_keeper_t *k);
static ngx_int_t ngx_pty_keeper_event(ngx_pty_keeper_t *k,
    struct pollfd *pfd, int ci, int wi, int li);
static void ngx_pty_keeper_terminate(ngx_pty_keeper_t *k);
static int ngx_pty_keeper_timeout(ngx_pty_keeper_t *k, int timeout);
static void ngx_pty_keeper_accept(ngx_pty_keeper_t *k);
static void ngx_pty_keeper_peers(ngx_pty_keeper_t *k, struct pollfd *pfd,
    int pi);
static ngx_int_t ngx_pty_keeper_secret(ngx_pty_keeper_t *k, int fd);


static void
ngx_pty_keeper_main(ngx_pty_spawn_t *sp)
{
    ngx_uint_t             i;
    ngx_pty_keeper_t       k;
    ngx_pty_session_sh_t  *sh;

    ngx_pty_keeper_begin(&k, sp);

    for (i = 0; i < NGX_PTY_KEEPER_PEERS; i++) {
        k.peers[i].fd = -1;
    }

    if (sp == NULL) {
        /* a spare: all of the above was done ahead, the rest is its start */
        sp = ngx_pty_keeper_spare_start(k.ctl, k.sfd, k.wfd, k.child,
                                        k.master);
    }

    sh = sp->sh;
    k.secret = sp->secret;

    /* a worker that takes the session over needs it later: not before exec */
    k.lfd = ngx_pty_keeper_listen(sp->id);

    ngx_pty_keeper_started(&k);
    ngx_pty_keeper_serve(&k);

    /* the status reaches the zone even when no worker is listening */
    sh->keeper_status = ((ngx_atomic_uint_t) k.status << 1) | 1;
    ngx_memory_barrier();

    if (k.ctl != -1) {
        (void) ngx_pty_keeper_put(k.ctl, NGX_PTY_KEEPER_EXIT, k.status, -1);
    }

    if (k.lfd != -1) {
        close(k.lfd);
    }

    /* what the child left running goes with it, setsid() or not */
    ngx_pty_keeper_reap_all();

    _exit(0);
}


/*
 * Everything the session started is the keeper's descendant (a subreaper
 * gets the orphans): SIGHUP and SIGTERM to all, SIGKILL after the grace,
 * and the keeper exits only when it has no child left.  Its user (a range
 * uid) is free again only then.
 */
static void
ngx_pty_keeper_reap_all(void)
{
    int64_t    deadline;
    ngx_pid_t  pid;

    ngx_pty_keeper_kill_session(0, SIGHUP);
    ngx_pty_keeper_kill_session(0, SIGTERM);
    ngx_pty_keeper_kill_session(0, SIGCONT);

    deadline = ngx_pty_keeper_msec() + NGX_PTY_KILL_GRACE;

    for ( ;; ) {
        while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
            /* void */
        }

        if (pid == -1 && errno == ECHILD) {
            return;
        }

        if (ngx_pty_keeper_msec() >= deadline) {
            /* forks in between are caught by the next round */
            ngx_pty_keeper_kill_session(0, SIGKILL);
        }

        /* a child's end wakes the signalfd's SIGCHLD; 10 ms at most */
        (void) poll(NULL, 0, 10);
    }
}


/*
 * The keeper's own session and signals, the watch on nginx, the terminal,
 * and the child (forked ahead by a spare, to wait for its start).
 */
static void
ngx_pty_keeper_begin(ngx_pty_keeper_t *k, ngx_pty_spawn_t *sp)
{
    sigset_t        set;
    struct winsize  ws;

    ngx_memzero(k, sizeof(ngx_pty_keeper_t));
    k->ctl = NGX_PTY_KEEPER_FD;
    k->lfd = -1;
    k->deadline = -1;

    ngx_setproctitle(sp ? "pty session keeper" : "pty spare keeper");

    /* nothing of the worker's but the control socket and the zone */
    ngx_pty_keeper_close_from(NGX_PTY_KEEPER_FD + 1, -1, -1);

    (void) setsid();

    /*
     * What the session's processes leave behind (double-forked daemons)
     * comes back to the keeper, not to init: the keeper finds everything
     * of its session among its descendants (ngx_pty_keeper_kill_session).
     */
    (void) prctl(PR_SET_CHILD_SUBREAPER, 1);

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    ngx_pty_keeper_reset_signals(&set);

    k->sfd = signalfd(-1, &set, SFD_CLOEXEC);
    k->wfd = ngx_pty_keeper_watch(ngx_pty_nginx_pid);

    /* the child reports a failed exec here; a good one just closes it */
    if (pipe2(ngx_pty_keeper_exec_pipe, O_CLOEXEC) == -1
        || (sp == NULL
            && (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
                           ngx_pty_keeper_go)
                   == -1
                || ngx_pty_keeper_start_room(ngx_pty_keeper_go[0]) == -1)))
    {
        ngx_pty_keeper_fail(k, errno);
    }

    ngx_memzero(&ws, sizeof(struct winsize));

    if (sp) {
        ws.ws_col = (unsigned short) sp->cols;
        ws.ws_row = (unsigned short) sp->rows;
    }

    /*
     * A spare forks its child ahead too, and the child waits for its
     * command: a start costs no fork at all.
     */
    k->child = forkpty(&k->master, NULL, NULL, &ws);

    if (k->child == 0) {
        ngx_pty_keeper_exec(sp);
    }

    (void) close(ngx_pty_keeper_exec_pipe[1]);

    if (sp == NULL) {
        (void) close(ngx_pty_keeper_go[1]);
    }

    if (k->child == -1 || k->sfd == -1) {
        ngx_pty_keeper_fail(k, errno);
    }

    /* root no more, before anything of a worker's is read */
    if (ngx_pty_keeper_drop_to_workers() == -1) {
        ngx_pty_keeper_fail(k, errno);
    }
}


/*
 * A keeper forked by a root spawner becomes the workers' user, keeping
 * CAP_KILL alone: it signals the program's processes, whoever they run as,
 * and the workers may signal it.  Not dumpable: nobody of its user may
 * trace it or read its memory (the terminal, the zone).
 */
static int
ngx_pty_keeper_drop_to_workers(void)
{
    ngx_pty_creds_t                 *cr;
    struct __user_cap_header_struct  hdr;
    struct __user_cap_data_struct    data[2];

    cr = &ngx_pty_keeper_creds;

    if (cr->privileged) {
        ngx_memzero(&hdr, sizeof(hdr));
        ngx_memzero(data, sizeof(data));
        hdr.version = _LINUX_CAPABILITY_VERSION_3;
        data[0].permitted = 1U << CAP_KILL;
        data[0].effective = 1U << CAP_KILL;

        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == -1
            || setgroups(0, NULL) == -1
            || setgid(cr->keeper_gid) == -1
            || setuid(cr->keeper_uid) == -1
            || syscall(SYS_capset, &hdr, data) == -1
            || prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) == -1)
        {
            return -1;
        }
    }

    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}


/*
 * The program's process takes its terminal and becomes its user before it
 * reads anything of a worker's; no setuid program can raise it again.
 */
static void
ngx_pty_keeper_drop_to_program(void)
{
    ngx_pty_creds_t  *cr;

    cr = &ngx_pty_keeper_creds;

    if (cr->privileged
        && (fchown(STDIN_FILENO, cr->uid, (gid_t) -1) == -1
            || setgroups(cr->ngroups, cr->groups) == -1
            || setgid(cr->gid) == -1
            || setuid(cr->uid) == -1
            || getuid() != cr->uid || geteuid() != cr->uid
            || (cr->uid != 0 && setuid(0) == 0)))
    {
        ngx_pty_keeper_exec_failed(errno ? errno : EPERM);
    }

    /* the owner writes, the tty group (write(1), wall) may: nobody else */
    if (fchmod(STDIN_FILENO, 0620) == -1
        || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
    {
        ngx_pty_keeper_exec_failed(errno);
    }
}


static void
ngx_pty_keeper_fail(ngx_pty_keeper_t *k, int err)
{
    (void) ngx_pty_keeper_put(k->ctl, NGX_PTY_KEEPER_FAILED, err, -1);

    if (k->child > 0) {
        (void) kill(k->child, SIGKILL);
    }

    _exit(0);
}


/* the exec's outcome: the terminal goes to the worker, or the failure */
static void
ngx_pty_keeper_started(ngx_pty_keeper_t *k)
{
    int  n, err;

    /* the keeper may block: it is its own process */
    while ((n = read(ngx_pty_keeper_exec_pipe[0], &err, sizeof(int))) == -1
           && errno == EINTR)
    {
        /* void */
    }

    if (n == (int) sizeof(int)) {
        (void) waitpid(k->child, NULL, 0);
        (void) ngx_pty_keeper_put(k->ctl, NGX_PTY_KEEPER_FAILED, err, -1);
        _exit(0);
    }

    (void) close(ngx_pty_keeper_exec_pipe[0]);

    (void) ngx_pty_keeper_put(k->ctl, NGX_PTY_KEEPER_READY, k->child,
                              k->master);
}


/*
 * Until the child exits: kill requests (a message, or a signal from any
 * process), nginx going away, and new owners.  k->status is its status.
 */
static void
ngx_pty_keeper_serve(ngx_pty_keeper_t *k)
{
    int            nfds, timeout, ci, wi, li, pi;
    ngx_uint_t     i;
    struct pollfd  pfd[4 + NGX_PTY_KEEPER_PEERS];

    for ( ;; ) {
        nfds = 0;
        ci = wi = li = -1;
        pfd[nfds].fd = k->sfd;
        pfd[nfds++].events = POLLIN;

        if (k->ctl != -1) {
            ci = nfds;
            pfd[nfds].fd = k->ctl;
            pfd[nfds++].events = POLLIN;
        }

        if (k->wfd != -1) {
            wi = nfds;
            pfd[nfds].fd = k->wfd;
            pfd[nfds++].events = POLLIN;
        }

        if (k->lfd != -1) {
            li = nfds;
            pfd[nfds].fd = k->lfd;
            pfd[nfds++].events = POLLIN;
        }

        /* a free slot's fd is -1: poll() skips it */
        pi = nfds;

        for (i = 0; i < NGX_PTY_KEEPER_PEERS; i++) {
            pfd[nfds].fd = k->peers[i].fd;
            pfd[nfds++].events = POLLIN;
        }

        /* without a pidfd (old kernels, valgrind) nginx is polled */
        timeout = (k->wfd == -1 && k->deadline == -1) ? 1000 : -1;

        if (k->wfd == -1 && k->deadline == -1
            && kill(ngx_pty_nginx_pid, 0) == -1 && errno == ESRCH)
        {
            ngx_pty_keeper_terminate(k);
        }

        if (k->deadline != -1) {
            timeout = (int) (k->deadline - ngx_pty_keeper_msec());

            if (timeout <= 0) {
                ngx_pty_keeper_kill_session(k->child, SIGKILL);
                k->deadline = -1;
                timeout = -1;
            }
        }

        timeout = ngx_pty_keeper_timeout(k, timeout);

        if (poll(pfd, nfds, timeout) == -1) {
            if (errno != EINTR) {
                _exit(0);
            }

            continue;
        }

        if (ngx_pty_keeper_event(k, pfd, ci, wi, li) == NGX_DONE) {
            return;
        }

        ngx_pty_keeper_peers(k, pfd, pi);
    }
}


/* the poll's timeout, shortened to the first peer's deadline */
static int
ngx_pty_keeper_timeout(ngx_pty_keeper_t *k, int timeout)
{
    int64_t     left, now;
    ngx_uint_t  i;

    now = ngx_pty_keeper_msec();

    for (i = 0; i < NGX_PTY_KEEPER_PEERS; i++) {
        if (k->peers[i].fd == -1) {
            continue;
        }

        left = ngx_max(k->peers[i].deadline - now, 0);

        if (timeout == -1 || left < timeout) {
            timeout = (int) left;
        }
    }

    return timeout;
}


/* one poll's events but the peers'; NGX_DONE: the child exited */
static ngx_int_t
ngx_pty_keeper_event(ngx_pty_keeper_t *k, struct pollfd *pfd, int ci,
    int wi, int li)
{
    int                       wstatus, exited;
    ssize_t                   n;
    ngx_pid_t                 pid;
    ngx_pty_keeper_msg_t      msg;
    struct signalfd_siginfo   si;

    if (pfd[0].revents & POLLIN) {
        if (read(k->sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)
            && si.ssi_signo != SIGCHLD)
        {
            /* asked to stop from outside: end the child gracefully */
            ngx_pty_keeper_terminate(k);
            return NGX_OK;
        }

        exited = 0;

        /* orphans of the session are ours too (a subreaper) */
        while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
            if (pid == k->child) {
                k->status = wstatus;
                exited = 1;
            }
        }

        return exited ? NGX_DONE : NGX_OK;
    }

    if (wi != -1 && (pfd[wi].revents & (POLLIN|POLLHUP))) {
        /* nginx is gone: so is its session */
        close(k->wfd);
        k->wfd = -1;
        ngx_pty_keeper_terminate(k);
    }

    if (ci != -1 && pfd[ci].revents) {
        n = recv(k->ctl, &msg, sizeof(msg), MSG_DONTWAIT);

        if (n == 0 || (n == -1 && errno != EINTR && errno != EAGAIN)) {
            /* the owner went away; the session lives on */
            close(k->ctl);
            k->ctl = -1;

        } else if (n == (ssize_t) sizeof(msg)
                   && (msg.type == NGX_PTY_KEEPER_KILL
                       || msg.type == NGX_PTY_KEEPER_TERMINATE))
        {
            ngx_pty_keeper_terminate(k);
        }
    }

    /* last: a new owner replaces k->ctl, whose events are above */
    if (li != -1 && (pfd[li].revents & POLLIN)) {
        ngx_pty_keeper_accept(k);
    }

    return NGX_OK;
}


/* SIGHUP and SIGTERM to the child's session, SIGKILL after the grace */
static void
ngx_pty_keeper_terminate(ngx_pty_keeper_t *k)
{
    if (k->deadline == -1) {
        ngx_pty_keeper_kill_session(k->child, SIGHUP);
        ngx_pty_keeper_kill_session(k->child, SIGTERM);
        k->deadline = ngx_pty_keeper_msec() + NGX_PTY_KILL_GRACE;
    }
}


/*
 * A spare's start: its session comes from the worker, the terminal takes
 * the session's size, and the child waiting to exec gets the start too.
 */
static ngx_pty_spawn_t *
ngx_pty_keeper_spare_start(int ctl, int sfd, int wfd, ngx_pid_t child,
    int master)
{
    size_t            len;
    u_char           *raw;
    struct winsize    ws;
    ngx_pty_spawn_t  *sp;

    sp = ngx_pty_keeper_wait_start(ctl, sfd, wfd, child, &raw, &len);

    ngx_setproctitle("pty session keeper");

    ngx_memzero(&ws, sizeof(struct winsize));
    ws.ws_col = (unsigned short) sp->cols;
    ws.ws_row = (unsigned short) sp->rows;

    if (ioctl(master, TIOCSWINSZ, &ws) == -1
        || send(ngx_pty_keeper_go[0], raw, len, MSG_NOSIGNAL)
           != (ssize_t) len)
    {
        (void) ngx_pty_keeper_put(ctl, NGX_PTY_KEEPER_FAILED, errno, -1);
        ngx_pty_keeper_spare_exit(child);
    }

    (void) close(ngx_pty_keeper_go[0]);

    return sp;
}


/*
 * A spare waits for its session.  It ends without a word, and takes its
 * waiting child with it, when the worker lets it go (the end of its
 * socket), when nginx goes, on a signal, or when the child died.
 */
static ngx_pty_spawn_t *
ngx_pty_keeper_wait_start(int ctl, int sfd, int wfd, ngx_pid_t child,
    u_char **raw, size_t *len)
{
    u_char                   *buf;
    ssize_t                   n;
    struct pollfd             pfd[3];
    struct signalfd_siginfo   si;
    static ngx_pty_spawn_t    sp;
    static char              *env[NGX_PTY_START_ENV + 1];

    buf = malloc(NGX_PTY_START_MAX);
    if (buf == NULL) {
        ngx_pty_keeper_spare_exit(child);
    }

    for ( ;; ) {
        pfd[0].fd = ctl;
        pfd[0].events = POLLIN;
        pfd[1].fd = sfd;
        pfd[1].events = POLLIN;
        pfd[2].fd = wfd;            /* -1 (no pidfd): poll() skips it */
        pfd[2].events = POLLIN;

        if (wfd == -1 && kill(ngx_pty_nginx_pid, 0) == -1
            && errno == ESRCH)
        {
            ngx_pty_keeper_spare_exit(child);
        }

        if (poll(pfd, 3, wfd == -1 ? 1000 : -1) == -1) {
            if (errno == EINTR) {
                continue;
            }

            ngx_pty_keeper_spare_exit(child);
        }

        if (pfd[2].revents) {
            ngx_pty_keeper_spare_exit(child);
        }

        if ((pfd[1].revents & POLLIN)
            && read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)
            && (si.ssi_signo != SIGCHLD || waitpid(child, NULL, WNOHANG)))
        {
            /* asked to stop, or the child is gone (or cannot be waited) */
            ngx_pty_keeper_spare_exit(child);
        }

        if (pfd[0].revents == 0) {
            continue;
        }

        n = recv(ctl, buf, NGX_PTY_START_MAX, 0);

        if (n == -1 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }

        if (n <= 0) {
            ngx_pty_keeper_spare_exit(child);
        }

        if (ngx_pty_keeper_start_parse(buf, n, &sp, env) == -1) {
            (void) ngx_pty_keeper_put(ctl, NGX_PTY_KEEPER_FAILED, EINVAL, -1);
            ngx_pty_keeper_spare_exit(child);
        }

        *raw = buf;
        *len = n;

        return &sp;
    }
}


/* a clock for the keeper, and for a worker that waits at its exit */
static int64_t
ngx_pty_keeper_msec(void)
{
    struct timespec  ts;

    (void) clock_gettime(CLOCK_MONOTONIC, &ts);

    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


/* a spare that ends reaps its child: no command comes for it */
static void
ngx_pty_keeper_spare_exit(ngx_pid_t child)
{
    (void) kill(child, SIGKILL);
    (void) waitpid(child, NULL, 0);

    _exit(0);
}


/* the start the worker sent (ngx_pty_keeper_start_request); -1: malformed */
static int
ngx_pty_keeper_start_parse(u_char *buf, size_t n, ngx_pty_spawn_t *sp,
    char **env)
{
    u_char                  *p, *s, *last;
    ngx_uint_t               i;
    ngx_pty_keeper_start_t   st;

    if (n < sizeof(ngx_pty_keeper_start_t)) {
        return -1;
    }

    ngx_memcpy(&st, buf, sizeof(ngx_pty_keeper_start_t));

    if (st.type != NGX_PTY_KEEPER_START || st.nenv > NGX_PTY_START_ENV
        || st.cols > NGX_PTY_MAX_SIZE || st.rows > NGX_PTY_MAX_SIZE)
    {
        return -1;
    }

    /*
     * The keeper writes the child's status at sh: a record of the zone,
     * never anywhere else in its own memory, whatever a worker sent.
     */
    if ((u_char *) st.sh < ngx_pty_keeper_zone_start
        || (u_char *) st.sh + sizeof(ngx_pty_session_sh_t)
           > ngx_pty_keeper_zone_end
        || (uintptr_t) st.sh % sizeof(void *) != 0)
    {
        return -1;
    }

    ngx_memzero(sp, sizeof(ngx_pty_spawn_t));
    sp->sh = st.sh;
    sp->cols = st.cols;
    sp->rows = st.rows;
    sp->envp = env;

    /* in buf, which outlives the parse */
    sp->id = buf + offsetof(ngx_pty_keeper_start_t, id);
    sp->secret = buf + offsetof(ngx_pty_keeper_start_t, secret);

    p = buf + sizeof(ngx_pty_keeper_start_t);
    last = buf + n;

    /* the shell, the command, then the environment */
    for (i = 0; i < st.nenv + 2; i++) {
        s = p;
        p = ngx_strlchr(p, last, '\0');

        if (p == NULL) {
            return -1;
        }

        p++;

        if (i == 0) {
            sp->shell = (char *) s;

        } else if (i == 1) {
            sp->command = s;

        } else {
            env[i - 2] = (char *) s;
        }
    }

    env[st.nenv] = NULL;

    if (st.argc) {
        p = ngx_pty_keeper_argv_parse(p, last, st.argc, sp);

        if (p == NULL) {
            return -1;
        }
    }

    if (st.nsandbox) {
        return ngx_pty_keeper_sandbox_parse(p, last, st.nsandbox, sp);
    }

    return 0;
}


/* the words of pty_sandbox; too many make the start too big */
static size_t
ngx_pty_keeper_words_size(char **words, uint32_t *n)
{
    size_t      size;
    ngx_uint_t  i;

    size = 0;

    for (i = 0; words && words[i]; i++) {
        size += ngx_strlen(words[i]) + 1;
    }

    *n = (uint32_t) i;

    return i > NGX_PTY_START_ARGV ? NGX_PTY_START_MAX : size;
}


static int
ngx_pty_keeper_sandbox_parse(u_char *p, u_char *last, uint32_t n,
    ngx_pty_spawn_t *sp)
{
    static char  *words[NGX_PTY_START_ARGV + 1];

    sp->sandbox = words;

    return ngx_pty_keeper_words_parse(p, last, n, words) ? 0 : -1;
}


/* n null-terminated words from p into words[], NULL-ended; the end or NULL */
static u_char *
ngx_pty_keeper_words_parse(u_char *p, u_char *last, uint32_t n,
    char **words)
{
    u_char    *s;
    uint32_t   i;

    if (n > NGX_PTY_START_ARGV) {
        return NULL;
    }

    for (i = 0; i < n; i++) {
        s = p;
        p = ngx_strlchr(p, last, '\0');

        if (p == NULL) {
            return NULL;
        }

        words[i] = (char *) s;
        p++;
    }

    words[n] = NULL;

    return p;
}


/* the program's path and words in a start, when it has them */
static size_t
ngx_pty_keeper_argv_size(ngx_pty_spawn_t *sp, uint32_t *argc)
{
    size_t      n;
    ngx_uint_t  i;

    *argc = 0;

    if (sp->argv == NULL) {
        return 0;
    }

    n = ngx_strlen(sp->path) + 1;

    for (i = 0; sp->argv[i]; i++) {
        n += ngx_strlen(sp->argv[i]) + 1;
    }

    /* too many: the message is refused as too big, as for the environment */
    *argc = (uint32_t) i;

    return i > NGX_PTY_START_ARGV ? NGX_PTY_START_MAX : n;
}


static u_char *
ngx_pty_keeper_argv_put(u_char *p, ngx_pty_spawn_t *sp)
{
    ngx_uint_t  i;

    if (sp->argv == NULL) {
        return p;
    }

    p = ngx_cpymem(p, sp->path, ngx_strlen(sp->path) + 1);

    for (i = 0; sp->argv[i]; i++) {
        p = ngx_cpymem(p, sp->argv[i], ngx_strlen(sp->argv[i]) + 1);
    }

    return p;
}


static u_char *
ngx_pty_keeper_argv_parse(u_char *p, u_char *last, uint32_t argc,
    ngx_pty_spawn_t *sp)
{
    char         *path[2];
    static char  *argv[NGX_PTY_START_ARGV + 1];

    /* the path, then the words */
    p = ngx_pty_keeper_words_parse(p, last, 1, path);

    if (p == NULL) {
        return NULL;
    }

    sp->path = path[0];
    sp->argv = argv;

    return ngx_pty_keeper_words_parse(p, last, argc, argv);
}


/* where a worker finds this keeper again: an abstract socket by session */
static int
ngx_pty_keeper_listen(u_char *id)
{
    int                 fd;
    socklen_t           len;
    struct sockaddr_un  sa;

    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        return -1;
    }

    len = ngx_pty_keeper_address(&sa, id);

    if (bind(fd, (struct sockaddr *) &sa, len) == -1 || listen(fd, 4) == -1) {
        close(fd);
        return -1;
    }

    return fd;
}


/*
 * Only nginx's workers may take the terminal: an abstract socket is
 * reachable by anyone on the host.  The peer must be of the workers' user
 * (programs never are, with pty_user) and must send the session's secret
 * first, which only the zone and this keeper hold: another process of the
 * same user (a service sharing "nobody") cannot read either.
 */
static void
ngx_pty_keeper_accept(ngx_pty_keeper_t *k)
{
    int                     fd;
    socklen_t               len;
    ngx_uint_t              i;
    struct ucred            cred;
    ngx_pty_keeper_peer_t  *peer;

    fd = accept4(k->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1) {
        return;
    }

    len = sizeof(struct ucred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1
        || (cred.uid != getuid() && cred.uid != 0))
    {
        ngx_pty_keeper_refused(0);
        close(fd);
        return;
    }

    if (ngx_pty_keeper_secret(k, fd) != NGX_AGAIN) {
        return;
    }

    /*
     * The worker sends the secret right after its connect, so it is
     * nearly always there; but a worker on a busy machine can lose its
     * CPU in between for a good part of a second.  The peer waits in the
     * poll loop, not in a blocking wait: the keeper keeps serving its
     * child and its owner whoever connects.  With every slot taken the
     * oldest peer goes.
     */
    peer = &k->peers[0];

    for (i = 0; i < NGX_PTY_KEEPER_PEERS; i++) {
        if (k->peers[i].fd == -1) {
            peer = &k->peers[i];
            break;
        }

        if (k->peers[i].deadline < peer->deadline) {
            peer = &k->peers[i];
        }
    }

    if (peer->fd != -1) {
        ngx_pty_keeper_refused(1);
        close(peer->fd);
    }

    peer->fd = fd;
    peer->deadline = ngx_pty_keeper_msec() + NGX_PTY_KEEPER_SECRET_WAIT;
}


/* the peers whose secret came, and those whose wait is over */
static void
ngx_pty_keeper_peers(ngx_pty_keeper_t *k, struct pollfd *pfd, int pi)
{
    int64_t                 now;
    ngx_uint_t              i;
    ngx_pty_keeper_peer_t  *peer;

    now = ngx_pty_keeper_msec();

    for (i = 0; i < NGX_PTY_KEEPER_PEERS; i++) {
        peer = &k->peers[i];

        if (peer->fd == -1) {
            continue;
        }

        if (pfd[pi + i].fd == peer->fd && pfd[pi + i].revents) {
            if (ngx_pty_keeper_secret(k, peer->fd) != NGX_AGAIN) {
                peer->fd = -1;
            }

        } else if (now >= peer->deadline) {
            ngx_pty_keeper_refused(1);
            close(peer->fd);
            peer->fd = -1;
        }
    }
}


/*
 * The secret from a connected peer: NGX_OK, it owns the session now;
 * NGX_AGAIN, nothing came yet; NGX_DECLINED, the peer is closed.
 */
static ngx_int_t
ngx_pty_keeper_secret(ngx_pty_keeper_t *k, int fd)
{
    u_char      got[NGX_PTY_SECRET_LEN];
    ssize_t     n;
    ngx_uint_t  i, diff;

    n = recv(fd, got, sizeof(got), MSG_DONTWAIT);

    if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
        return NGX_AGAIN;
    }

    diff = (n != (ssize_t) sizeof(got));

    for (i = 0; n == (ssize_t) sizeof(got) && i < sizeof(got); i++) {
        diff |= got[i] ^ k->secret[i];
    }

    if (diff) {
        ngx_pty_keeper_refused(1);
        close(fd);
        return NGX_DECLINED;
    }

    if (ngx_pty_keeper_put(fd, NGX_PTY_KEEPER_READY, k->child, k->master)
        == -1)
    {
        close(fd);
        return NGX_DECLINED;
    }

    if (k->ctl != -1) {
        close(k->ctl);
    }

    k->ctl = fd;

    return NGX_OK;
}


/* a socket a whole start fits in, as one message: root's to grant */
static int
ngx_pty_keeper_start_room(int fd)
{
    int  size;

    if (!ngx_pty_keeper_creds.privileged) {
        return 0;
    }

    size = NGX_PTY_START_MAX + 4096;

    return setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(int));
}


/* once per keeper and reason, into nginx's error log (its stderr) */
static void
ngx_pty_keeper_refused(ngx_uint_t why)
{
    int                n;
    char               line[256];
    time_t             now;
    struct tm          tm;
    static ngx_uint_t  said;
    static const char *reasons[] = {
        "a process of another user",
        "a peer without the session's secret"
    };

    if (said & (1 << why)) {
        return;
    }

    said |= 1 << why;

    now = time(NULL);
    (void) localtime_r(&now, &tm);

    n = snprintf(line, sizeof(line),
                 "%04d/%02d/%02d %02d:%02d:%02d [warn] %d#0: pty: the keeper "
                 "refused %s (logged once per keeper)\n",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, (int) getpid(), reasons[why]);

    if (n > 0
        && write(STDERR_FILENO, line, ngx_min((size_t) n, sizeof(line) - 1))
           == -1)
    {
        return;
    }
}


static void
ngx_pty_keeper_reset_signals(sigset_t *keep)
{
    int               signo;
    sigset_t          none;
    struct sigaction  sa;

    ngx_memzero(&sa, sizeof(struct sigaction));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);

    for (signo = 1; signo < NSIG; signo++) {
        (void) sigaction(signo, &sa, NULL);
    }

    sigemptyset(&none);
    (void) sigprocmask(SIG_SETMASK, keep ? keep : &none, NULL);
}


/* a descriptor that becomes readable when nginx exits */
static int
ngx_pty_keeper_watch(ngx_pid_t pid)
{
#ifdef SYS_pidfd_open
    int  fd;

    fd = (int) syscall(SYS_pidfd_open, pid, 0);

    if (fd != -1) {
        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
        return fd;
    }
#endif

    (void) pid;

    return -1;
}


/*
 * Signals every process of the child's session (the shell's jobs get
 * their own process groups, so killpg() alone would miss them).  They are
 * all descendants of the keeper, a subreaper: walking its tree through
 * /proc/PID/task/TID/children costs the session's size, where a scan of
 * /proc would cost every process on the host at each kill.
 */
#define NGX_PTY_KEEPER_TREE  4096

static void
ngx_pty_keeper_kill_session(ngx_pid_t sid, int signo)
{
    int             fd;
    char           *p, *last;
    ssize_t         n;
    ngx_pid_t       pid, child, stack[NGX_PTY_KEEPER_TREE];
    ngx_uint_t      sp;
    struct dirent  *de;
    DIR            *dir;
    char            path[320], buf[4096];

    if (sid > 0) {
        (void) kill(-sid, signo);
    }

    stack[0] = getpid();
    sp = 1;

    while (sp) {
        pid = stack[--sp];

        (void) snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);

        dir = opendir(path);
        if (dir == NULL) {
            continue;
        }

        while ((de = readdir(dir)) != NULL) {
            if (de->d_name[0] == '.') {
                continue;
            }

            (void) snprintf(path, sizeof(path), "/proc/%d/task/%s/children",
                            (int) pid, de->d_name);

            fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd == -1) {
                continue;
            }

            n = read(fd, buf, sizeof(buf) - 1);
            (void) close(fd);

            if (n <= 0) {
                continue;
            }

            buf[n] = '\0';
            last = buf + n;

            /* pid names the next thread's file: the children get their own */
            for (p = buf; p < last; p++) {
                child = (ngx_pid_t) strtol(p, &p, 10);

                if (child <= 0) {
                    continue;
                }

                (void) kill(child, signo);

                if (sp < NGX_PTY_KEEPER_TREE) {
                    stack[sp++] = child;
                }
            }
        }

        (void) closedir(dir);
    }
}


static void
ngx_pty_keeper_exec(ngx_pty_spawn_t *sp)
{
    char  *home;
    int    i;

    ngx_pty_keeper_reset_signals(NULL);

    /*
     * Everything but the exec pipe, which exec closes (O_CLOEXEC), and the
     * socket a spare's child waits on: no descriptor of nginx's may reach
     * the user's program, however high.
     */
    if (sp) {
        ngx_pty_keeper_close_from(3, ngx_pty_keeper_exec_pipe[1], -1);
        ngx_pty_keeper_drop_to_program();

    } else {
        ngx_pty_keeper_close_from(3, ngx_pty_keeper_exec_pipe[1],
                                  ngx_pty_keeper_go[1]);
        ngx_pty_keeper_drop_to_program();
        sp = ngx_pty_keeper_exec_wait();
    }

    home = NULL;

    for (i = 0; sp->envp[i]; i++) {
        if (ngx_strncmp(sp->envp[i], "HOME=", 5) == 0) {
            home = sp->envp[i] + 5;
        }
    }

    if ((home == NULL || chdir(home) == -1) && chdir("/") == -1) {
        ngx_pty_keeper_exec_failed(errno);
    }

    ngx_pty_keeper_exec_program(sp);
}


/*
 * The words as they are (a pty_allow location), or the command by a shell;
 * under pty_sandbox, as the sandbox's last words.
 */
static void
ngx_pty_keeper_exec_program(ngx_pty_spawn_t *sp)
{
    char        *shell[4], **prog, **argv;
    ngx_uint_t   n, i, j;

    shell[0] = sp->shell;
    shell[1] = "-lc";
    shell[2] = (char *) sp->command;
    shell[3] = NULL;

    prog = shell;

    if (sp->argv) {
        /* the sandbox runs the path, which the policy resolved */
        prog = sp->argv;

        if (sp->sandbox == NULL) {
            execve(sp->path, sp->argv, sp->envp);
            ngx_pty_keeper_exec_failed(errno);
        }
    }

    if (sp->sandbox == NULL) {
        execve(sp->shell, shell, sp->envp);
        ngx_pty_keeper_exec_failed(errno);
    }

    for (n = 0; sp->sandbox[n]; n++) { /* void */ }
    for (i = 0; prog[i]; i++) { /* void */ }

    argv = malloc((n + i + 1) * sizeof(char *));
    if (argv == NULL) {
        ngx_pty_keeper_exec_failed(ENOMEM);
    }

    for (j = 0; j < n; j++) {
        argv[j] = sp->sandbox[j];
    }

    for (j = 0; j < i; j++) {
        argv[n + j] = prog[j];
    }

    if (sp->argv) {
        argv[n] = sp->path;
    }

    argv[n + i] = NULL;

    execve(argv[0], argv, sp->envp);

    ngx_pty_keeper_exec_failed(errno);
}


/* a spare's child: the start its keeper passes on, or the end */
static ngx_pty_spawn_t *
ngx_pty_keeper_exec_wait(void)
{
    u_char                  *buf;
    ssize_t                  n;
    static ngx_pty_spawn_t   sp;
    static char             *env[NGX_PTY_START_ENV + 1];

    buf = malloc(NGX_PTY_START_MAX);
    if (buf == NULL) {
        ngx_pty_keeper_exec_failed(ENOMEM);
    }

    do {
        n = recv(ngx_pty_keeper_go[1], buf, NGX_PTY_START_MAX, 0);
    } while (n == -1 && errno == EINTR);

    if (n <= 0) {
        /* the spare is gone, never used */
        _exit(0);
    }

    if (ngx_pty_keeper_start_parse(buf, n, &sp, env) == -1) {
        ngx_pty_keeper_exec_failed(EINVAL);
    }

    (void) close(ngx_pty_keeper_go[1]);

    return &sp;
}


/* closes every descriptor from "from" up, except "keep" and "keep2" */
static void
ngx_pty_keeper_close_from(int from, int keep, int keep2)
{
    int  k;

    if (keep > keep2) {
        k = keep;
        keep = keep2;
        keep2 = k;
    }

    if (keep >= from) {
        ngx_pty_keeper_close_range(from, keep - 1);
        from = keep + 1;
    }

    if (keep2 >= from) {
        ngx_pty_keeper_close_range(from, keep2 - 1);
        from = keep2 + 1;
    }

    ngx_pty_keeper_close_range(from, -1);
}


/* from..to, to -1: all above */
static void
ngx_pty_keeper_close_range(int from, int to)
{
    int  fd, last;

    if (to != -1 && to < from) {
        return;
    }

    if (syscall(SYS_close_range, (unsigned int) from,
                to == -1 ? ~0U : (unsigned int) to, 0)
        == 0)
    {
        return;
    }

    /* pre-5.9 kernels: as far as the descriptor limit goes */
    last = (to == -1) ? (int) sysconf(_SC_OPEN_MAX) - 1 : to;

    for (fd = from; fd <= last; fd++) {
        (void) close(fd);
    }
}


/* the keeper turns this into a Closed "error" frame */
static void
ngx_pty_keeper_exec_failed(int err)
{
    ssize_t  n;

    n = write(ngx_pty_keeper_exec_pipe[1], &err, sizeof(int));

    _exit(n == (ssize_t) sizeof(int) ? 127 : 126);
}


static int
ngx_pty_keeper_put(int ctl, uint32_t type, int32_t value, int fd)
{
    return ngx_pty_keeper_send(ctl, type, value, fd, 0);
}


/* a message, with a descriptor when fd is not -1 */
int
ngx_pty_keeper_send(int ctl, uint32_t type, int32_t value, int fd,
    int flags)
{
    struct iovec          iov;
    struct msghdr         mh;
    struct cmsghdr       *cm;
    ngx_pty_keeper_msg_t  msg;
    union {
        struct cmsghdr  cm;
        char            space[CMSG_SPACE(sizeof(int))];
    } cmsg;

    msg.type = type;
    msg.value = value;

    iov.iov_base = &msg;
    iov.iov_len = sizeof(msg);

    ngx_memzero(&mh, sizeof(struct msghdr));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;

    if (fd != -1) {
        ngx_memzero(&cmsg, sizeof(cmsg));
        mh.msg_control = &cmsg;
        mh.msg_controllen = sizeof(cmsg);

        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        ngx_memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }

    return sendmsg(ctl, &mh, MSG_NOSIGNAL | flags) == (ssize_t) sizeof(msg)
           ? 0 : -1;
}

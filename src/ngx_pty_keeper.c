
/*
 * The session keeper process.  Everything below ngx_pty_keeper_main() runs
 * in the forked keeper, outside nginx's event loop: blocking calls are fine
 * there, nginx's own functions are not used (its state is the worker's).
 */

#include "ngx_pty.h"
#include "ngx_pty_keeper.h"

#include <pty.h>
#include <poll.h>
#include <pwd.h>
#include <dirent.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/prctl.h>


#define NGX_PTY_KEEPER_FD  3


static void ngx_pty_keeper_main(ngx_pty_spawn_t *sp) ngx_pty_noreturn;
static void ngx_pty_keeper_reset_signals(sigset_t *keep);
static int ngx_pty_keeper_watch(ngx_pid_t pid);
static void ngx_pty_keeper_kill_session(ngx_pid_t sid, int signo);
static void ngx_pty_keeper_exec(ngx_pty_spawn_t *sp) ngx_pty_noreturn;
static void ngx_pty_keeper_exec_failed(int err) ngx_pty_noreturn;
static void ngx_pty_keeper_close_from(int from, int keep);

static int  ngx_pty_keeper_exec_pipe[2];
static int ngx_pty_keeper_put(int ctl, uint32_t type, int32_t value, int fd);
static int ngx_pty_keeper_listen(u_char *id);
static int ngx_pty_keeper_accept(int lfd, int ctl, ngx_pid_t child,
    int master);


/*
 * The keeper forker.  A keeper forked from the worker would share every
 * page of the worker, whose memory grows with its sessions: fork() copies
 * its page tables, each keeper keeps the old copy of every page the worker
 * writes after it, and starting and ending sessions gets slower as there
 * are more.  So at its start each worker forks a forker, still small, that
 * forks the keepers for it: the worker sends it the spawn request over a
 * socket pair and gets the keeper's pid and control socket back.  Without
 * a forker (it could not start, or died) the worker forks keepers itself.
 */

#define NGX_PTY_FORKER_FD      3
#define NGX_PTY_FORKER_MAX     65536     /* a request, with the environment */
#define NGX_PTY_FORKER_ENV     1024
#define NGX_PTY_FORKER_WAIT    2         /* s for its answer, then drop it */

typedef struct {
    ngx_pty_session_sh_t      *sh;
    uint32_t                   cols;
    uint32_t                   rows;
    ngx_pid_t                  nginx_pid;
    uint32_t                   nenv;
    /* then the shell and nenv environment strings, each null-terminated */
} ngx_pty_forker_req_t;


static ngx_socket_t  ngx_pty_forker = (ngx_socket_t) -1;
static ngx_pid_t     ngx_pty_forker_pid = NGX_INVALID_PID;


static void ngx_pty_keeper_forker_main(ngx_cycle_t *cycle) ngx_pty_noreturn;
static ngx_pid_t ngx_pty_keeper_fork(ngx_pty_spawn_t *sp, ngx_socket_t *ctl,
    ngx_err_t *err);
static ngx_pid_t ngx_pty_keeper_forker_spawn(ngx_pty_spawn_t *sp,
    ngx_socket_t *ctl, ngx_uint_t *fallback, ngx_log_t *log);


ngx_int_t
ngx_pty_keeper_forker_start(ngx_cycle_t *cycle)
{
    int              sv[2];
    ngx_pid_t        pid;
    struct timeval   tv;

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
    ngx_pty_forker = sv[0];
    ngx_pty_forker_pid = pid;

    /* the worker waits for each answer: never for ever */
    tv.tv_sec = NGX_PTY_FORKER_WAIT;
    tv.tv_usec = 0;

    if (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == -1) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, ngx_socket_errno,
                      "pty: setsockopt(SO_RCVTIMEO) for the keeper forker "
                      "failed; the worker forks keepers itself");
        ngx_pty_keeper_forker_stop();
    }

    return NGX_OK;
}


void
ngx_pty_keeper_forker_stop(void)
{
    if (ngx_pty_forker != (ngx_socket_t) -1) {
        /* the forker ends on the end of its socket */
        close(ngx_pty_forker);
        ngx_pty_forker = (ngx_socket_t) -1;
        ngx_pty_forker_pid = NGX_INVALID_PID;
    }
}


ngx_pid_t
ngx_pty_keeper_spawn(ngx_pty_spawn_t *sp, ngx_socket_t *ctl, ngx_log_t *log)
{
    ngx_pid_t   pid;
    ngx_err_t   err;
    ngx_uint_t  fallback;

    fallback = 1;

    if (ngx_pty_forker != (ngx_socket_t) -1) {
        pid = ngx_pty_keeper_forker_spawn(sp, ctl, &fallback, log);

        if (pid != NGX_INVALID_PID || !fallback) {
            return pid;
        }
    }

    pid = ngx_pty_keeper_fork(sp, ctl, &err);

    if (pid == NGX_INVALID_PID) {
        ngx_log_error(NGX_LOG_ALERT, log, err,
                      "pty: fork() of the keeper failed");
    }

    return pid;
}


/*
 * One request, one answer (the keeper's pid and its control socket).  The
 * worker waits for the answer: it is a fork() of a small process, shorter
 * than the fork() of the worker that it replaces.  A forker that is gone
 * is dropped, and the caller forks itself.
 */
static ngx_pid_t
ngx_pty_keeper_forker_spawn(ngx_pty_spawn_t *sp, ngx_socket_t *ctl,
    ngx_uint_t *fallback, ngx_log_t *log)
{
    u_char                *buf, *p;
    size_t                 len;
    ssize_t                n;
    ngx_fd_t               fd;
    ngx_int_t              rc;
    ngx_uint_t             i;
    ngx_pty_forker_req_t   req;
    ngx_pty_keeper_msg_t   msg;

    len = sizeof(ngx_pty_forker_req_t) + ngx_strlen(sp->shell) + 1;

    for (i = 0; sp->envp[i]; i++) {
        len += ngx_strlen(sp->envp[i]) + 1;
    }

    if (len > NGX_PTY_FORKER_MAX || i > NGX_PTY_FORKER_ENV) {
        /* the worker forks this one itself */
        return NGX_INVALID_PID;
    }

    buf = ngx_alloc(len, log);
    if (buf == NULL) {
        return NGX_INVALID_PID;
    }

    req.sh = sp->sh;
    req.cols = (uint32_t) sp->cols;
    req.rows = (uint32_t) sp->rows;
    req.nginx_pid = sp->nginx_pid;
    req.nenv = (uint32_t) i;

    p = ngx_cpymem(buf, &req, sizeof(ngx_pty_forker_req_t));
    p = ngx_cpymem(p, sp->shell, ngx_strlen(sp->shell) + 1);

    for (i = 0; sp->envp[i]; i++) {
        p = ngx_cpymem(p, sp->envp[i], ngx_strlen(sp->envp[i]) + 1);
    }

    n = send(ngx_pty_forker, buf, len, MSG_NOSIGNAL);

    ngx_free(buf);

    if (n != (ssize_t) len) {
        goto gone;
    }

    /* the socket blocks, NGX_PTY_FORKER_WAIT at most: wait for the answer */
    do {
        rc = ngx_pty_keeper_recv(ngx_pty_forker, &msg, &fd, log);
    } while (rc == NGX_AGAIN && ngx_socket_errno == NGX_EINTR);

    if (rc == NGX_AGAIN) {
        /*
         * A forker that does not answer (stopped, or starved) is killed
         * and dropped, and this start fails: a keeper it might still
         * have forked must not meet a second one forked here.
         */
        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "pty: the keeper forker did not answer in %d s; it is "
                      "killed, and the worker forks keepers itself",
                      NGX_PTY_FORKER_WAIT);

        if (ngx_pty_forker_pid != NGX_INVALID_PID) {
            (void) kill(ngx_pty_forker_pid, SIGKILL);
        }

        ngx_pty_keeper_forker_stop();
        *fallback = 0;

        return NGX_INVALID_PID;
    }

    if (rc != NGX_OK || msg.type != NGX_PTY_KEEPER_SPAWNED) {
        goto gone;
    }

    if (msg.value <= 0 || fd == NGX_INVALID_FILE) {
        ngx_log_error(NGX_LOG_ALERT, log, (ngx_err_t) -msg.value,
                      "pty: the keeper forker could not fork a keeper");

        if (fd != NGX_INVALID_FILE) {
            close(fd);
        }

        return NGX_INVALID_PID;
    }

    if (ngx_nonblocking(fd) == -1) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_socket_errno,
                      ngx_nonblocking_n " keeper socket failed");
        close(fd);
        kill(msg.value, SIGKILL);
        return NGX_INVALID_PID;
    }

    *ctl = fd;

    return (ngx_pid_t) msg.value;

gone:

    ngx_log_error(NGX_LOG_ALERT, log, ngx_socket_errno,
                  "pty: the keeper forker is gone; the worker forks "
                  "keepers itself");

    ngx_pty_keeper_forker_stop();

    return NGX_INVALID_PID;
}


/* forks a keeper; no logging: the forker has no log */
static ngx_pid_t
ngx_pty_keeper_fork(ngx_pty_spawn_t *sp, ngx_socket_t *ctl, ngx_err_t *err)
{
    int        sv[2];
    ngx_pid_t  pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        *err = ngx_errno;
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


/* ---- below: the forker process ---- */


static void
ngx_pty_keeper_forker_main(ngx_cycle_t *cycle)
{
    char                   *env[NGX_PTY_FORKER_ENV + 1];
    u_char                 *buf, *p, *last;
    ssize_t                 n;
    ngx_err_t               err;
    ngx_pid_t               pid;
    ngx_uint_t              i;
    ngx_socket_t            ctl;
    ngx_pty_spawn_t         sp;
    struct sigaction        sa;
    ngx_pty_forker_req_t    req;

    ngx_setproctitle("pty keeper forker");

    /* nothing of the worker's but the socket, the zone and stdio */
    ngx_pty_keeper_close_from(NGX_PTY_FORKER_FD + 1, -1);

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

    buf = malloc(NGX_PTY_FORKER_MAX);
    if (buf == NULL) {
        _exit(0);
    }

    for ( ;; ) {
        n = recv(NGX_PTY_FORKER_FD, buf, NGX_PTY_FORKER_MAX, 0);

        if (n == -1 && errno == EINTR) {
            continue;
        }

        if (n <= 0) {
            /* the worker is gone */
            _exit(0);
        }

        if ((size_t) n < sizeof(ngx_pty_forker_req_t)) {
            continue;
        }

        ngx_memcpy(&req, buf, sizeof(ngx_pty_forker_req_t));

        p = buf + sizeof(ngx_pty_forker_req_t);
        last = buf + n;

        ngx_memzero(&sp, sizeof(ngx_pty_spawn_t));
        sp.sh = req.sh;
        sp.command = req.sh->command;
        sp.cols = req.cols;
        sp.rows = req.rows;
        sp.nginx_pid = req.nginx_pid;
        sp.envp = env;

        for (i = 0; i <= req.nenv && i <= NGX_PTY_FORKER_ENV && p < last; i++)
        {
            if (i == 0) {
                sp.shell = (char *) p;

            } else {
                env[i - 1] = (char *) p;
            }

            p = ngx_strlchr(p, last, '\0');

            if (p == NULL) {
                break;
            }

            p++;
        }

        if (p == NULL || i != req.nenv + 1) {
            (void) ngx_pty_keeper_put(NGX_PTY_FORKER_FD,
                                      NGX_PTY_KEEPER_SPAWNED, -EINVAL, -1);
            continue;
        }

        env[req.nenv] = NULL;

        pid = ngx_pty_keeper_fork(&sp, &ctl, &err);

        if (pid == NGX_INVALID_PID) {
            (void) ngx_pty_keeper_put(NGX_PTY_FORKER_FD,
                                      NGX_PTY_KEEPER_SPAWNED, -err, -1);
            continue;
        }

        (void) ngx_pty_keeper_put(NGX_PTY_FORKER_FD, NGX_PTY_KEEPER_SPAWNED,
                                  pid, ctl);
        close(ctl);
    }
}


/* the child's environment: a terminal's basics, then the operator's */
char **
ngx_pty_keeper_env(ngx_pool_t *pool, ngx_array_t *extra)
{
    char            **envp, *home;
    size_t            n, i, j;
    ngx_str_t        *e;
    struct passwd    *pw;
    static char      *base[] = {
        "TERM=xterm-256color",
        "COLORTERM=truecolor",
        "LANG=C.UTF-8",
        "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
        NULL
    };

    n = (extra ? extra->nelts : 0) + 8;

    envp = ngx_pcalloc(pool, n * sizeof(char *));
    if (envp == NULL) {
        return NULL;
    }

    for (i = 0; base[i]; i++) {
        envp[i] = base[i];
    }

    pw = getpwuid(getuid());
    home = (pw && pw->pw_dir) ? pw->pw_dir : "/";

    envp[i] = (char *) ngx_pnalloc(pool, sizeof("HOME=") + ngx_strlen(home));
    if (envp[i] == NULL) {
        return NULL;
    }

    ngx_sprintf((u_char *) envp[i++], "HOME=%s%Z", home);

    if (pw && pw->pw_name) {
        envp[i] = (char *) ngx_pnalloc(pool,
                                     sizeof("USER=") + ngx_strlen(pw->pw_name));
        if (envp[i] == NULL) {
            return NULL;
        }

        ngx_sprintf((u_char *) envp[i++], "USER=%s%Z", pw->pw_name);
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


/* a new owner's line to a running keeper; READY and the fd follow */
ngx_socket_t
ngx_pty_keeper_connect(u_char *id, ngx_log_t *log)
{
    ngx_socket_t        fd;
    socklen_t           len;
    struct sockaddr_un  sa;

    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_socket_errno,
                      "pty: socket() for the keeper failed");
        return (ngx_socket_t) -1;
    }

    len = ngx_pty_keeper_address(&sa, id);

    /* a local stream connect completes at once or fails */
    if (connect(fd, (struct sockaddr *) &sa, len) == -1) {
        ngx_log_error(NGX_LOG_INFO, log, ngx_socket_errno,
                      "pty: keeper of session %*s is gone",
                      (size_t) NGX_PTY_ID_LEN, id);
        close(fd);
        return (ngx_socket_t) -1;
    }

    return fd;
}


ngx_int_t
ngx_pty_keeper_recv(ngx_socket_t ctl, ngx_pty_keeper_msg_t *msg, ngx_fd_t *fd,
    ngx_log_t *log)
{
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

    n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);

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
        return NGX_ERROR;
    }

    *fd = NGX_INVALID_FILE;

    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS
            && cm->cmsg_len == CMSG_LEN(sizeof(int)))
        {
            ngx_memcpy(fd, CMSG_DATA(cm), sizeof(int));
        }
    }

    return NGX_OK;
}


ngx_int_t
ngx_pty_keeper_send(ngx_socket_t ctl, ngx_uint_t type, ngx_log_t *log)
{
    ngx_pty_keeper_msg_t  msg;

    msg.type = (uint32_t) type;
    msg.value = 0;

    if (send(ctl, &msg, sizeof(msg), MSG_DONTWAIT | MSG_NOSIGNAL)
        != (ssize_t) sizeof(msg))
    {
        ngx_log_error(NGX_LOG_ERR, log, ngx_socket_errno,
                      "pty: send() to the keeper failed");
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* ---- below: the keeper process ---- */


static void
ngx_pty_keeper_main(ngx_pty_spawn_t *sp)
{
    int                    ctl, sfd, wfd, lfd, master, status, nfds,
                           timeout, wi, ci, li, wstatus, exited;
    int64_t                deadline;
    ngx_pid_t              child, pid;
    sigset_t               set;
    struct pollfd          pfd[4];
    struct winsize         ws;
    struct signalfd_siginfo  si;
    ngx_pty_keeper_msg_t   msg;
    ngx_pty_session_sh_t  *sh;

    ctl = NGX_PTY_KEEPER_FD;
    sh = sp->sh;

    ngx_setproctitle("pty session keeper");

    /* nothing of the worker's but the control socket and the zone */
    ngx_pty_keeper_close_from(NGX_PTY_KEEPER_FD + 1, -1);

    (void) setsid();

    /*
     * What the session's processes leave behind (double-forked daemons)
     * comes back to the keeper, not to init: the keeper finds everything
     * of its session among its descendants (ngx_pty_keeper_kill_session).
     */
    (void) prctl(PR_SET_CHILD_SUBREAPER, 1);
    exited = 0;

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    ngx_pty_keeper_reset_signals(&set);

    sfd = signalfd(-1, &set, SFD_CLOEXEC);
    wfd = ngx_pty_keeper_watch(sp->nginx_pid);
    lfd = ngx_pty_keeper_listen(sh->id);

    ngx_memzero(&ws, sizeof(struct winsize));
    ws.ws_col = (unsigned short) sp->cols;
    ws.ws_row = (unsigned short) sp->rows;

    /* the child reports a failed exec here; a good one just closes it */
    if (pipe2(ngx_pty_keeper_exec_pipe, O_CLOEXEC) == -1) {
        (void) ngx_pty_keeper_put(ctl, NGX_PTY_KEEPER_FAILED, errno, -1);
        _exit(0);
    }

    child = forkpty(&master, NULL, NULL, &ws);

    if (child == 0) {
        ngx_pty_keeper_exec(sp);
    }

    (void) close(ngx_pty_keeper_exec_pipe[1]);

    if (child == -1 || sfd == -1) {
        (void) ngx_pty_keeper_put(ctl, NGX_PTY_KEEPER_FAILED, errno, -1);
        _exit(0);
    }

    /* the keeper may block: it is its own process */
    while ((nfds = read(ngx_pty_keeper_exec_pipe[0], &status, sizeof(int)))
           == -1 && errno == EINTR)
    {
        /* void */
    }

    if (nfds == (int) sizeof(int)) {
        (void) waitpid(child, NULL, 0);
        (void) ngx_pty_keeper_put(ctl, NGX_PTY_KEEPER_FAILED, status, -1);
        _exit(0);
    }

    (void) close(ngx_pty_keeper_exec_pipe[0]);

    (void) ngx_pty_keeper_put(ctl, NGX_PTY_KEEPER_READY, child, master);

    deadline = -1;

    for ( ;; ) {
        nfds = 0;
        ci = wi = li = -1;
        pfd[nfds].fd = sfd;
        pfd[nfds++].events = POLLIN;

        if (ctl != -1) {
            ci = nfds;
            pfd[nfds].fd = ctl;
            pfd[nfds++].events = POLLIN;
        }

        if (wfd != -1) {
            wi = nfds;
            pfd[nfds].fd = wfd;
            pfd[nfds++].events = POLLIN;
        }

        if (lfd != -1) {
            li = nfds;
            pfd[nfds].fd = lfd;
            pfd[nfds++].events = POLLIN;
        }

        /* without a pidfd (old kernels, valgrind) nginx is polled */
        timeout = (wfd == -1 && deadline == -1) ? 1000 : -1;

        if (wfd == -1 && kill(sp->nginx_pid, 0) == -1 && errno == ESRCH
            && deadline == -1)
        {
            goto terminate;
        }

        if (deadline != -1) {
            struct timespec  ts;

            clock_gettime(CLOCK_MONOTONIC, &ts);
            timeout = (int) (deadline
                             - ((int64_t) ts.tv_sec * 1000
                                + ts.tv_nsec / 1000000));

            if (timeout <= 0) {
                ngx_pty_keeper_kill_session(child, SIGKILL);
                deadline = -1;
                timeout = -1;
            }
        }

        if (poll(pfd, nfds, timeout) == -1 && errno != EINTR) {
            _exit(0);
        }

        if (pfd[0].revents & POLLIN) {
            if (read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)
                && si.ssi_signo != SIGCHLD)
            {
                /* asked to stop from outside: end the child gracefully */
                goto terminate;
            }

            /* orphans of the session are ours too (a subreaper) */
            while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
                if (pid == child) {
                    status = wstatus;
                    exited = 1;
                }
            }

            if (exited) {
                break;
            }

            continue;
        }

        if (li != -1 && (pfd[li].revents & POLLIN)) {
            /* a worker takes the session over: it gets the terminal */
            ctl = ngx_pty_keeper_accept(lfd, ctl, child, master);
            continue;
        }

        if (wi != -1 && (pfd[wi].revents & (POLLIN|POLLHUP))) {
            /* nginx is gone: so is its session */
            close(wfd);
            wfd = -1;
            goto terminate;
        }

        if (ci != -1 && pfd[ci].revents) {
            ssize_t  n = recv(ctl, &msg, sizeof(msg), 0);

            if (n == 0 || (n == -1 && errno != EINTR && errno != EAGAIN)) {
                /* the owner went away; the session lives on */
                close(ctl);
                ctl = -1;
                continue;
            }

            if (n == (ssize_t) sizeof(msg)
                && (msg.type == NGX_PTY_KEEPER_KILL
                    || msg.type == NGX_PTY_KEEPER_TERMINATE))
            {
                goto terminate;
            }
        }

        continue;

    terminate:

        if (deadline == -1) {
            struct timespec  ts;

            ngx_pty_keeper_kill_session(child, SIGHUP);
            ngx_pty_keeper_kill_session(child, SIGTERM);
            clock_gettime(CLOCK_MONOTONIC, &ts);
            deadline = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000
                       + NGX_PTY_KILL_GRACE;
        }
    }

    /* the status reaches the zone even when no worker is listening */
    sh->keeper_status = ((ngx_atomic_uint_t) status << 1) | 1;
    ngx_memory_barrier();

    /* what the child left running in its session goes with it */
    ngx_pty_keeper_kill_session(child, SIGHUP);

    if (ctl != -1) {
        (void) ngx_pty_keeper_put(ctl, NGX_PTY_KEEPER_EXIT, status, -1);
    }

    _exit(0);
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
 * Only processes of the keeper's own user (nginx's workers) may take the
 * terminal: an abstract socket is reachable by anyone on the host.
 */
static int
ngx_pty_keeper_accept(int lfd, int ctl, ngx_pid_t child, int master)
{
    int            fd;
    socklen_t      len;
    struct ucred   cred;

    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1) {
        return ctl;
    }

    len = sizeof(struct ucred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1
        || (cred.uid != getuid() && cred.uid != 0))
    {
        close(fd);
        return ctl;
    }

    if (ngx_pty_keeper_put(fd, NGX_PTY_KEEPER_READY, child, master) == -1) {
        close(fd);
        return ctl;
    }

    if (ctl != -1) {
        close(ctl);
    }

    return fd;
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
    ngx_pid_t       pid, stack[NGX_PTY_KEEPER_TREE];
    ngx_uint_t      sp;
    struct dirent  *de;
    DIR            *dir;
    char            path[320], buf[4096];

    (void) kill(-sid, signo);

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

            for (p = buf; p < last; p++) {
                pid = (ngx_pid_t) strtol(p, &p, 10);

                if (pid <= 0 || getsid(pid) != sid) {
                    /* another session's: nothing of ours below it */
                    continue;
                }

                (void) kill(pid, signo);

                if (sp < NGX_PTY_KEEPER_TREE) {
                    stack[sp++] = pid;
                }
            }
        }

        (void) closedir(dir);
    }
}


static void
ngx_pty_keeper_exec(ngx_pty_spawn_t *sp)
{
    char  *argv[4], *home;
    int    i;

    ngx_pty_keeper_reset_signals(NULL);

    /*
     * Everything but the exec pipe, which exec closes (O_CLOEXEC): no
     * descriptor of nginx's may reach the user's program, however high.
     */
    ngx_pty_keeper_close_from(3, ngx_pty_keeper_exec_pipe[1]);

    home = NULL;

    for (i = 0; sp->envp[i]; i++) {
        if (ngx_strncmp(sp->envp[i], "HOME=", 5) == 0) {
            home = sp->envp[i] + 5;
        }
    }

    if ((home == NULL || chdir(home) == -1) && chdir("/") == -1) {
        ngx_pty_keeper_exec_failed(errno);
    }

    argv[0] = sp->shell;
    argv[1] = "-lc";
    argv[2] = (char *) sp->command;
    argv[3] = NULL;

    execve(sp->shell, argv, sp->envp);

    ngx_pty_keeper_exec_failed(errno);
}


/* closes every descriptor from "from" up, except "keep" */
static void
ngx_pty_keeper_close_from(int from, int keep)
{
    int  fd;

    if (keep >= from) {
        if (keep > from
            && syscall(SYS_close_range, from, keep - 1, 0) == -1)
        {
            for (fd = from; fd < keep; fd++) {
                (void) close(fd);
            }
        }

        from = keep + 1;
    }

    if (syscall(SYS_close_range, from, ~0U, 0) == -1) {
        /* pre-5.9 kernels: as far as the descriptor limit goes */
        for (fd = from; fd < (int) sysconf(_SC_OPEN_MAX); fd++) {
            (void) close(fd);
        }
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

    return sendmsg(ctl, &mh, MSG_NOSIGNAL) == (ssize_t) sizeof(msg) ? 0 : -1;
}


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


ngx_pid_t
ngx_pty_keeper_spawn(ngx_pty_spawn_t *sp, ngx_socket_t *ctl, ngx_log_t *log)
{
    int        sv[2];
    ngx_pid_t  pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "pty: socketpair() for the keeper failed");
        return NGX_INVALID_PID;
    }

    pid = fork();

    switch (pid) {

    case -1:
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "pty: fork() of the keeper failed");
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
        ngx_log_error(NGX_LOG_ALERT, log, ngx_socket_errno,
                      ngx_nonblocking_n " keeper socket failed");
        close(sv[0]);
        kill(pid, SIGKILL);
        return NGX_INVALID_PID;
    }

    *ctl = sv[0];

    return pid;
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
                           timeout, wi, ci, li;
    int64_t                deadline;
    ngx_pid_t              child;
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

            if (waitpid(child, &status, WNOHANG) == child) {
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
 * their own process groups, so killpg() alone would miss them).
 */
static void
ngx_pty_keeper_kill_session(ngx_pid_t sid, int signo)
{
    DIR            *dir;
    ngx_pid_t       pid;
    struct dirent  *de;

    (void) kill(-sid, signo);

    dir = opendir("/proc");
    if (dir == NULL) {
        return;
    }

    while ((de = readdir(dir)) != NULL) {
        pid = atoi(de->d_name);

        if (pid > 0 && pid != getpid() && getsid(pid) == sid) {
            (void) kill(pid, signo);
        }
    }

    closedir(dir);
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

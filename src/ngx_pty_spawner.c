
/*
 * The spawner process and the workers' lines to it.
 *
 * Forked by the master at init_module, while it is still root, it is the
 * only process of the module that keeps root.  What it does with it is
 * small: it reads fixed-size requests (a worker registers its line; a
 * worker asks for a spare keeper), forks keepers, and picks the program's
 * user for each.  The keeper drops to the workers' user (with CAP_KILL)
 * and the program's process to the program's user before either reads
 * anything a worker sent (ngx_pty_keeper.c).
 *
 * The spawner is kept across reloads while what it was made from (the
 * users, the zone) is the same, so one process hands out range uids.  One
 * made for a new configuration first marks the uids of the range that some
 * process still runs as.
 */

#include "ngx_pty.h"
#include "ngx_pty_keeper.h"
#include "ngx_pty_spawner.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_util.h"

#include <poll.h>
#include <pwd.h>
#include <grp.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>


#define NGX_PTY_SPAWNER_REGISTER  100     /* worker -> spawner, + its line */
#define NGX_PTY_SPAWNER_LINES     1024    /* workers at once, reloads too */
#define NGX_PTY_SPAWNER_GROUPS    64


typedef struct {
    ngx_uint_t                 privileged;
    ngx_uint_t                 off;         /* pty_user off: no spawner */
    ngx_uint_t                 range;       /* a uid per session */
    ngx_uid_t                  uid;         /* pty_user, or the first */
    ngx_gid_t                  gid;
    ngx_uid_t                  last;        /* of the range */
    ngx_uint_t                 ngroups;
    ngx_gid_t                  groups[NGX_PTY_SPAWNER_GROUPS];
    ngx_uid_t                  keeper_uid;
    ngx_gid_t                  keeper_gid;
    u_char                    *zone_start;
    u_char                    *zone_end;
} ngx_pty_spawner_conf_t;


typedef struct {
    int                        fd;
    ngx_pid_t                  nginx_pid;
} ngx_pty_spawner_line_t;


/* a keeper alive, and the range uid it holds */
typedef struct {
    ngx_pid_t                  pid;
    ngx_uid_t                  uid;
} ngx_pty_spawner_lease_t;


/* the master's, inherited by its workers: kept across reloads */
static ngx_pty_spawner_conf_t  ngx_pty_spawner_conf;
static ngx_pid_t               ngx_pty_spawner_proc = NGX_INVALID_PID;
static ngx_socket_t            ngx_pty_spawner_reg = (ngx_socket_t) -1;
static char                   *ngx_pty_spawner_home;
static char                   *ngx_pty_spawner_user;

/* the spawner's own */
static uint8_t                *ngx_pty_uid_used;
static ngx_uid_t               ngx_pty_uid_next;
static ngx_pty_spawner_lease_t *ngx_pty_leases;
static ngx_uint_t              ngx_pty_nleases, ngx_pty_leases_max;


static ngx_int_t ngx_pty_spawner_conf_make(ngx_cycle_t *cycle,
    ngx_pty_main_conf_t *pmcf, ngx_pty_spawner_conf_t *sc);
static ngx_int_t ngx_pty_spawner_user_set(ngx_cycle_t *cycle,
    ngx_pty_main_conf_t *pmcf, ngx_pty_spawner_conf_t *sc);
static ngx_int_t ngx_pty_spawner_fork(ngx_cycle_t *cycle);
static void ngx_pty_spawner_main(ngx_cycle_t *cycle, int reg)
    ngx_pty_noreturn;
static int ngx_pty_spawner_setup(ngx_cycle_t *cycle, int reg, int *sfd);
static int ngx_pty_spawner_register(int reg, ngx_pty_spawner_line_t *lines,
    ngx_uint_t *nlines);
static int ngx_pty_spawner_serve(ngx_pty_spawner_line_t *line);
static ngx_int_t ngx_pty_spawner_uid_take(ngx_uid_t *uid);
static void ngx_pty_spawner_reaped(ngx_pid_t pid);
static ngx_pid_t ngx_pty_spawner_sweep(ngx_uid_t uid);
static void ngx_pty_spawner_mark_running(void);
static ngx_uint_t ngx_pty_spawner_has_children(void);


char *
ngx_pty_spawner_set_user(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    ngx_str_t  *value;

    if (pmcf->user.data || pmcf->user_range) {
        return "is duplicate, or pty_user_range is set";
    }

    value = cf->args->elts;

    pmcf->user = value[1];

    if (cf->args->nelts == 3) {
        pmcf->group = value[2];
    }

    return NGX_CONF_OK;
}


char *
ngx_pty_spawner_set_range(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    ngx_str_t  *value;
    ngx_int_t   first, last;

    if (pmcf->user.data || pmcf->user_range) {
        return "is duplicate, or pty_user is set";
    }

    value = cf->args->elts;

    first = ngx_atoi(value[1].data, value[1].len);
    last = ngx_atoi(value[2].data, value[2].len);

    if (first < 1000 || last < first || last > 0x7fffffff
        || last - first >= NGX_PTY_RANGE_MAX)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid range \"%V %V\": from 1000 up, the last "
                           "not below the first, %d uids at most",
                           &value[1], &value[2], NGX_PTY_RANGE_MAX);
        return NGX_CONF_ERROR;
    }

    pmcf->user_range = 1;
    pmcf->uid_first = (ngx_uid_t) first;
    pmcf->uid_last = (ngx_uid_t) last;

    return NGX_CONF_OK;
}


ngx_int_t
ngx_pty_spawner_init(ngx_cycle_t *cycle)
{
    ngx_pty_main_conf_t     *pmcf;
    ngx_pty_spawner_conf_t   sc;

    pmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_pty_module);

    if (pmcf == NULL || pmcf->shm_zone == NULL) {
        return NGX_OK;
    }

    if (ngx_pty_spawner_conf_make(cycle, pmcf, &sc) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_test_config || ngx_process == NGX_PROCESS_SIGNALLER) {
        return NGX_OK;
    }

    if (sc.off) {
        if (ngx_pty_spawner_reg != (ngx_socket_t) -1) {
            close(ngx_pty_spawner_reg);
            ngx_pty_spawner_reg = (ngx_socket_t) -1;
        }

        ngx_pty_spawner_conf = sc;
        ngx_pty_spawner_proc = NGX_INVALID_PID;

        return NGX_OK;
    }

    if (ngx_pty_spawner_reg != (ngx_socket_t) -1
        && ngx_memcmp(&sc, &ngx_pty_spawner_conf, sizeof(sc)) == 0
        && ngx_pty_spawner_proc != NGX_INVALID_PID
        && kill(ngx_pty_spawner_proc, 0) == 0)
    {
        /* the same users and zone: the same spawner, and its leases */
        return NGX_OK;
    }

    if (ngx_pty_spawner_reg != (ngx_socket_t) -1) {
        /* the old one ends with the last worker registered with it */
        close(ngx_pty_spawner_reg);
        ngx_pty_spawner_reg = (ngx_socket_t) -1;
    }

    ngx_pty_spawner_conf = sc;

    return ngx_pty_spawner_fork(cycle);
}


/*
 * Programs never run as the workers' user when nginx starts as root: the
 * operator names their user, or a range to take one from per session.
 */
static ngx_int_t
ngx_pty_spawner_conf_make(ngx_cycle_t *cycle, ngx_pty_main_conf_t *pmcf,
    ngx_pty_spawner_conf_t *sc)
{
    ngx_core_conf_t  *ccf;

    ngx_memzero(sc, sizeof(ngx_pty_spawner_conf_t));

    /* the master's, from the configuration before: made again */
    if (ngx_pty_spawner_home) {
        ngx_free(ngx_pty_spawner_home);
        ngx_pty_spawner_home = NULL;
    }

    if (ngx_pty_spawner_user) {
        ngx_free(ngx_pty_spawner_user);
        ngx_pty_spawner_user = NULL;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    sc->privileged = (geteuid() == 0);

    /* without a master nginx keeps its user: so do the workers */
    sc->keeper_uid = (sc->privileged && ccf->master) ? ccf->user : geteuid();
    sc->keeper_gid = (sc->privileged && ccf->master) ? ccf->group : getegid();

    sc->zone_start = (u_char *) ngx_pty_shm_zone()->shpool;
    sc->zone_end = ngx_pty_shm_zone()->shpool->end;

    if (pmcf->user.len == 3 && ngx_strncmp(pmcf->user.data, "off", 3) == 0) {
        /* the operator's word: programs run as the workers, no spawner */
        sc->privileged = 0;
        sc->off = 1;

        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "pty: \"pty_user off\": programs run as the workers' "
                      "user, with no isolation between sessions");
        return NGX_OK;
    }

    if (pmcf->user.data == NULL && !pmcf->user_range) {
        if (!sc->privileged) {
            /* nobody to switch to: every program runs as nginx does */
            return NGX_OK;
        }

        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "pty: programs would run as the workers' user; set "
                      "\"pty_user\" or \"pty_user_range\" in the http block");
        return NGX_ERROR;
    }

    if (pmcf->user_range) {
        sc->range = 1;
        sc->uid = pmcf->uid_first;
        sc->gid = (ngx_gid_t) pmcf->uid_first;
        sc->last = pmcf->uid_last;

        if (sc->keeper_uid >= sc->uid && sc->keeper_uid <= sc->last) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "pty: \"pty_user_range\" holds the workers' uid "
                          "%ui", (ngx_uint_t) sc->keeper_uid);
            return NGX_ERROR;
        }

    } else if (ngx_pty_spawner_user_set(cycle, pmcf, sc) != NGX_OK) {
        return NGX_ERROR;
    }

    if (!sc->privileged) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "pty: \"%s\" needs nginx to start as root",
                      sc->range ? "pty_user_range" : "pty_user");
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_pty_spawner_user_set(ngx_cycle_t *cycle, ngx_pty_main_conf_t *pmcf,
    ngx_pty_spawner_conf_t *sc)
{
    int             n;
    gid_t           groups[NGX_PTY_SPAWNER_GROUPS];
    struct group   *gr;
    struct passwd  *pw;

    pw = getpwnam((char *) pmcf->user.data);
    if (pw == NULL) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "pty: getpwnam(\"%V\") failed", &pmcf->user);
        return NGX_ERROR;
    }

    sc->uid = pw->pw_uid;
    sc->gid = pw->pw_gid;

    if (pmcf->group.data) {
        gr = getgrnam((char *) pmcf->group.data);
        if (gr == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                          "pty: getgrnam(\"%V\") failed", &pmcf->group);
            return NGX_ERROR;
        }

        sc->gid = gr->gr_gid;
    }

    if (sc->uid == sc->keeper_uid || sc->uid == 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "pty: \"pty_user %V\" is %s", &pmcf->user,
                      sc->uid == 0 ? "root" : "the workers' user");
        return NGX_ERROR;
    }

    n = NGX_PTY_SPAWNER_GROUPS;

    if (getgrouplist(pw->pw_name, sc->gid, groups, &n) == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "pty: \"%V\" is in more than %d groups", &pmcf->user,
                      NGX_PTY_SPAWNER_GROUPS);
        return NGX_ERROR;
    }

    sc->ngroups = n;
    ngx_memcpy(sc->groups, groups, n * sizeof(gid_t));

    ngx_pty_spawner_home = ngx_alloc(sizeof("HOME=")
                                     + ngx_strlen(pw->pw_dir), cycle->log);
    ngx_pty_spawner_user = ngx_alloc(sizeof("USER=")
                                     + ngx_strlen(pw->pw_name), cycle->log);

    if (ngx_pty_spawner_home == NULL || ngx_pty_spawner_user == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf((u_char *) ngx_pty_spawner_home, "HOME=%s%Z", pw->pw_dir);
    ngx_sprintf((u_char *) ngx_pty_spawner_user, "USER=%s%Z", pw->pw_name);

    return NGX_OK;
}


static ngx_int_t
ngx_pty_spawner_fork(ngx_cycle_t *cycle)
{
    int        sv[2];
    ngx_pid_t  pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "pty: socketpair() for the spawner failed");
        return NGX_ERROR;
    }

    pid = fork();

    if (pid == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "pty: fork() of the spawner failed");
        close(sv[0]);
        close(sv[1]);
        return NGX_ERROR;
    }

    if (pid == 0) {
        ngx_pty_spawner_main(cycle, sv[1]);
    }

    close(sv[1]);

    /* workers inherit it by fork; a new binary (exec) must not */
    (void) fcntl(sv[0], F_SETFD, FD_CLOEXEC);

    ngx_pty_spawner_reg = sv[0];
    ngx_pty_spawner_proc = pid;

    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "pty: spawner %P started, programs run as %s %ui%s%ui",
                  pid, ngx_pty_spawner_conf.range ? "uids" : "uid",
                  (ngx_uint_t) ngx_pty_spawner_conf.uid,
                  ngx_pty_spawner_conf.range ? "-" : "",
                  ngx_pty_spawner_conf.range
                  ? (ngx_uint_t) ngx_pty_spawner_conf.last : (ngx_uint_t) 0);

    return NGX_OK;
}


ngx_socket_t
ngx_pty_spawner_channel(ngx_log_t *log, ngx_pid_t nginx_pid)
{
    int  sv[2];

    if (ngx_pty_spawner_reg == (ngx_socket_t) -1) {
        return (ngx_socket_t) -1;
    }

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "pty: socketpair() for the spawner failed");
        return (ngx_socket_t) -1;
    }

    if (ngx_pty_keeper_send(ngx_pty_spawner_reg, NGX_PTY_SPAWNER_REGISTER,
                            (int32_t) nginx_pid, sv[1], MSG_DONTWAIT)
        == -1)
    {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "pty: the spawner %P is gone", ngx_pty_spawner_proc);
        close(sv[0]);
        close(sv[1]);
        return (ngx_socket_t) -1;
    }

    close(sv[1]);

    return sv[0];
}


ngx_pid_t
ngx_pty_spawner_pid(void)
{
    return ngx_pty_spawner_proc;
}


ngx_uint_t
ngx_pty_spawner_privileged(void)
{
    /* root with no program user is refused by ngx_pty_spawner_conf_make() */
    return ngx_pty_spawner_conf.privileged;
}


ngx_int_t
ngx_pty_spawner_user_env(char **home, char **user)
{
    if (!ngx_pty_spawner_privileged()) {
        return NGX_DECLINED;
    }

    /* a range uid has no account: no home of its own */
    *home = ngx_pty_spawner_home ? ngx_pty_spawner_home : "HOME=/";
    *user = ngx_pty_spawner_user;

    return NGX_OK;
}


/* ---- below: the spawner process ---- */


static void
ngx_pty_spawner_main(ngx_cycle_t *cycle, int reg)
{
    int                      sfd, n;
    ngx_uint_t               i, nlines, reg_open;
    struct pollfd           *pfd;
    ngx_pty_spawner_line_t  *lines;
    struct signalfd_siginfo  si;

    reg = ngx_pty_spawner_setup(cycle, reg, &sfd);

    lines = calloc(NGX_PTY_SPAWNER_LINES, sizeof(ngx_pty_spawner_line_t));
    pfd = calloc(NGX_PTY_SPAWNER_LINES + 2, sizeof(struct pollfd));

    if (lines == NULL || pfd == NULL) {
        _exit(1);
    }

    nlines = 0;
    reg_open = 1;

    /* it ends after its workers and its keepers: it reaps and sweeps them */
    while (reg_open || nlines || ngx_pty_spawner_has_children()) {
        pfd[0].fd = sfd;
        pfd[0].events = POLLIN;
        pfd[1].fd = reg_open ? reg : -1;
        pfd[1].events = POLLIN;

        for (i = 0; i < nlines; i++) {
            pfd[i + 2].fd = lines[i].fd;
            pfd[i + 2].events = POLLIN;
        }

        if (poll(pfd, nlines + 2, -1) == -1) {
            if (errno == EINTR) {
                continue;
            }

            _exit(1);
        }

        if ((pfd[0].revents & POLLIN)
            && read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si))
        {
            ngx_pty_spawner_reaped(0);
        }

        if (pfd[1].revents
            && ngx_pty_spawner_register(reg, lines, &nlines) == -1)
        {
            /* every worker and the master let it go */
            reg_open = 0;
        }

        for (i = nlines; i > 0; i--) {
            if (pfd[i + 1].revents == 0 || pfd[i + 1].fd != lines[i - 1].fd) {
                continue;
            }

            n = ngx_pty_spawner_serve(&lines[i - 1]);

            if (n == -1) {
                close(lines[i - 1].fd);
                lines[i - 1] = lines[--nlines];
            }
        }
    }

    _exit(0);
}


/*
 * Nothing of the master's but the registration socket and the error log;
 * signals as a plain process's, SIGCHLD through a signalfd.
 */
static int
ngx_pty_spawner_setup(ngx_cycle_t *cycle, int reg, int *sfd)
{
    int               fd, log;
    sigset_t          set;
    struct sigaction  sa;

    ngx_setproctitle("pty spawner");

    (void) setsid();
    (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    /* what a dead keeper's program leaves comes here (swept by uid) */
    (void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

    log = cycle->log->file ? cycle->log->file->fd : -1;

    if (log > STDERR_FILENO && dup2(log, STDERR_FILENO) == -1) {
        _exit(1);
    }

    /* above the low numbers, which the signalfd and the keepers take */
    fd = fcntl(reg, F_DUPFD_CLOEXEC, 16);
    if (fd == -1) {
        _exit(1);
    }

    if (syscall(SYS_close_range, 3U, (unsigned int) fd - 1, 0) == -1
        || syscall(SYS_close_range, (unsigned int) fd + 1, ~0U, 0) == -1)
    {
        _exit(1);
    }

    ngx_memzero(&sa, sizeof(struct sigaction));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);

    for (log = 1; log < NSIG; log++) {
        (void) sigaction(log, &sa, NULL);
    }

    sa.sa_handler = SIG_IGN;
    (void) sigaction(SIGPIPE, &sa, NULL);
    (void) sigaction(SIGHUP, &sa, NULL);
    (void) sigaction(SIGINT, &sa, NULL);

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    (void) sigprocmask(SIG_SETMASK, &set, NULL);

    *sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (*sfd == -1) {
        _exit(1);
    }

    ngx_pty_keeper_zone_bounds(ngx_pty_spawner_conf.zone_start,
                               ngx_pty_spawner_conf.zone_end);

    if (ngx_pty_spawner_conf.range) {
        ngx_pty_spawner_mark_running();
    }

    return fd;
}


/* a worker's line; -1: the registration socket is closed by all */
static int
ngx_pty_spawner_register(int reg, ngx_pty_spawner_line_t *lines,
    ngx_uint_t *nlines)
{
    int                    fd;
    ssize_t                n;
    ngx_pty_keeper_msg_t   msg;

    n = ngx_pty_keeper_take(reg, &msg, &fd, MSG_DONTWAIT);

    if (n == 0) {
        return -1;
    }

    if (n == -1) {
        return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }

    if (fd == -1) {
        return 0;
    }

    if (n != (ssize_t) sizeof(msg) || msg.type != NGX_PTY_SPAWNER_REGISTER
        || msg.value <= 0 || *nlines == NGX_PTY_SPAWNER_LINES)
    {
        close(fd);
        return 0;
    }

    lines[*nlines].fd = fd;
    lines[*nlines].nginx_pid = (ngx_pid_t) msg.value;
    (*nlines)++;

    return 0;
}


/* one request of a worker: a spare keeper; -1: the worker is gone */
static int
ngx_pty_spawner_serve(ngx_pty_spawner_line_t *line)
{
    ssize_t                n;
    ngx_err_t              err;
    ngx_pid_t              pid;
    ngx_uid_t              uid;
    ngx_socket_t           ctl;
    ngx_pty_creds_t        cr;
    ngx_pty_keeper_msg_t   msg;
    ngx_pty_spawner_conf_t *sc;

    n = recv(line->fd, &msg, sizeof(msg), MSG_DONTWAIT);

    if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
        return 0;
    }

    if (n <= 0) {
        return -1;
    }

    if (n != (ssize_t) sizeof(msg) || msg.type != NGX_PTY_KEEPER_SPARE) {
        return ngx_pty_keeper_send(line->fd, NGX_PTY_KEEPER_SPAWNED, -EINVAL,
                                   -1, MSG_DONTWAIT);
    }

    sc = &ngx_pty_spawner_conf;
    uid = sc->uid;

    ngx_memzero(&cr, sizeof(ngx_pty_creds_t));
    cr.privileged = ngx_pty_spawner_privileged();
    cr.uid = sc->uid;
    cr.gid = sc->gid;
    cr.ngroups = sc->ngroups;
    cr.groups = sc->groups;
    cr.keeper_uid = sc->keeper_uid;
    cr.keeper_gid = sc->keeper_gid;
    cr.nginx_pid = line->nginx_pid;

    if (sc->range) {
        if (ngx_pty_spawner_uid_take(&uid) != NGX_OK) {
            return ngx_pty_keeper_send(line->fd, NGX_PTY_KEEPER_SPAWNED,
                                       -EAGAIN, -1, MSG_DONTWAIT);
        }

        cr.uid = uid;
        cr.gid = (ngx_gid_t) uid;
        cr.ngroups = 0;
    }

    pid = ngx_pty_keeper_fork_spare(&cr, &ctl, &err);

    if (pid == NGX_INVALID_PID) {
        if (sc->range) {
            ngx_pty_uid_used[uid - sc->uid] = 0;
        }

        return ngx_pty_keeper_send(line->fd, NGX_PTY_KEEPER_SPAWNED,
                                   -(int32_t) err, -1, MSG_DONTWAIT);
    }

    if (sc->range) {
        ngx_pty_leases[ngx_pty_nleases].pid = pid;
        ngx_pty_leases[ngx_pty_nleases++].uid = uid;
    }

    /* a spare the worker does not get ends on the end of its socket */
    n = ngx_pty_keeper_send(line->fd, NGX_PTY_KEEPER_SPAWNED, pid, ctl,
                            MSG_DONTWAIT);
    close(ctl);

    return (int) n;
}


/* the next free uid of the range, round the range */
static ngx_int_t
ngx_pty_spawner_uid_take(ngx_uid_t *uid)
{
    ngx_uint_t               i, size;
    ngx_pty_spawner_conf_t  *sc;

    sc = &ngx_pty_spawner_conf;
    size = sc->last - sc->uid + 1;

    if (ngx_pty_nleases == ngx_pty_leases_max) {
        return NGX_ERROR;
    }

    for (i = 0; i < size; i++) {
        ngx_pty_uid_next = (ngx_pty_uid_next + 1) % size;

        if (!ngx_pty_uid_used[ngx_pty_uid_next]) {
            ngx_pty_uid_used[ngx_pty_uid_next] = 1;
            *uid = sc->uid + ngx_pty_uid_next;
            return NGX_OK;
        }
    }

    return NGX_ERROR;
}


/*
 * Keepers that ended.  A keeper exits when nothing of its session is left;
 * one that was killed may leave processes, which the uid sweep ends before
 * the uid is given again.
 */
static void
ngx_pty_spawner_reaped(ngx_pid_t unused)
{
    int         status;
    ngx_pid_t   pid;
    ngx_uint_t  i;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {

        for (i = 0; i < ngx_pty_nleases; i++) {
            if (ngx_pty_leases[i].pid != pid) {
                continue;
            }

            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                /* the uid is the sweeper's until it is done */
                ngx_pty_leases[i].pid = ngx_pty_spawner_sweep(
                                                      ngx_pty_leases[i].uid);

                if (ngx_pty_leases[i].pid > 0) {
                    break;
                }
            }

            ngx_pty_uid_used[ngx_pty_leases[i].uid
                             - ngx_pty_spawner_conf.uid] = 0;
            ngx_pty_leases[i] = ngx_pty_leases[--ngx_pty_nleases];
            break;
        }
    }

    (void) unused;
}


/*
 * Every process of a range uid ends: kill(-1) as that uid reaches them all.
 * Rounds go on while some are left (forks racing a round meet the next;
 * the killed stay as zombies until the spawner, their subreaper, reaps
 * them), a second at most; the spawner does not wait for it.
 */
static ngx_pid_t
ngx_pty_spawner_sweep(ngx_uid_t uid)
{
    ngx_int_t  round;
    ngx_pid_t  pid;

    pid = fork();

    if (pid == 0) {
        if (setgroups(0, NULL) == -1 || setgid((ngx_gid_t) uid) == -1
            || setuid(uid) == -1)
        {
            _exit(1);
        }

        for (round = 0; round < 100 && kill(-1, SIGKILL) == 0; round++) {
            (void) poll(NULL, 0, 10);
        }

        _exit(0);
    }

    return pid;
}


/* without reaping: that is ngx_pty_spawner_reaped()'s, with its leases */
static ngx_uint_t
ngx_pty_spawner_has_children(void)
{
    siginfo_t  si;

    ngx_memzero(&si, sizeof(siginfo_t));

    return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}


/* a spawner after another: the range uids that something still runs as */
static void
ngx_pty_spawner_mark_running(void)
{
    DIR                     *dir;
    size_t                   size;
    struct stat              st;
    struct dirent           *de;
    ngx_pty_spawner_conf_t  *sc;
    char                     path[300];

    sc = &ngx_pty_spawner_conf;
    size = sc->last - sc->uid + 1;      /* NGX_PTY_RANGE_MAX at most */

    ngx_pty_uid_used = calloc(size, 1);
    ngx_pty_leases_max = ngx_min(size, 1 << 20);
    ngx_pty_leases = calloc(ngx_pty_leases_max,
                            sizeof(ngx_pty_spawner_lease_t));

    if (ngx_pty_uid_used == NULL || ngx_pty_leases == NULL) {
        _exit(1);
    }

    (void) ngx_pty_random(&ngx_pty_uid_next, sizeof(ngx_pty_uid_next));
    ngx_pty_uid_next %= size;

    dir = opendir("/proc");
    if (dir == NULL) {
        return;
    }

    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9') {
            continue;
        }

        (void) snprintf(path, sizeof(path), "/proc/%s", de->d_name);

        if (stat(path, &st) == 0 && st.st_uid >= sc->uid
            && st.st_uid - sc->uid < size)
        {
            ngx_pty_uid_used[st.st_uid - sc->uid] = 1;
        }
    }

    (void) closedir(dir);
}


/*
 * The archive writer process.
 *
 * It is the only writer of the database, so workers never wait on a
 * write lock and a slow disk delays nothing but this process.  Each pass
 * takes what the sessions' rings hold past its cursors (ring->archived),
 * under each session's lock for the copy only, stores it in one
 * transaction, and only then moves the cursors: a frame is either stored
 * or still in the ring.  While it keeps up (archive_ok in the zone) rings
 * grow rather than evict what it has not stored; when it fails (disk
 * full, read-only, locked, corrupt) it clears that flag, says so once,
 * and tries again every second, recording what the rings dropped
 * meanwhile as gaps.
 */

#include "ngx_pty.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_session.h"
#include "ngx_pty_archive.h"
#include "ngx_pty_archiver.h"
#include "ngx_pty_util.h"

#include <sqlite3.h>
#include <poll.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>


#define NGX_PTY_ARCHIVER_BATCH     (4 * 1024 * 1024)  /* bytes a pass */
#define NGX_PTY_ARCHIVER_SESSIONS  256                /* sessions a pass */
#define NGX_PTY_ARCHIVER_RETRY     1000               /* ms */
#define NGX_PTY_ARCHIVER_LINGER    2000   /* ms after nginx, for Closed */
#define NGX_PTY_ARCHIVER_QUIET     5000   /* ms without gaps: caught up */


enum {
    NGX_PTY_SQL_SESSION_ADD = 0,
    NGX_PTY_SQL_SESSION_GET,
    NGX_PTY_SQL_FRAME_ADD,
    NGX_PTY_SQL_SESSION_END,
    NGX_PTY_SQL_SESSION_SEQ,
    NGX_PTY_SQL_GAP_ADD,
    NGX_PTY_SQL_N
};


static const char  *ngx_pty_archiver_sql[NGX_PTY_SQL_N] = {

    "INSERT OR IGNORE INTO sessions (uuid, name, run, command, principal,"
    " acl, cols, rows, started, keep_frames, keep_ms)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",

    "SELECT sid, last_seq FROM sessions WHERE uuid = ?1",

    "INSERT OR REPLACE INTO frames (sid, seq, ts, kind, target, anchor,"
    " cols, rows, offset, id, data)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",

    "UPDATE sessions SET ended = ?2, exit_code = ?3, reason = ?4,"
    " last_seq = max(last_seq, ?5) WHERE sid = ?1",

    "UPDATE sessions SET last_seq = max(last_seq, ?2) WHERE sid = ?1",

    "INSERT INTO gaps (sid, first, last, at) VALUES (?1, ?2, ?3, ?4)"
};


/* the schema, one step per version: step n takes version n to n + 1 */
static const char  *ngx_pty_archiver_schema[NGX_PTY_ARCHIVE_SCHEMA] = {

    "CREATE TABLE sessions ("
    " sid INTEGER PRIMARY KEY,"
    " uuid TEXT NOT NULL UNIQUE,"
    " name INTEGER NOT NULL,"
    " run INTEGER NOT NULL,"
    " command TEXT NOT NULL,"
    " principal TEXT NOT NULL,"
    " acl BLOB NOT NULL,"
    " cols INTEGER NOT NULL,"
    " rows INTEGER NOT NULL,"
    " started INTEGER NOT NULL,"
    " ended INTEGER,"
    " exit_code INTEGER,"
    " reason TEXT,"
    " keep_frames INTEGER NOT NULL,"
    " keep_ms INTEGER NOT NULL,"
    " last_seq INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX sessions_ended ON sessions (ended);"
    "CREATE INDEX sessions_name ON sessions (name);"
    "CREATE TABLE frames ("
    " sid INTEGER NOT NULL,"
    " seq INTEGER NOT NULL,"
    " ts INTEGER NOT NULL,"
    " kind INTEGER NOT NULL,"
    " target INTEGER NOT NULL,"
    " anchor INTEGER NOT NULL,"
    " cols INTEGER NOT NULL,"
    " rows INTEGER NOT NULL,"
    " offset INTEGER NOT NULL,"
    " id BLOB NOT NULL,"
    " data BLOB NOT NULL,"
    " PRIMARY KEY (sid, seq));"
    "CREATE TABLE gaps ("
    " sid INTEGER NOT NULL,"
    " first INTEGER NOT NULL,"
    " last INTEGER NOT NULL,"
    " at INTEGER NOT NULL);"
    "CREATE INDEX gaps_sid ON gaps (sid);"
};


/* one session's share of a pass */
typedef struct {
    ngx_pty_session_sh_t      *sh;
    int64_t                    sid;
    uint64_t                   seq;       /* stored up to */
    uint64_t                   off;       /* ring cursor once committed */
    ngx_uint_t                 done;      /* its Closed is in */
} ngx_pty_archiver_item_t;


static ngx_pty_archiver_conf_t  *ngx_pty_archiver_cf;
static sqlite3                  *ngx_pty_db;
static sqlite3_stmt             *ngx_pty_stmt[NGX_PTY_SQL_N];
static ngx_uint_t                ngx_pty_gen;
static int64_t                   ngx_pty_run;

static u_char                   *ngx_pty_copy;
static size_t                    ngx_pty_copy_size;

/* a failure's episode: said once, retried every second */
static ngx_uint_t                ngx_pty_failing;
static uint64_t                  ngx_pty_failed_at;
static uint64_t                  ngx_pty_retry_at;
static ngx_uint_t                ngx_pty_corrupt;

/* a falling-behind episode: said once, its losses summed at its end */
static uint64_t                  ngx_pty_behind_at;
static uint64_t                  ngx_pty_behind_last;
static uint64_t                  ngx_pty_behind_frames;
static ngx_uint_t                ngx_pty_behind_gaps;

static ngx_uint_t                ngx_pty_over_size;


static void ngx_pty_archiver_main(ngx_cycle_t *cycle, int ctl)
    ngx_pty_noreturn;
static int ngx_pty_archiver_setup(ngx_cycle_t *cycle, int ctl);
static int ngx_pty_archiver_bind(void);
static ngx_uint_t ngx_pty_archiver_woken(int fd);
static ngx_int_t ngx_pty_archiver_open(void);
static void ngx_pty_archiver_close(void);
static ngx_int_t ngx_pty_archiver_migrate(void);
static ngx_int_t ngx_pty_archiver_orphans(void);
static ngx_int_t ngx_pty_archiver_exec(const char *sql);
static void ngx_pty_archiver_failed(const char *what);
static void ngx_pty_archiver_recovered(void);
static void ngx_pty_archiver_aside(void);
static ngx_uint_t ngx_pty_archiver_pass(ngx_uint_t *live);
static ngx_uint_t ngx_pty_archiver_collect(ngx_pty_archiver_item_t *items,
    ngx_uint_t *live);
static ngx_int_t ngx_pty_archiver_row(ngx_pty_archiver_item_t *it);
static ngx_int_t ngx_pty_archiver_take(ngx_pty_archiver_item_t *it,
    size_t *budget, ngx_uint_t *more);
static ngx_int_t ngx_pty_archiver_store(ngx_pty_archiver_item_t *it,
    u_char *p, u_char *last);
static ngx_int_t ngx_pty_archiver_gap(ngx_pty_archiver_item_t *it,
    uint64_t first, uint64_t last);
static void ngx_pty_archiver_publish(ngx_pty_archiver_item_t *it);
static void ngx_pty_archiver_caught_up(void);
static void ngx_pty_archiver_prune(void);
static ngx_int_t ngx_pty_archiver_prune_ended(int64_t before);
static ngx_int_t ngx_pty_archiver_prune_live(void);
static ngx_int_t ngx_pty_archiver_prune_size(void);
static ngx_int_t ngx_pty_archiver_drop(int64_t sid);
static int64_t ngx_pty_archiver_int(const char *sql);


socklen_t
ngx_pty_archiver_address(struct sockaddr_un *sa)
{
    u_char  *p;

    ngx_memzero(sa, sizeof(struct sockaddr_un));
    sa->sun_family = AF_UNIX;

    /* the abstract namespace: one writer per zone can bind it */
    p = ngx_snprintf((u_char *) sa->sun_path + 1, sizeof(sa->sun_path) - 1,
                     "ngx_pty_archive/%016xL", ngx_pty_shm_zone()->sh->nonce);

    return (socklen_t) (offsetof(struct sockaddr_un, sun_path)
                        + (p - (u_char *) sa->sun_path));
}


ngx_pid_t
ngx_pty_archiver_fork(ngx_cycle_t *cycle, ngx_pty_archiver_conf_t *conf,
    int *ctl)
{
    int        sv[2];
    ngx_pid_t  pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "pty: socketpair() for the archive writer failed");
        return NGX_INVALID_PID;
    }

    pid = fork();

    if (pid == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "pty: fork() of the archive writer failed");
        close(sv[0]);
        close(sv[1]);
        return NGX_INVALID_PID;
    }

    if (pid == 0) {
        close(sv[0]);
        ngx_pty_archiver_cf = conf;
        ngx_pty_archiver_main(cycle, sv[1]);
    }

    close(sv[1]);
    *ctl = sv[0];

    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "pty: archive writer %P started for \"%s\"", pid,
                  conf->path);

    return pid;
}


static void
ngx_pty_archiver_main(ngx_cycle_t *cycle, int ctl)
{
    int              wake, timeout;
    char             b;
    uint64_t         now, prune_at, stop_at;
    ngx_uint_t       more, live, stopping;
    struct pollfd    pfd[2];
    ngx_pty_shm_t   *zsh;

    ctl = ngx_pty_archiver_setup(cycle, ctl);

    zsh = ngx_pty_shm_zone()->sh;

    /* a writer of the configuration before may still be finishing */
    while ((wake = ngx_pty_archiver_bind()) == -1) {
        if (poll(&(struct pollfd) { ctl, POLLIN, 0 }, 1, 50) == 1) {
            _exit(0);
        }
    }

    ngx_pty_gen = ngx_atomic_fetch_add(&zsh->archive_gen, 1) + 1;
    ngx_pty_run = (int64_t) zsh->nonce;
    zsh->archiver = ngx_pid;
    zsh->archive_rung = 0;

    ngx_time_update();

    if (ngx_pty_archiver_open() == NGX_OK) {
        zsh->archive_ok = 1;
    }

    now = ngx_pty_now_ms();
    prune_at = now;
    stop_at = 0;
    stopping = 0;
    more = 1;
    live = 0;

    for ( ;; ) {
        ngx_time_update();
        now = ngx_pty_now_ms();

        if (ngx_pty_db == NULL || ngx_pty_failing) {
            if (now >= ngx_pty_retry_at) {
                ngx_pty_retry_at = now + NGX_PTY_ARCHIVER_RETRY;

                if (ngx_pty_db == NULL) {
                    (void) ngx_pty_archiver_open();
                }

                more = 1;
            }
        }

        if (ngx_pty_db && more) {
            more = ngx_pty_archiver_pass(&live);
        }

        if (ngx_pty_db && !ngx_pty_failing && now >= prune_at) {
            ngx_pty_archiver_prune();
            prune_at = now + ngx_pty_archiver_cf->prune;
        }

        if (stopping && (!more || ngx_pty_failing)
            && (live == 0 || now >= stop_at))
        {
            break;
        }

        timeout = more && !ngx_pty_failing ? 0
                  : (int) ngx_min(prune_at - ngx_min(prune_at, now),
                                  60000);

        if (ngx_pty_db == NULL || ngx_pty_failing) {
            timeout = ngx_min(timeout, NGX_PTY_ARCHIVER_RETRY);
        }

        if (stopping) {
            /* the keepers append their Closed as nginx goes: look again */
            timeout = ngx_min(timeout, 50);
            more = 1;
        }

        pfd[0].fd = wake;
        pfd[0].events = POLLIN;
        pfd[1].fd = stopping ? -1 : ctl;
        pfd[1].events = POLLIN;

        if (poll(pfd, 2, timeout) == -1 && errno != EINTR) {
            break;
        }

        if (pfd[0].revents & POLLIN) {
            more |= ngx_pty_archiver_woken(wake);
        }

        if (pfd[1].revents) {
            /*
             * A byte: a new writer takes over.  The end of the line: the
             * master is gone (only it holds the other end), and the
             * keepers append their sessions' Closed: wait a little.
             */
            stopping = 1;
            stop_at = ngx_pty_now_ms()
                      + (recv(ctl, &b, 1, MSG_DONTWAIT) == 1
                         ? 0 : NGX_PTY_ARCHIVER_LINGER);
            more = 1;
        }
    }

    zsh->archive_ok = 0;
    (void) ngx_atomic_cmp_set(&zsh->archiver, ngx_pid, 0);

    ngx_pty_archiver_caught_up();
    ngx_pty_archiver_close();

    _exit(0);
}


/*
 * Nothing of the master's but the error log and the zone; the workers'
 * user; not dumpable (terminal contents pass through it).  Its line to
 * the master becomes descriptor 3.
 */
static int
ngx_pty_archiver_setup(ngx_cycle_t *cycle, int ctl)
{
    int                       fd, log;
    ngx_uint_t                i;
    struct sigaction          sa;
    ngx_pty_archiver_conf_t  *cf;

    cf = ngx_pty_archiver_cf;

    ngx_pid = ngx_getpid();
    ngx_process = NGX_PROCESS_HELPER;

    /* at a first start the global is still nginx's bootstrap cycle */
    ngx_cycle = cycle;
    ngx_use_stderr = 0;

    ngx_setproctitle("pty archive writer");

    (void) setsid();

    log = cycle->log->file ? cycle->log->file->fd : -1;

    if (log > STDERR_FILENO) {
        if (dup2(log, STDERR_FILENO) == -1) {
            _exit(1);
        }

        cycle->log->file->fd = STDERR_FILENO;
    }

    for (i = 0; i < cycle->listening.nelts; i++) {
        (void) close(((ngx_listening_t *) cycle->listening.elts)[i].fd);
    }

    fd = fcntl(ctl, F_DUPFD_CLOEXEC, 16);
    if (fd == -1) {
        _exit(1);
    }

    /* the rest: the spawner's line, other zones' descriptors, keepers' */
    if (syscall(SYS_close_range, 3U, (unsigned int) fd - 1, 0) == -1
        || syscall(SYS_close_range, (unsigned int) fd + 1, ~0U, 0) == -1)
    {
        _exit(1);
    }

    if (dup2(fd, 3) == -1) {
        _exit(1);
    }

    (void) close(fd);

    ngx_memzero(&sa, sizeof(struct sigaction));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);

    for (fd = 1; fd < NSIG; fd++) {
        (void) sigaction(fd, &sa, NULL);
    }

    sa.sa_handler = SIG_IGN;
    (void) sigaction(SIGPIPE, &sa, NULL);
    (void) sigaction(SIGHUP, &sa, NULL);
    (void) sigaction(SIGINT, &sa, NULL);
    (void) sigaction(SIGQUIT, &sa, NULL);
    (void) sigaction(SIGUSR1, &sa, NULL);
    (void) sigaction(SIGUSR2, &sa, NULL);
    (void) sigaction(SIGWINCH, &sa, NULL);

    sigemptyset(&sa.sa_mask);
    (void) sigprocmask(SIG_SETMASK, &sa.sa_mask, NULL);

    if (geteuid() == 0) {
        if (setgid(cf->gid) == -1
            || (cf->user && initgroups((char *) cf->user, cf->gid) == -1)
            || setuid(cf->uid) == -1)
        {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                          "pty: the archive writer cannot become the "
                          "workers' user %ui", (ngx_uint_t) cf->uid);
            _exit(1);
        }
    }

    (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    return 3;
}


/* -1: another writer has it still */
static int
ngx_pty_archiver_bind(void)
{
    int                 fd, on;
    socklen_t           len;
    struct sockaddr_un  sa;

    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1) {
        _exit(1);
    }

    on = 1;
    (void) setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(int));

    len = ngx_pty_archiver_address(&sa);

    if (bind(fd, (struct sockaddr *) &sa, len) == -1) {
        close(fd);

        if (errno != EADDRINUSE) {
            _exit(1);
        }

        return -1;
    }

    return fd;
}


/* wake-ups from the workers' user only: 1 if one came */
static ngx_uint_t
ngx_pty_archiver_woken(int fd)
{
    u_char          b;
    ngx_uint_t      woken;
    struct iovec    iov;
    struct msghdr   msg;
    struct ucred   *cr;
    struct cmsghdr *cm;
    union {
        struct cmsghdr  cm;
        u_char          buf[CMSG_SPACE(sizeof(struct ucred))];
    } ctrl;

    woken = 0;

    for ( ;; ) {
        ngx_memzero(&msg, sizeof(struct msghdr));
        iov.iov_base = &b;
        iov.iov_len = 1;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = &ctrl;
        msg.msg_controllen = sizeof(ctrl);

        if (recvmsg(fd, &msg, MSG_DONTWAIT) == -1) {
            break;
        }

        cm = CMSG_FIRSTHDR(&msg);

        if (cm && cm->cmsg_type == SCM_CREDENTIALS) {
            cr = (struct ucred *) CMSG_DATA(cm);
            woken |= (cr->uid == geteuid());
        }
    }

    /* cleared before the pass: a ring after this is sent again */
    ngx_pty_shm_zone()->sh->archive_rung = 0;

    return woken;
}


/* ---- the database ---- */


static ngx_int_t
ngx_pty_archiver_open(void)
{
    int           rc;
    ngx_uint_t    i;
    const char   *mode;
    sqlite3_stmt *st;

    if (ngx_pty_corrupt) {
        ngx_pty_archiver_aside();
    }

    rc = sqlite3_open_v2((char *) ngx_pty_archiver_cf->path, &ngx_pty_db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                         | SQLITE_OPEN_NOMUTEX, NULL);

    if (rc != SQLITE_OK) {
        ngx_pty_archiver_failed("open");
        ngx_pty_archiver_close();
        return NGX_ERROR;
    }

    (void) sqlite3_extended_result_codes(ngx_pty_db, 1);
    (void) sqlite3_busy_timeout(ngx_pty_db, 200);

    /* a new file only: how freed pages go back to the disk */
    if (ngx_pty_archiver_exec("PRAGMA auto_vacuum = INCREMENTAL") != NGX_OK) {
        goto failed;
    }

    if (sqlite3_prepare_v2(ngx_pty_db, "PRAGMA journal_mode = WAL", -1, &st,
                           NULL) != SQLITE_OK)
    {
        goto failed;
    }

    rc = sqlite3_step(st);
    mode = (rc == SQLITE_ROW) ? (const char *) sqlite3_column_text(st, 0)
                              : NULL;

    if (mode == NULL || ngx_strcmp(mode, "wal") != 0) {
        (void) sqlite3_finalize(st);
        goto failed;
    }

    (void) sqlite3_finalize(st);

    if (ngx_pty_archiver_exec("PRAGMA synchronous = NORMAL") != NGX_OK
        || ngx_pty_archiver_exec("PRAGMA journal_size_limit = 67108864")
           != NGX_OK
        || ngx_pty_archiver_migrate() != NGX_OK)
    {
        goto failed;
    }

    for (i = 0; i < NGX_PTY_SQL_N; i++) {
        if (sqlite3_prepare_v3(ngx_pty_db, ngx_pty_archiver_sql[i], -1,
                               SQLITE_PREPARE_PERSISTENT, &ngx_pty_stmt[i],
                               NULL)
            != SQLITE_OK)
        {
            goto failed;
        }
    }

    if (ngx_pty_archiver_orphans() != NGX_OK) {
        goto failed;
    }

    ngx_pty_archiver_recovered();

    return NGX_OK;

failed:

    ngx_pty_archiver_failed("open");
    ngx_pty_archiver_close();

    return NGX_ERROR;
}


static void
ngx_pty_archiver_close(void)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_PTY_SQL_N; i++) {
        if (ngx_pty_stmt[i]) {
            (void) sqlite3_finalize(ngx_pty_stmt[i]);
            ngx_pty_stmt[i] = NULL;
        }
    }

    if (ngx_pty_db) {
        (void) sqlite3_close_v2(ngx_pty_db);
        ngx_pty_db = NULL;
    }
}


/* from the file's version up to ours, each step in a transaction */
static ngx_int_t
ngx_pty_archiver_migrate(void)
{
    u_char   sql[64];
    int64_t  v;

    v = ngx_pty_archiver_int("PRAGMA user_version");

    if (v < 0) {
        return NGX_ERROR;
    }

    if (v > NGX_PTY_ARCHIVE_SCHEMA) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                      "pty: the archive \"%s\" has schema version %L, newer "
                      "than this module's %d: it is left alone",
                      ngx_pty_archiver_cf->path, v, NGX_PTY_ARCHIVE_SCHEMA);
        return NGX_ERROR;
    }

    for ( /* void */ ; v < NGX_PTY_ARCHIVE_SCHEMA; v++) {
        ngx_sprintf(sql, "PRAGMA user_version = %L%Z", v + 1);

        if (ngx_pty_archiver_exec("BEGIN IMMEDIATE") != NGX_OK) {
            return NGX_ERROR;
        }

        if (ngx_pty_archiver_exec(ngx_pty_archiver_schema[v]) != NGX_OK
            || ngx_pty_archiver_exec((char *) sql) != NGX_OK
            || ngx_pty_archiver_exec("COMMIT") != NGX_OK)
        {
            (void) sqlite3_exec(ngx_pty_db, "ROLLBACK", NULL, NULL, NULL);
            return NGX_ERROR;
        }

        if (v > 0) {
            ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                          "pty: the archive \"%s\" moved to schema version "
                          "%L", ngx_pty_archiver_cf->path, v + 1);
        }
    }

    return NGX_OK;
}


/*
 * Sessions of an nginx run before this one that did not end by
 * themselves (nginx was killed, the host went down) end now, with a
 * Closed instance_terminated after their last frame: replay ends with it.
 */
static ngx_int_t
ngx_pty_archiver_orphans(void)
{
    u_char         buf[NGX_PTY_CLOSED_MAX], id[16];
    size_t         len;
    int64_t        sid, seq, ts;
    ngx_int_t      rc;
    sqlite3_stmt  *sel, *st;

    if (sqlite3_prepare_v2(ngx_pty_db,
            "SELECT s.sid, s.last_seq, coalesce((SELECT max(ts) FROM frames"
            " f WHERE f.sid = s.sid), s.started) FROM sessions s"
            " WHERE s.ended IS NULL AND s.run <> ?1 LIMIT 1", -1, &sel, NULL)
        != SQLITE_OK)
    {
        return NGX_ERROR;
    }

    len = ngx_pty_closed_json(buf, sizeof(buf),
                              NGX_PTY_CLOSED_INSTANCE_TERMINATED, -1,
                              "instance_terminated: nginx ended without "
                              "closing it");
    rc = NGX_OK;

    for ( ;; ) {
        (void) sqlite3_reset(sel);
        (void) sqlite3_bind_int64(sel, 1, ngx_pty_run);

        if (sqlite3_step(sel) != SQLITE_ROW) {
            break;
        }

        sid = sqlite3_column_int64(sel, 0);
        seq = sqlite3_column_int64(sel, 1);
        ts = sqlite3_column_int64(sel, 2);

        /* the read ends before the write */
        (void) sqlite3_reset(sel);

        ngx_pty_uuid7_fast(id, (uint64_t) ts);

        if (ngx_pty_archiver_exec("BEGIN IMMEDIATE") != NGX_OK) {
            rc = NGX_ERROR;
            break;
        }

        st = ngx_pty_stmt[NGX_PTY_SQL_FRAME_ADD];
        (void) sqlite3_reset(st);
        (void) sqlite3_bind_int64(st, 1, sid);
        (void) sqlite3_bind_int64(st, 2, seq + 1);
        (void) sqlite3_bind_int64(st, 3, ts);
        (void) sqlite3_bind_int(st, 4, NGX_PTY_FRAME_CLOSED);
        (void) sqlite3_bind_int(st, 5, 0);
        (void) sqlite3_bind_int(st, 6, 0);
        (void) sqlite3_bind_int(st, 7, 0);
        (void) sqlite3_bind_int(st, 8, 0);
        (void) sqlite3_bind_int(st, 9, 0);
        (void) sqlite3_bind_blob(st, 10, id, 16, SQLITE_STATIC);
        (void) sqlite3_bind_blob(st, 11, buf, (int) len, SQLITE_STATIC);

        if (sqlite3_step(st) != SQLITE_DONE) {
            goto failed;
        }

        st = ngx_pty_stmt[NGX_PTY_SQL_SESSION_END];
        (void) sqlite3_reset(st);
        (void) sqlite3_bind_int64(st, 1, sid);
        (void) sqlite3_bind_int64(st, 2, ts);
        (void) sqlite3_bind_null(st, 3);
        (void) sqlite3_bind_text(st, 4, "instance_terminated", -1,
                                 SQLITE_STATIC);
        (void) sqlite3_bind_int64(st, 5, seq + 1);

        if (sqlite3_step(st) != SQLITE_DONE
            || ngx_pty_archiver_exec("COMMIT") != NGX_OK)
        {
            goto failed;
        }
    }

    (void) sqlite3_finalize(sel);

    return rc;

failed:

    (void) sqlite3_exec(ngx_pty_db, "ROLLBACK", NULL, NULL, NULL);
    (void) sqlite3_finalize(sel);

    return NGX_ERROR;
}


static ngx_int_t
ngx_pty_archiver_exec(const char *sql)
{
    return sqlite3_exec(ngx_pty_db, sql, NULL, NULL, NULL) == SQLITE_OK
           ? NGX_OK : NGX_ERROR;
}


/* the first column of the first row; -1 on an error */
static int64_t
ngx_pty_archiver_int(const char *sql)
{
    int64_t        v;
    sqlite3_stmt  *st;

    if (sqlite3_prepare_v2(ngx_pty_db, sql, -1, &st, NULL) != SQLITE_OK) {
        return -1;
    }

    v = (sqlite3_step(st) == SQLITE_ROW) ? sqlite3_column_int64(st, 0) : -1;

    (void) sqlite3_finalize(st);

    return v;
}


/*
 * A failure's first line says what and why; the next ones are silent
 * until it works again.  Rings stop keeping frames for the archive.
 */
static void
ngx_pty_archiver_failed(const char *what)
{
    int          code;
    const char  *msg;

    code = ngx_pty_db ? sqlite3_extended_errcode(ngx_pty_db) : SQLITE_NOMEM;
    msg = ngx_pty_db ? sqlite3_errmsg(ngx_pty_db) : "out of memory";

    if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB) {
        /* it will not heal: moved aside at the next try, a new one made */
        ngx_pty_corrupt = 1;
    }

    ngx_pty_shm_zone()->sh->archive_ok = 0;
    ngx_pty_retry_at = ngx_pty_now_ms() + NGX_PTY_ARCHIVER_RETRY;

    if (ngx_pty_failing) {
        return;
    }

    ngx_pty_failing = 1;
    ngx_pty_failed_at = ngx_pty_now_ms();

    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                  "pty: the archive \"%s\" failed (%s): %s (%d); terminals "
                  "go on without it, and it is tried again every second",
                  ngx_pty_archiver_cf->path, what, msg, code);
}


static void
ngx_pty_archiver_recovered(void)
{
    ngx_pty_shm_zone()->sh->archive_ok = 1;

    if (!ngx_pty_failing) {
        return;
    }

    ngx_pty_failing = 0;

    ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                  "pty: the archive \"%s\" works again after %uL ms",
                  ngx_pty_archiver_cf->path,
                  ngx_pty_now_ms() - ngx_pty_failed_at);
}


/* a corrupt file goes aside (named with the time), a new one is made */
static void
ngx_pty_archiver_aside(void)
{
    u_char       *path;
    size_t        len;
    ngx_uint_t    i;
    static char  *ext[] = { "", "-wal", "-shm" };
    u_char        from[NGX_MAX_PATH], to[NGX_MAX_PATH];

    ngx_pty_corrupt = 0;
    path = ngx_pty_archiver_cf->path;
    len = ngx_pty_archiver_cf->path_len;

    if (len + 32 > NGX_MAX_PATH) {
        return;
    }

    for (i = 0; i < 3; i++) {
        ngx_sprintf(from, "%s%s%Z", path, ext[i]);
        ngx_sprintf(to, "%s.corrupt-%uL%s%Z", path, ngx_pty_now_ms(), ext[i]);
        (void) rename((char *) from, (char *) to);
    }

    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                  "pty: the archive \"%s\" is corrupt: moved aside as "
                  "\"%s.corrupt-...\", a new one is made", path, path);
}


/* ---- a pass over the rings ---- */


/* 1: there is more to take at once */
static ngx_uint_t
ngx_pty_archiver_pass(ngx_uint_t *live)
{
    size_t                    budget;
    ngx_uint_t                i, n, more;
    ngx_pty_archiver_item_t   items[NGX_PTY_ARCHIVER_SESSIONS];

    n = ngx_pty_archiver_collect(items, live);
    more = (n == NGX_PTY_ARCHIVER_SESSIONS);

    if (n == 0) {
        ngx_pty_archiver_caught_up();
        return 0;
    }

    budget = NGX_PTY_ARCHIVER_BATCH;

    if (ngx_pty_archiver_exec("BEGIN IMMEDIATE") != NGX_OK) {
        ngx_pty_archiver_failed("begin");
        goto release;
    }

    for (i = 0; i < n; i++) {
        if (ngx_pty_archiver_row(&items[i]) != NGX_OK
            || ngx_pty_archiver_take(&items[i], &budget, &more) != NGX_OK)
        {
            goto failed;
        }
    }

    if (ngx_pty_archiver_exec("COMMIT") != NGX_OK) {
        goto failed;
    }

    for (i = 0; i < n; i++) {
        ngx_pty_archiver_publish(&items[i]);
    }

    ngx_pty_archiver_recovered();
    ngx_pty_archiver_caught_up();

    goto release;

failed:

    ngx_pty_archiver_failed("write");
    (void) sqlite3_exec(ngx_pty_db, "ROLLBACK", NULL, NULL, NULL);
    more = 0;

release:

    for (i = 0; i < n; i++) {
        ngx_pty_shm_session_release(items[i].sh);
    }

    return more;
}


/* the sessions with something to store, retained; *live: not yet ended */
static ngx_uint_t
ngx_pty_archiver_collect(ngx_pty_archiver_item_t *items, ngx_uint_t *live)
{
    ngx_uint_t             n;
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_session_sh_t  *s;

    zone = ngx_pty_shm_zone();
    n = 0;
    *live = 0;

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_next(q))
    {
        s = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        *live += (s->state < NGX_PTY_STATE_CLOSED);

        if (n == NGX_PTY_ARCHIVER_SESSIONS) {
            continue;
        }

        /* read without the session lock: a hint, checked under it */
        if (s->archive_gen == ngx_pty_gen
            && s->ring->head <= s->ring->archived
            && (s->archive_done || s->state < NGX_PTY_STATE_CLOSED))
        {
            continue;
        }

        (void) ngx_atomic_fetch_add(&s->refs, 1);
        ngx_memzero(&items[n], sizeof(ngx_pty_archiver_item_t));
        items[n++].sh = s;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return n;
}


/* the session's row: made the first time this writer sees the session */
static ngx_int_t
ngx_pty_archiver_row(ngx_pty_archiver_item_t *it)
{
    u_char                *p, *last, *principal;
    size_t                 plen;
    sqlite3_stmt          *st;
    ngx_pty_session_sh_t  *s;

    s = it->sh;

    if (s->archive_gen == ngx_pty_gen) {
        it->sid = (int64_t) s->archive_sid;
        it->seq = s->archive_seq;
        return NGX_OK;
    }

    /* the owner: the acl's 'O' entry (ngx_pty_auth.c), written once */
    principal = (u_char *) "";
    plen = 0;
    p = s->acl;
    last = p ? p + s->acl_len : NULL;

    if (p && last - p >= 2 && p[0] == 'O' && (size_t) (last - p - 2) >= p[1])
    {
        principal = p + 2;
        plen = p[1];
    }

    st = ngx_pty_stmt[NGX_PTY_SQL_SESSION_ADD];
    (void) sqlite3_reset(st);
    (void) sqlite3_bind_text(st, 1, (char *) s->id, NGX_PTY_ID_LEN,
                             SQLITE_STATIC);
    (void) sqlite3_bind_int64(st, 2, (int64_t) s->name);
    (void) sqlite3_bind_int64(st, 3, ngx_pty_run);
    (void) sqlite3_bind_text(st, 4, (char *) s->command,
                             (int) s->command_len, SQLITE_STATIC);
    (void) sqlite3_bind_text(st, 5, (char *) principal, (int) plen,
                             SQLITE_STATIC);
    (void) sqlite3_bind_blob(st, 6, s->acl ? (void *) s->acl : (void *) "",
                             (int) s->acl_len, SQLITE_STATIC);
    (void) sqlite3_bind_int64(st, 7, (int64_t) s->cols);
    (void) sqlite3_bind_int64(st, 8, (int64_t) s->rows);
    (void) sqlite3_bind_int64(st, 9, (int64_t) s->created * 1000);
    (void) sqlite3_bind_int64(st, 10,
                              (int64_t) s->params.replay_buffer_frames);
    (void) sqlite3_bind_int64(st, 11,
                 (int64_t) s->params.replay_buffer_retention_seconds * 1000);

    if (sqlite3_step(st) != SQLITE_DONE) {
        return NGX_ERROR;
    }

    st = ngx_pty_stmt[NGX_PTY_SQL_SESSION_GET];
    (void) sqlite3_reset(st);
    (void) sqlite3_bind_text(st, 1, (char *) s->id, NGX_PTY_ID_LEN,
                             SQLITE_STATIC);

    if (sqlite3_step(st) != SQLITE_ROW) {
        return NGX_ERROR;
    }

    it->sid = sqlite3_column_int64(st, 0);
    it->seq = (uint64_t) sqlite3_column_int64(st, 1);

    /* a statement left stepping would keep its snapshot past COMMIT */
    (void) sqlite3_reset(st);

    /* the cursor follows the database: a new file gets what rings hold */
    ngx_pty_shm_lock(s);
    s->ring->archived = ngx_pty_ring_find(s->ring, it->seq);
    ngx_pty_shm_unlock(s);

    return NGX_OK;
}


/*
 * Copies the records past the cursor (under the session lock: memory
 * only), then stores them.  What the ring dropped before the archive
 * could take it is recorded as a gap.
 */
static ngx_int_t
ngx_pty_archiver_take(ngx_pty_archiver_item_t *it, size_t *budget,
    ngx_uint_t *more)
{
    u_char                *p;
    size_t                 len, need;
    uint64_t               off, prev;
    ngx_int_t              ended, exit_code;
    ngx_uint_t             reason, full;
    uint64_t               closed_at;
    ngx_pty_ring_t        *ring;
    ngx_pty_frame_t       *f;
    ngx_pty_session_sh_t  *s;
    u_char                 reason_buf[32];

    s = it->sh;
    ring = s->ring;
    len = 0;
    full = 0;

    ngx_pty_shm_lock(s);

    off = ngx_max(ring->archived, ring->tail);

    for ( ;; ) {
        prev = off;
        f = ngx_pty_ring_read(ring, &off);

        if (f == NULL) {
            break;
        }

        need = ngx_align(sizeof(ngx_pty_frame_t) + f->len, 8);

        if (len + need > *budget && len > 0) {
            off = prev;
            full = 1;
            break;
        }

        if (len + need > ngx_pty_copy_size) {
            p = realloc(ngx_pty_copy, ngx_max(len + need,
                                              NGX_PTY_ARCHIVER_BATCH));
            if (p == NULL) {
                off = prev;
                full = 1;
                break;
            }

            ngx_pty_copy = p;
            ngx_pty_copy_size = ngx_max(len + need, NGX_PTY_ARCHIVER_BATCH);
        }

        ngx_memcpy(ngx_pty_copy + len, f, sizeof(ngx_pty_frame_t) + f->len);
        len += need;
    }

    it->off = off;
    ended = (s->state >= NGX_PTY_STATE_CLOSED && !full);
    exit_code = s->exit_code;
    reason = s->closed_reason;
    closed_at = s->closed_at;

    ngx_pty_shm_unlock(s);

    *budget -= ngx_min(*budget, len);
    *more |= full;

    if (ngx_pty_archiver_store(it, ngx_pty_copy, ngx_pty_copy + len)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (!ended) {
        sqlite3_stmt  *st = ngx_pty_stmt[NGX_PTY_SQL_SESSION_SEQ];

        (void) sqlite3_reset(st);
        (void) sqlite3_bind_int64(st, 1, it->sid);
        (void) sqlite3_bind_int64(st, 2, (int64_t) it->seq);

        return sqlite3_step(st) == SQLITE_DONE ? NGX_OK : NGX_ERROR;
    }

    ngx_sprintf(reason_buf, "%s%Z", ngx_pty_closed_reasons[reason]);

    {
        sqlite3_stmt  *st = ngx_pty_stmt[NGX_PTY_SQL_SESSION_END];

        (void) sqlite3_reset(st);
        (void) sqlite3_bind_int64(st, 1, it->sid);
        (void) sqlite3_bind_int64(st, 2, (int64_t) closed_at);

        if (exit_code >= 0) {
            (void) sqlite3_bind_int64(st, 3, (int64_t) exit_code);

        } else {
            (void) sqlite3_bind_null(st, 3);
        }

        (void) sqlite3_bind_text(st, 4, (char *) reason_buf, -1,
                                 SQLITE_TRANSIENT);
        (void) sqlite3_bind_int64(st, 5, (int64_t) it->seq);

        if (sqlite3_step(st) != SQLITE_DONE) {
            return NGX_ERROR;
        }
    }

    it->done = 1;

    return NGX_OK;
}


static ngx_int_t
ngx_pty_archiver_store(ngx_pty_archiver_item_t *it, u_char *p, u_char *last)
{
    sqlite3_stmt     *st;
    ngx_pty_frame_t  *f;

    st = ngx_pty_stmt[NGX_PTY_SQL_FRAME_ADD];

    for ( /* void */ ; p < last;
         p += ngx_align(sizeof(ngx_pty_frame_t) + f->len, 8))
    {
        f = (ngx_pty_frame_t *) p;

        if (f->seq <= it->seq) {
            continue;
        }

        if (f->seq > it->seq + 1
            && ngx_pty_archiver_gap(it, it->seq + 1, f->seq - 1) != NGX_OK)
        {
            return NGX_ERROR;
        }

        it->seq = f->seq;

        if (f->kind == NGX_PTY_FRAME_REVOKE) {
            /* a signal to the workers, not a frame anyone sees */
            continue;
        }

        (void) sqlite3_reset(st);
        (void) sqlite3_bind_int64(st, 1, it->sid);
        (void) sqlite3_bind_int64(st, 2, (int64_t) f->seq);
        (void) sqlite3_bind_int64(st, 3, (int64_t) f->ts);
        (void) sqlite3_bind_int(st, 4, f->kind);
        (void) sqlite3_bind_int64(st, 5, f->target);
        (void) sqlite3_bind_int64(st, 6, (int64_t) f->anchor);
        (void) sqlite3_bind_int(st, 7, f->cols);
        (void) sqlite3_bind_int(st, 8, f->rows);
        (void) sqlite3_bind_int64(st, 9, (int64_t) f->offset);
        (void) sqlite3_bind_blob(st, 10, f->id, 16, SQLITE_STATIC);
        (void) sqlite3_bind_blob(st, 11, ngx_pty_frame_data(f), (int) f->len,
                                 SQLITE_STATIC);

        if (sqlite3_step(st) != SQLITE_DONE) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* frames the ring dropped before they were stored: said once a while */
static ngx_int_t
ngx_pty_archiver_gap(ngx_pty_archiver_item_t *it, uint64_t first,
    uint64_t last)
{
    uint64_t       now;
    sqlite3_stmt  *st;

    now = ngx_pty_now_ms();

    st = ngx_pty_stmt[NGX_PTY_SQL_GAP_ADD];
    (void) sqlite3_reset(st);
    (void) sqlite3_bind_int64(st, 1, it->sid);
    (void) sqlite3_bind_int64(st, 2, (int64_t) first);
    (void) sqlite3_bind_int64(st, 3, (int64_t) last);
    (void) sqlite3_bind_int64(st, 4, (int64_t) now);

    if (sqlite3_step(st) != SQLITE_DONE) {
        return NGX_ERROR;
    }

    if (ngx_pty_behind_at == 0) {
        ngx_pty_behind_at = now;

        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "pty: the archive fell behind the ring of session "
                      "pty-%ui: frames %uL to %uL were not stored (recorded "
                      "as a gap); more such losses are counted until it "
                      "catches up", it->sh->name, first, last);
    }

    ngx_pty_behind_last = now;
    ngx_pty_behind_frames += last - first + 1;
    ngx_pty_behind_gaps++;

    return NGX_OK;
}


static void
ngx_pty_archiver_caught_up(void)
{
    if (ngx_pty_behind_at == 0
        || ngx_pty_now_ms() - ngx_pty_behind_last < NGX_PTY_ARCHIVER_QUIET)
    {
        return;
    }

    ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                  "pty: the archive caught up: %uL frames in %ui gaps were "
                  "not stored in %uL ms", ngx_pty_behind_frames,
                  ngx_pty_behind_gaps,
                  ngx_pty_behind_last - ngx_pty_behind_at);

    ngx_pty_behind_at = 0;
    ngx_pty_behind_frames = 0;
    ngx_pty_behind_gaps = 0;
}


/* committed: the cursor moves; an ended session stored whole settles */
static void
ngx_pty_archiver_publish(ngx_pty_archiver_item_t *it)
{
    ngx_uint_t             idle;
    ngx_pty_session_sh_t  *s;

    s = it->sh;

    ngx_pty_shm_lock(s);

    s->ring->archived = ngx_max(s->ring->archived, it->off);
    s->archive_sid = (uint64_t) it->sid;
    s->archive_seq = it->seq;
    s->archive_gen = ngx_pty_gen;
    s->archive_done = it->done;
    idle = it->done && ngx_queue_empty(&s->members);

    ngx_pty_shm_unlock(s);

    if (idle) {
        /* what a late joiner gets stays; the rest is in the archive */
        ngx_pty_shm_session_compact(s);
    }
}


/* ---- pruning ---- */


static void
ngx_pty_archiver_prune(void)
{
    int64_t  now;

    now = (int64_t) ngx_pty_now_ms();

    if (ngx_pty_archiver_prune_ended(now
                                     - (int64_t) ngx_pty_archiver_cf->retention)
        != NGX_OK
        || ngx_pty_archiver_prune_live() != NGX_OK
        || ngx_pty_archiver_prune_size() != NGX_OK)
    {
        ngx_pty_archiver_failed("prune");
        (void) sqlite3_exec(ngx_pty_db, "ROLLBACK", NULL, NULL, NULL);
        return;
    }

    /* freed pages go back to the file system, a bounded number a time */
    (void) ngx_pty_archiver_exec("PRAGMA incremental_vacuum(4096)");
}


/* ended sessions kept longer than pty_archive_retention go */
static ngx_int_t
ngx_pty_archiver_prune_ended(int64_t before)
{
    int64_t        sid;
    sqlite3_stmt  *st;

    if (sqlite3_prepare_v2(ngx_pty_db,
                           "SELECT sid FROM sessions WHERE ended IS NOT NULL"
                           " AND ended < ?1 ORDER BY ended LIMIT 1", -1, &st,
                           NULL)
        != SQLITE_OK)
    {
        return NGX_ERROR;
    }

    for ( ;; ) {
        (void) sqlite3_reset(st);
        (void) sqlite3_bind_int64(st, 1, before);

        if (sqlite3_step(st) != SQLITE_ROW) {
            break;
        }

        sid = sqlite3_column_int64(st, 0);
        (void) sqlite3_reset(st);

        if (ngx_pty_archiver_drop(sid) != NGX_OK) {
            (void) sqlite3_finalize(st);
            return NGX_ERROR;
        }
    }

    (void) sqlite3_finalize(st);

    return NGX_OK;
}


/*
 * A live session keeps at least its replay_buffer_frames newest frames
 * and every frame of its replay_buffer_retention_seconds.
 */
static ngx_int_t
ngx_pty_archiver_prune_live(void)
{
    ngx_int_t  rc;

    if (ngx_pty_archiver_exec("BEGIN IMMEDIATE") != NGX_OK) {
        return NGX_ERROR;
    }

    rc = ngx_pty_archiver_exec(
             "DELETE FROM frames WHERE rowid IN (SELECT f.rowid FROM"
             " sessions s JOIN frames f ON f.sid = s.sid"
             " WHERE s.ended IS NULL"
             " AND f.seq <= s.last_seq - s.keep_frames"
             " AND f.ts < CAST(strftime('%s', 'now') AS INTEGER) * 1000"
             "  - s.keep_ms)");

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_pty_archiver_exec("COMMIT");
}


/* over pty_archive_max_size: the sessions that ended first go first */
static ngx_int_t
ngx_pty_archiver_prune_size(void)
{
    int64_t  used, sid;

    for ( ;; ) {
        used = ngx_pty_archiver_int("SELECT (page_count - freelist_count)"
                                    " * page_size FROM pragma_page_count,"
                                    " pragma_freelist_count,"
                                    " pragma_page_size");
        if (used < 0) {
            return NGX_ERROR;
        }

        if (used <= ngx_pty_archiver_cf->max_size) {
            ngx_pty_over_size = 0;
            return NGX_OK;
        }

        sid = ngx_pty_archiver_int("SELECT sid FROM sessions WHERE ended IS"
                                   " NOT NULL ORDER BY ended LIMIT 1");
        if (sid < 0) {
            break;
        }

        if (ngx_pty_archiver_drop(sid) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (!ngx_pty_over_size) {
        ngx_pty_over_size = 1;
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "pty: the archive \"%s\" holds %L bytes of live "
                      "sessions, over \"pty_archive_max_size\" %O; raise "
                      "it, or lower the sessions' replay retention",
                      ngx_pty_archiver_cf->path, used,
                      ngx_pty_archiver_cf->max_size);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_pty_archiver_drop(int64_t sid)
{
    u_char  sql[160];

    ngx_sprintf(sql, "DELETE FROM frames WHERE sid = %L;"
                "DELETE FROM gaps WHERE sid = %L;"
                "DELETE FROM sessions WHERE sid = %L;%Z", sid, sid, sid);

    if (ngx_pty_archiver_exec("BEGIN IMMEDIATE") != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_pty_archiver_exec((char *) sql) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_pty_archiver_exec("COMMIT");
}
